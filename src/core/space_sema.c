/*
 * The token semaphore in a shared space: sema.c's pool (sema_pool.h) with
 * the space's queues and owners.
 *
 * The semaphore's memory lies in the space's heap at `off` and has sema.c's
 * layout (and its table of words, reads and checks). Its state changes under
 * the space's bucket lock of `off`; its waiters are records of the space
 * queued with the key off | 1 (in the same bucket: the hash ignores the low
 * two bits), so a plain notify of the first word never meets them. The
 * invariants K1-K4 of sema.c hold as written (no JS fast path runs here: lib/sema.js takes it only
 * for in-process memory), with "the lot" read as "the space's queue" and owners as the space's.
 *
 * Holders that die. A process killed with SIGKILL tells nobody; its death
 * is found by probing lifelines (lifeline.c). So:
 *  S1 Every call that finds the pool empty scans the holders and probes each
 *     (force): a slot held by a dead thread comes back at once, RECOVERED.
 *     Otherwise it scans only when the space's death epoch moved (sema.c R1).
 *  S2 A death recorded anywhere visits every bucket (space_lot.c, called
 *     by space_owners.c with sab__space_sema_died as its hook), and for
 *     each semaphore with waiters there runs S1's scan under that bucket's
 *     lock and hands what came back to the oldest waiters. Waiters of a semaphore probe
 * periodically (the binding reaps while they wait), so a killed holder's slot reaches them without
 * any further call. S3 A queued record of a dead owner is dropped when a handoff meets it
 *     (sab__space_oldest), never handed a slot.
 *
 * Every view is checked by sab_sema_open against the bytes from `off` to
 * the end of the space, on every call: nr and the layout come from that
 * check, never from a later read.
 *
 * Deaths found by the probes here are handed back in `dead`: burying them
 * (space_owners.c, which also holds the public sab_space_sema_* calls)
 * visits the queues, above this file.
 */
#define _GNU_SOURCE
#include "sema_pool.h"
#include "space_internal.h"

#if defined(__linux__)

#define KEY(off) ((off) | 1u)

static int view_of(sab_space_t *sp, uint32_t off, sab_sema_t *s) {
  if (off < sp->heap_off || off % 8 != 0 || off >= sp->size) return SAB_E_CORRUPT;
  return sab_sema_open(s, sp->base + off, sp->size - off);
}

/* Holder liveness under a bucket lock: probes without blocking; deaths
 * found go to `dead`. */
typedef struct {
  sab_space_t *sp;
  sab__deaths_t *dead;
} alive_ctx_t;

static int alive_in_space(void *ctx, uint32_t id) {
  alive_ctx_t *a = ctx;
  return sab__space_alive_locked(a->sp, id, a->dead);
}

/* Under the lock: S1, then the slots that came back go to the queued
 * waiters first (K3). Answers how many came back, or SAB_E_CORRUPT. */
static int sync_deaths(sab_space_t *sp, uint32_t b, const sab_sema_t *s, int force, sab__wakes_t *w,
                       sab__deaths_t *dead) {
  alive_ctx_t a = {sp, dead};
  sab__owners_t o = {sab__epoch_now(sp), alive_in_space, &a, force};
  int back = sab__sema_reclaim(s, &o);
  if (back <= 0) return back;
  uint32_t key = KEY((uint32_t)((char *)s->base - sp->base));
  for (;;) {
    uint32_t i = sab__space_oldest(sp, b, key, dead);
    if (i == 0) break;
    uint32_t t = sab__sema_take(s, sab__space_owner(sp, i));
    if (t == SAB_SEMA_NO_TOKEN) break;
    sab__space_notify_token(sp, b, i, t, w);
  }
  return back;
}

void sab__space_sema_died(sab_space_t *sp, uint32_t b, uint32_t off, sab__wakes_t *w,
                          sab__deaths_t *dead) {
  sab_sema_t s;
  if (view_of(sp, off, &s) == 0) sync_deaths(sp, b, &s, 0, w, dead);
}

static int avail_of(const sab_sema_t *s) { return (int)sab__sema_count_free(s); }

/* After unlocking: the pool went from empty to not; wake those who watch
 * it (JS's resumeFn parks on the avail word, a plain cell). */
static void refilled(sab_space_t *sp, uint32_t off, sab__deaths_t *dead) {
  sab__lot_notify(sp, off + 4, UINT64_MAX, dead);
}

int sab__sema_in_acquire(sab_space_t *sp, uint32_t id, uint32_t off, uint32_t flags,
                         uint32_t *token, uint32_t *rec, sab__deaths_t *dead) {
  sab_sema_t s;
  sab__wakes_t w = {{0}, 0};
  uint32_t b = sab__sbucket_of(off), i = 0, t = SAB_SEMA_NO_TOKEN;
  int32_t *count = sab__count(sp, b);
  int r;
  if (view_of(sp, off, &s) != 0) return SAB_E_CORRUPT;
  if (rec != NULL && (i = sab__space_take(sp, id)) == 0) return SAB_E_SPACE_FULL;
  sab__sbucket_t *bk = sab__space_lock(sp, b);
  if (bk == NULL) {
    if (i != 0) sab__space_free(sp, i, id);
    return SAB_E_CORRUPT;
  }
  /* sema.c R3: raise the counter before the epoch is read. */
  __atomic_fetch_add(count, 1, __ATOMIC_SEQ_CST);
  int before = avail_of(&s);
  if (sync_deaths(sp, b, &s, before == 0, &w, dead) < 0) {
    r = SAB_E_CORRUPT;
  } else if ((t = sab__sema_take(&s, id)) != SAB_SEMA_NO_TOKEN) {
    *token = t;
    r = SAB_OK;
  } else if (rec == NULL) {
    r = SAB_TIMED_OUT;
  } else {
    sab__space_queue(sp, b, i, off, 0, flags | SAB_SPACE_SEMA, 1);
    *rec = i;
    r = SAB_PENDING;
  }
  int after = avail_of(&s);
  __atomic_fetch_sub(count, 1, __ATOMIC_SEQ_CST);
  sab__space_unlock(bk);
  if (i != 0 && r != SAB_PENDING) sab__space_free(sp, i, id);
  sab__wakes_run(&w);
  if (before == 0 && after > 0) refilled(sp, off, dead);
  return r;
}

int sab__sema_in_release(sab_space_t *sp, uint32_t id, uint32_t off, int64_t slot, uint32_t *info,
                         sab__deaths_t *dead) {
  sab_sema_t s;
  sab__wakes_t w = {{0}, 0};
  uint32_t b = sab__sbucket_of(off), avail = 0, flags = 0;
  int r;
  if (info != NULL) *info = 0;
  if (view_of(sp, off, &s) != 0) return SAB_E_CORRUPT;
  sab__sbucket_t *bk = sab__space_lock(sp, b);
  if (bk == NULL) return SAB_E_CORRUPT;
  if (sync_deaths(sp, b, &s, 0, &w, dead) < 0) {
    r = SAB_E_CORRUPT;
  } else if ((slot = sab__sema_held(&s, id, slot)) < 0) {
    r = SAB_E_BAD_TOKEN;
  } else {
    r = (int)slot;
    uint32_t i = sab__space_oldest(sp, b, KEY(off), dead);
    if (i != 0) {
      /* K3, K4: straight to the oldest waiter. */
      uint32_t owner = sab__space_owner(sp, i);
      if (sab__sema_hand(&s, slot, id, owner) != 0) {
        r = SAB_E_CORRUPT;
      } else {
        sab__space_notify_token(sp, b, i, (uint32_t)slot, &w);
        if (owner == id) flags |= SAB_SEMA_HANDED_SELF;
      }
    } else if ((avail = sab__sema_count_free(&s), sab__sema_pool_put(&s, slot, id)) != 0) {
      r = SAB_E_CORRUPT;
    } else {
      flags |= SAB_SEMA_POOLED;
    }
  }
  sab__space_unlock(bk);
  sab__wakes_run(&w);
  if ((flags & SAB_SEMA_POOLED) && avail == 0) refilled(sp, off, dead);
  if (info != NULL) *info = flags;
  return r;
}

int sab__sema_in_available(sab_space_t *sp, uint32_t off, sab__deaths_t *dead) {
  sab_sema_t s;
  sab__wakes_t w = {{0}, 0};
  uint32_t b = sab__sbucket_of(off);
  if (view_of(sp, off, &s) != 0) return SAB_E_CORRUPT;
  sab__sbucket_t *bk = sab__space_lock(sp, b);
  if (bk == NULL) return SAB_E_CORRUPT;
  int before = avail_of(&s);
  int r = sync_deaths(sp, b, &s, before == 0, &w, dead) < 0 ? SAB_E_CORRUPT : avail_of(&s);
  sab__space_unlock(bk);
  sab__wakes_run(&w);
  if (before == 0 && r > 0) refilled(sp, off, dead);
  return r < 0 ? SAB_E_CORRUPT : r;
}

/*
 * A RateLimit in a space (lib/rate-limit.js): its grant ring (rate.c) at
 * rate_off, then its turn, a Sema of one token, at turn_off. The ring
 * changes only under the bucket lock of the turn, in every process (the
 * in-process limiter uses the lot's bucket instead). The turn's holder
 * takes grants with `turn_free_only` 0. With 1, a caller that holds no
 * turn is granted only while the turn is free and nobody queues for it: it
 * is first in line and overtakes nobody, so it is served without taking
 * the turn (one lock, no hand-off to a descheduled process); otherwise
 * SAB_TIMED_OUT, and it queues for the turn as before. Answers as
 * sab_rate_take.
 */
int sab__space_rate_in_take(sab_space_t *sp, uint32_t turn_off, uint32_t rate_off,
                            int turn_free_only, uint64_t *at, uint64_t *wait_ns,
                            sab__deaths_t *dead) {
  sab_sema_t s;
  sab_rate_t r;
  if (view_of(sp, turn_off, &s) != 0 || s.nr != 1) return SAB_E_CORRUPT;
  if (rate_off < sp->heap_off || rate_off % 8 != 0 || rate_off >= turn_off) return SAB_E_CORRUPT;
  if (sab_rate_open(&r, sp->base + rate_off, turn_off - rate_off) != 0) return SAB_E_CORRUPT;
  uint32_t b = sab__sbucket_of(turn_off);
  sab__sbucket_t *bk = sab__space_lock(sp, b);
  if (bk == NULL) return SAB_E_CORRUPT;
  int res;
  if (turn_free_only && (avail_of(&s) != 1 || sab__space_oldest(sp, b, KEY(turn_off), dead) != 0)) {
    res = SAB_TIMED_OUT;
  } else {
    res = sab__rate_take_locked(&r, at, wait_ns);
  }
  sab__space_unlock(bk);
  return res;
}

#endif /* __linux__ */
