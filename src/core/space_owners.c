/*
 * Deaths in a shared space, and the public calls that can find one.
 *
 * The files below this one only find deaths: lifeline.c probes and marks
 * slots, the queues (space_lot.c) and the semaphore (space_sema.c) collect
 * the owners they find dead in a sab__deaths_t while they hold a bucket
 * lock. Telling a death means visiting every bucket, so it happens here,
 * after those locks are released: a burial marks the slot (lifeline.c's
 * O2 order: epoch, slot word), then visits the queues with the semaphore's
 * death hook, which may find more deaths, buried in turn. The layers below
 * this one, and the order of them all, are listed in space_layout.h.
 */
#define _GNU_SOURCE
#include "sema_pool.h"
#include "space_sema.h"

#if defined(__linux__)

/* Tell the watchers of `id`, whose slot this call just marked dead, and
 * bury whatever that visit found dead in turn. */
static void tell_within(sab_space_t *sp, uint32_t id) {
  sab__deaths_t more = {{0}, 0};
  sab__space_wake_watchers(sp, id, sab__space_sema_died, &more);
  for (unsigned k = 0; k < more.n; k++) {
    if (sab__slot_mark_dead(sp, more.ids[k])) tell_within(sp, more.ids[k]);
  }
}

/* A visit of many buckets (a telling, a reap, the burials one call
 * collected): a caller with no lock deadline of its own gets one for the
 * whole visit, so that locks held by a co-tenant that never lets go cost
 * it one bound, however many buckets and deaths the visit meets, never
 * one per bucket or per death (forged deaths come by the hundred). Answers
 * the thread's deadline to put back with pass_end. */
static uint64_t pass_begin(void) {
  uint64_t old = sab_space_deadline(UINT64_MAX);
  sab_space_deadline(old != UINT64_MAX ? old : sab_now() + SAB_SLOCK_BOUND_NS);
  return old;
}

static void pass_end(uint64_t old) { sab_space_deadline(old); }

static void tell(sab_space_t *sp, uint32_t id) {
  uint64_t old = pass_begin();
  tell_within(sp, id);
  pass_end(old);
}

/* A death a claim marked without telling it (lifeline.c: sp->untold). */
static void tell_untold(sab_space_t *sp) {
  if (__atomic_load_n(&sp->untold, __ATOMIC_RELAXED) == 0) return;
  uint32_t id = __atomic_exchange_n(&sp->untold, 0, __ATOMIC_ACQ_REL);
  if (id != 0) tell_within(sp, id);
}

/* Bury the deaths a call collected. */
static void bury_all(sab_space_t *sp, sab__deaths_t *dead) {
  if (dead->n == 0 && __atomic_load_n(&sp->untold, __ATOMIC_RELAXED) == 0) return;
  uint64_t old = pass_begin();
  tell_untold(sp);
  for (unsigned k = 0; k < dead->n; k++) {
    if (sab__slot_mark_dead(sp, dead->ids[k])) tell_within(sp, dead->ids[k]);
  }
  dead->n = 0;
  pass_end(old);
}

int sab_space_alive(sab_space_t *sp, uint32_t id) {
  int r = sab__slot_alive(sp, id);
  if (r < 0 && sab__slot_mark_dead(sp, id)) tell(sp, id); /* a death found right now */
  return r > 0;
}

int sab_space_reap(sab_space_t *sp) {
  int deaths = 0;
  uint64_t old = pass_begin();
  tell_untold(sp);
  for (uint32_t i = 0; i < NSLOTS; i++) {
    uint32_t id = sab__slot_live_id(sp, i);
    if (id != 0 && sab__slot_alive(sp, id) < 0) {
      deaths++;
      if (sab__slot_mark_dead(sp, id)) tell_within(sp, id);
    }
  }
  pass_end(old);
  return deaths;
}

int sab_space_register(sab_space_t *sp, uint32_t *id) {
  uint32_t unburied;
  int r = sab__slot_claim(sp, id, &unburied);
  if (r == 0) {
    /* A new tenant has used no object: its slot's bit in every directory
     * entry's users named the last tenant (space.c), and goes before this
     * one can look anything up. */
    uint32_t s = *id & (NSLOTS - 1);
    for (uint32_t i = 0; i < NDIR; i++) {
      __atomic_fetch_and(&sab__users(sp, i)[s / 32], ~(1u << (s % 32)), __ATOMIC_SEQ_CST);
    }
  }
  uint64_t old = pass_begin();
  tell_untold(sp);
  if (unburied != 0) tell_within(sp, unburied);
  pass_end(old);
  return r;
}

void sab_space_unregister(sab_space_t *sp, uint32_t id) {
  /* lifeline.c O1: FREE (marked) before the lifeline is let go. */
  if (sab__slot_mark_dead(sp, id)) tell(sp, id);
  sab__slot_leave(sp, id);
}

uint64_t sab_space_notify(sab_space_t *sp, uint32_t off, uint64_t count) {
  sab__deaths_t dead = {{0}, 0};
  uint64_t n = sab__lot_notify(sp, off, count, &dead);
  bury_all(sp, &dead);
  return n;
}

uint32_t sab_space_waiters(sab_space_t *sp, uint32_t off) {
  sab__deaths_t dead = {{0}, 0};
  uint32_t n = sab__lot_waiters(sp, off, &dead);
  bury_all(sp, &dead);
  return n;
}

int sab_space_sema_acquire(sab_space_t *sp, uint32_t id, uint32_t off, uint32_t flags,
                           uint32_t *token, uint32_t *rec) {
  sab__deaths_t dead = {{0}, 0};
  int r = sab__sema_in_acquire(sp, id, off, flags, token, rec, &dead);
  bury_all(sp, &dead);
  return r;
}

int sab_space_sema_release(sab_space_t *sp, uint32_t id, uint32_t off, int64_t slot,
                           uint32_t *info) {
  sab__deaths_t dead = {{0}, 0};
  int r = sab__sema_in_release(sp, id, off, slot, info, &dead);
  bury_all(sp, &dead);
  return r;
}

void sab_space_sema_give_back(sab_space_t *sp, uint32_t id, uint32_t off, uint32_t token) {
  if (token == SAB_SEMA_NO_TOKEN) {
    /* sema.c F4: a wake to try again that will never be used: pass it on,
     * and the place it kept (F5). */
    sab__deaths_t dead = {{0}, 0};
    sab__sema_in_pass_on(sp, id, off, &dead);
    bury_all(sp, &dead);
    return;
  }
  /* BAD_TOKEN here means: reclaimed already (the owner was seen dead). */
  (void)sab_space_sema_release(sp, id, off, token & ~SAB_SEMA_RECOVERED, NULL);
}

uint32_t sab_space_sema_waiting(sab_space_t *sp, uint32_t off) {
  if (off >= sp->size) return 0;
  sab__deaths_t dead = {{0}, 0};
  uint32_t n = sab__sema_in_waiting(sp, off, &dead);
  bury_all(sp, &dead);
  return n;
}

int sab_space_sema_available(sab_space_t *sp, uint32_t off) {
  sab__deaths_t dead = {{0}, 0};
  int r = sab__sema_in_available(sp, off, &dead);
  bury_all(sp, &dead);
  return r;
}

int sab_space_rate_take(sab_space_t *sp, uint32_t turn_off, uint32_t rate_off, int turn_free_only,
                        uint64_t *at, uint64_t *wait_ns) {
  sab__deaths_t dead = {{0}, 0};
  int r = sab__space_rate_in_take(sp, turn_off, rate_off, turn_free_only, at, wait_ns, &dead);
  bury_all(sp, &dead);
  return r;
}

#endif /* __linux__ */
