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
 * Fairness. The rules F1-F5 of sema.c hold here too, by the same code
 * (sema_fair.h, instantiated below over the space's records): a Sema
 * behaves the same wherever it lives. What the space supplies:
 *  - a record's since (when its acquire first asked) in the record, written
 *    when it is queued (sab__space_queue, which keeps the key's records in
 *    order of since); the bound, SAB_SPACE_FAIR_NS, or none for a
 *    RateLimit's turn (a strict hand-off, as in one process), which its
 *    first rate take marks as such (word 6, SAB__SEMA_STRICT; a Sema's
 *    callers do not say which they are);
 *  - F2's retries, which sema.c keeps in process memory, in the slot of the
 *    woken record's owner (retry_id, retry_off, since), since a record is
 *    freed when it settles: the owner's next acquire of the semaphore asks
 *    with that since (its place), and takes the entry off; a give-back of
 *    the wake (sab_space_sema_give_back with SAB_SEMA_NO_TOKEN) takes it
 *    off and passes the wake on (F4). F5 counts the entries of threads that
 *    live. An owner keeps one entry: a second retry of the same thread (two
 *    async acquires woken at once) replaces the first, which then queues as
 *    a newcomer (fairness only).
 *  Every word of these is read once into a local and used as an order or
 *  compared with ids; none is an index but the slot of an id checked by
 *  sab__id_parts.
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
#include "space_sema.h"

#if defined(__linux__)

#define KEY(off) ((off) | 1u)

/* The fairness bound of a Sema in a space (sema.c F1), as in one
 * process; the C tests build with a longer one, so that their rows do not
 * hang on a millisecond. A RateLimit's turn has none (its mark, read once:
 * a scribbled mark changes that Sema's fairness, nothing else). */
#ifndef SAB_SPACE_FAIR_NS
#define SAB_SPACE_FAIR_NS SAB_SEMA_FAIR_NS
#endif

static int view_of(sab_space_t *sp, uint32_t off, sab_sema_t *s) {
  if (off < sp->heap_off || off % 8 != 0 || off >= sp->size) return SAB_E_CORRUPT;
  int r = sab_sema_open(s, sp->base + off, sp->size - off);
  if (r == 0) {
    uint32_t mark = sab__rd32(&s->base[SAB__SEMA_W_STRICT]);
    s->fair_ns = mark == SAB__SEMA_STRICT ? 0 : SAB_SPACE_FAIR_NS;
  }
  return r;
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

/* ---- F2, F5: retries, kept in their threads' slots ---- */

/* The slot of owner id, or NULL for a value that is no id. */
static sab__slot_t *slot_of(sab_space_t *sp, uint32_t id) {
  uint32_t i, gen;
  return sab__id_parts(id, &i, &gen) ? sab__slot(sp, i) : NULL;
}

/* Under the lock: id's acquire of the semaphore at off, first asked at
 * since, is woken to try again; its place is kept in its slot. */
static void retry_mark(sab_space_t *sp, uint32_t id, uint32_t off, uint64_t since) {
  sab__slot_t *sl = slot_of(sp, id);
  if (sl == NULL) return;
  sab__st(&sl->retry_id, 0);
  sab__st(&sl->retry_off, off);
  sab__st(&sl->retry_since_lo, (uint32_t)since);
  sab__st(&sl->retry_since_hi, (uint32_t)(since >> 32));
  sab__st(&sl->retry_id, id);
}

/* Under the lock: id's retry of off taken off its slot; answers when its
 * acquire first asked, or `now` if it has none there. */
static uint64_t retry_take(sab_space_t *sp, uint32_t id, uint32_t off, uint64_t now) {
  sab__slot_t *sl = slot_of(sp, id);
  if (sl == NULL || sab__ld(&sl->retry_id) != id || sab__ld(&sl->retry_off) != off) return now;
  uint64_t lo = sab__ld(&sl->retry_since_lo), hi = sab__ld(&sl->retry_since_hi);
  uint64_t since = hi << 32 | lo;
  sab__st(&sl->retry_id, 0);
  return since <= now ? since : now;
}

/* Under the lock: retries of the semaphore at off that first asked before
 * `since`, by threads that live (slot i's entry counts only for an id of
 * slot i; the probe finds the rest dead, and they go to `dead`). */
static uint32_t retries_before(sab_space_t *sp, uint32_t off, uint64_t since, sab__deaths_t *dead) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < NSLOTS; i++) {
    sab__slot_t *sl = sab__slot(sp, i);
    uint32_t id = sab__ld(&sl->retry_id), slot, gen;
    if (id == 0 || sab__ld(&sl->retry_off) != off) continue;
    if (!sab__id_parts(id, &slot, &gen) || slot != i) continue;
    uint64_t lo = sab__ld(&sl->retry_since_lo), hi = sab__ld(&sl->retry_since_hi);
    if ((hi << 32 | lo) >= since) continue;
    if (sab__space_alive_locked(sp, id, dead) == 1) n++;
  }
  return n;
}

/* ---- the fairness rules (sema_fair.h) over the space's records ---- */

/* A semaphore's bucket: where it lies, and the deaths its probes meet. */
typedef struct {
  sab_space_t *sp;
  uint32_t b, off;
  sab__deaths_t *dead;
} ssf_c;

static void retry_wake(ssf_c c, uint32_t i, sab__wakes_t *w) {
  retry_mark(c.sp, sab__space_owner(c.sp, i), c.off, sab__space_since(c.sp, i));
  sab__space_notify_token(c.sp, c.b, i, SAB_SEMA_NO_TOKEN, w);
}

#define F_(name)            ssf_##name
#define F_C                 ssf_c
#define F_H                 uint32_t
#define F_NIL               0u
#define F_KEY_T             uint32_t
#define F_WAKES_T           sab__wakes_t
#define F_OLDEST(c, key)    sab__space_oldest((c).sp, (c).b, (key), (c).dead)
#define F_SINCE(c, h)       sab__space_since((c).sp, (h))
#define F_BOUND(c, s, h)    ((void)(c), (void)(h), (s)->fair_ns)
#define F_OWNER(c, h)       sab__space_owner((c).sp, (h))
#define F_HAND(c, h, t, x)  sab__space_notify_token((c).sp, (c).b, (h), (t), (x))
#define F_RETRY(c, s, h, x) ((void)(s), retry_wake((c), (h), (x)))
#define F_RETRIES_BEFORE(c, s, since) \
  ((void)(s), retries_before((c).sp, (c).off, (since), (c).dead))
#define F_RECLAIM(c, s, force) reclaim((c), (s), (force))
static int reclaim(ssf_c c, const sab_sema_t *s, int force);
#include "sema_fair.h"

static ssf_c bucket_at(sab_space_t *sp, uint32_t off, sab__deaths_t *dead) {
  ssf_c c = {sp, sab__sbucket_of(off), off, dead};
  return c;
}

/* Under the lock: S1, then free slots go to the queued waiters first (K3):
 * to every waiter when slots came back or `all` (F4), else to those that
 * waited the bound (F1), as sema.c's. Answers how many came back, or
 * SAB_E_CORRUPT. */
static int reclaim(ssf_c c, const sab_sema_t *s, int force) {
  alive_ctx_t a = {c.sp, c.dead};
  sab__owners_t o = {sab__epoch_now(c.sp), alive_in_space, &a, force};
  return sab__sema_reclaim(s, &o);
}

static int sync_deaths(ssf_c c, const sab_sema_t *s, int force, int all, sab__wakes_t *w,
                       uint64_t now) {
  return ssf_sync(c, s, KEY(c.off), force, all, w, now);
}

void sab__space_sema_died(sab_space_t *sp, uint32_t b, uint32_t off, sab__wakes_t *w,
                          sab__deaths_t *dead) {
  sab_sema_t s;
  (void)b;
  /* R2: nobody else would wake the waiters (F4). */
  if (view_of(sp, off, &s) == 0) sync_deaths(bucket_at(sp, off, dead), &s, 0, 1, w, sab_now());
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
  ssf_c c = bucket_at(sp, off, dead);
  uint32_t i = 0, t = SAB_SEMA_NO_TOKEN;
  int32_t *count = sab__count(sp, c.b);
  int r;
  if (view_of(sp, off, &s) != 0) return SAB_E_CORRUPT;
  if (rec != NULL && (i = sab__space_take(sp, id)) == 0) return SAB_E_SPACE_FULL;
  sab__sbucket_t *bk = sab__space_lock(sp, c.b);
  if (bk == NULL) {
    if (i != 0) sab__space_free(sp, i, id);
    return SAB_E_SPACE_BUSY;
  }
  /* sema.c R3: raise the counter before the epoch is read. */
  __atomic_fetch_add(count, 1, __ATOMIC_SEQ_CST);
  uint64_t now = sab_now();
  /* F2, F5: an acquire woken to try again asks with its first ask's since
   * (a try asks afresh, as sema.c's). */
  uint64_t since = rec != NULL ? retry_take(sp, id, off, now) : now;
  int before = avail_of(&s), back;
  /* As sema.c's ask (sema_fair.h). */
  t = ssf_ask(c, &s, KEY(off), id, since, before == 0, &w, now, &back); /* S1 */
  if (back < 0) {
    r = SAB_E_CORRUPT;
  } else if (t != SAB_SEMA_NO_TOKEN) {
    *token = t;
    r = SAB_OK;
    /* F5: a try that takes a slot is the acquire a retry entry of this
     * thread waited for (lib/sema.js tries before it queues again): the
     * entry goes, or the thread would count as waiting for as long as it
     * lives (nrWaiting; other threads' F3 and F5). */
    if (rec == NULL) (void)retry_take(sp, id, off, now);
  } else if (rec == NULL) {
    r = SAB_TIMED_OUT;
  } else {
    sab__space_queue(sp, c.b, i, off, 0, flags | SAB_SPACE_SEMA, since, 1);
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
  ssf_c c = bucket_at(sp, off, dead);
  uint32_t avail = 0, flags = 0;
  int r, back;
  if (info != NULL) *info = 0;
  if (view_of(sp, off, &s) != 0) return SAB_E_CORRUPT;
  sab__sbucket_t *bk = sab__space_lock(sp, c.b);
  if (bk == NULL) return SAB_E_SPACE_BUSY;
  r = ssf_release_held(c, &s, KEY(off), id, slot, &w, sab_now(), &flags, &back, &avail);
  sab__space_unlock(bk);
  sab__wakes_run(&w);
  if (((flags & SAB_SEMA_POOLED) && avail == 0) || back > 0) refilled(sp, off, dead);
  if (info != NULL) *info = flags;
  return r;
}

int sab__sema_in_available(sab_space_t *sp, uint32_t off, sab__deaths_t *dead) {
  sab_sema_t s;
  sab__wakes_t w = {{0}, 0};
  ssf_c c = bucket_at(sp, off, dead);
  if (view_of(sp, off, &s) != 0) return SAB_E_CORRUPT;
  sab__sbucket_t *bk = sab__space_lock(sp, c.b);
  if (bk == NULL) return SAB_E_SPACE_BUSY;
  int before = avail_of(&s);
  int r = sync_deaths(c, &s, before == 0, 0, &w, sab_now()) < 0 ? SAB_E_CORRUPT : avail_of(&s);
  sab__space_unlock(bk);
  sab__wakes_run(&w);
  if (before == 0 && r > 0) refilled(sp, off, dead);
  return r < 0 ? SAB_E_CORRUPT : r;
}

void sab__sema_in_pass_on(sab_space_t *sp, uint32_t id, uint32_t off, sab__deaths_t *dead) {
  sab_sema_t s;
  sab__wakes_t w = {{0}, 0};
  ssf_c c = bucket_at(sp, off, dead);
  if (view_of(sp, off, &s) != 0) return;
  sab__sbucket_t *bk = sab__space_lock(sp, c.b);
  if (bk == NULL) return;
  (void)retry_take(sp, id, off, 0); /* F5: its place goes */
  /* F4: free slots to the oldest waiters directly, past no retry's place. */
  int r = sync_deaths(c, &s, 0, 1, &w, sab_now()) < 0 ? 0 : avail_of(&s);
  sab__space_unlock(bk);
  sab__wakes_run(&w);
  if (r > 0) refilled(sp, off, dead);
}

uint32_t sab__sema_in_waiting(sab_space_t *sp, uint32_t off, sab__deaths_t *dead) {
  ssf_c c = bucket_at(sp, off, dead);
  sab__sbucket_t *bk = sab__space_lock(sp, c.b);
  if (bk == NULL) return 0;
  /* One lock for both, as sema.c's: a record is queued or a retry. */
  uint32_t n = sab__space_waiters_locked(sp, c.b, KEY(off), dead) +
               retries_before(sp, off, UINT64_MAX, dead);
  sab__space_unlock(bk);
  return n;
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
  /* The turn's hand-off is strict (see view_of), from now on. */
  if (s.fair_ns != 0)
    __atomic_store_n(&s.base[SAB__SEMA_W_STRICT], (int32_t)SAB__SEMA_STRICT, __ATOMIC_RELAXED);
  if (rate_off < sp->heap_off || rate_off % 8 != 0 || rate_off >= turn_off) return SAB_E_CORRUPT;
  if (sab_rate_open(&r, sp->base + rate_off, turn_off - rate_off) != 0) return SAB_E_CORRUPT;
  uint32_t b = sab__sbucket_of(turn_off);
  sab__sbucket_t *bk = sab__space_lock(sp, b);
  if (bk == NULL) return SAB_E_SPACE_BUSY;
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
