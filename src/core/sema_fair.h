/*
 * The token semaphore's bounded fairness (sema.c F1-F5), written once for
 * both memories: the in-process lot's queue (sema.c) and a shared space's
 * (space_sema.c). The rules are stated in full at the top of sema.c; each
 * function below says which it does. Every function runs under the lock of
 * the bucket of the semaphore's key, on a view (base, nr) that
 * sab_sema_open checked.
 *
 * The includer defines, then includes this file (once per memory):
 *
 *   F_(name)               the name of a function made here
 *   F_C, F_H, F_NIL        a bucket of the memory, a record handle, none
 *   F_KEY_T, F_WAKES_T     a queue's key, the memory's list of wakes
 *   F_OLDEST(c, key)       the oldest queued record of key whose owner lives
 *   F_SINCE(c, h)          when its acquire first asked (sab_now() scale)
 *   F_BOUND(c, s, h)       its fairness bound in ns (0: strict hand-off)
 *   F_OWNER(c, h)          its owner id
 *   F_HAND(c, h, t, x)     give it token t and dequeue it NOTIFIED, into x
 *   F_RETRY(c, s, h, x)    F2: dequeue it NOTIFIED with no token (a wake to
 *                          try again), its place kept while it is off the
 *                          queue (F5)
 *   F_RETRIES_BEFORE(c, s, since)
 *                          retries of s (woken by F2, not back yet) that
 *                          first asked before `since`
 *   F_RECLAIM(c, s, force) dead holders' slots back to the pool (sema.c R1;
 *                          a space's S1 probes every holder when `force`):
 *                          how many came back
 *
 * In a space each of these reads the record's words afresh, into a local;
 * since, the bound and the owner are values to compare and to hand to the
 * pool's CASes, never indexes, so a scribbled word costs fairness only.
 */

/* Whether record h has waited its bound at `now` (F1). */
static inline int F_(starving)(F_C c, const sab_sema_t *s, F_H h, uint64_t now) {
  uint64_t since = F_SINCE(c, h), bound = F_BOUND(c, s, h);
  return bound == 0 || (now >= since && now - since >= bound);
}

/* Whether a hand-out to every record may give a free slot to one that
 * asked at `since` (F5): more slots are free than the retries ahead of it
 * keep. */
static inline int F_(room_for)(F_C c, const sab_sema_t *s, uint64_t since) {
  uint32_t n = F_RETRIES_BEFORE(c, s, since);
  return n == 0 || sab__sema_count_free(s) > n;
}

/* Hand free slots to the oldest records of key while both last (K3): to
 * every record (all: nobody else would wake them, F4; past no retry older
 * than it, F5), or only to those that waited the bound (F1). */
static inline void F_(hand_out)(F_C c, const sab_sema_t *s, F_KEY_T key, F_WAKES_T *x, int all,
                                uint64_t now) {
  for (;;) {
    F_H h = F_OLDEST(c, key);
    if (h == F_NIL) return;
    if (!all && !F_(starving)(c, s, h, now)) return;
    if (all && !F_(room_for)(c, s, F_SINCE(c, h))) return; /* F5 */
    uint32_t t = sab__sema_take(s, F_OWNER(c, h));
    if (t == SAB_SEMA_NO_TOKEN) return;
    F_HAND(c, h, t, x);
  }
}

/* A token for `owner`, whose acquire first asked at `since`, in its turn,
 * or SAB_SEMA_NO_TOKEN: F3, a caller older than every queued record (a
 * woken record's retry) is first in line; then the records that waited the
 * bound are served (F1); then anyone, unless the oldest queued record
 * waited the bound (K3, F1). */
static inline uint32_t F_(take_in_turn)(F_C c, const sab_sema_t *s, F_KEY_T key, uint32_t owner,
                                        uint64_t since, F_WAKES_T *x, uint64_t now) {
  uint32_t t = SAB_SEMA_NO_TOKEN;
  F_H o = F_OLDEST(c, key);
  if (o == F_NIL || since <= F_SINCE(c, o)) t = sab__sema_take(s, owner);
  if (t == SAB_SEMA_NO_TOKEN) {
    F_(hand_out)(c, s, key, x, 0, now);
    o = F_OLDEST(c, key);
    if (o == F_NIL || !F_(starving)(c, s, o, now)) t = sab__sema_take(s, owner);
  }
  return t;
}

/* The release of `slot` (held by `owner`, checked): straight to the oldest
 * record if it waited the bound (K3, K4, F1) or is the releaser's own
 * (F2: async-sema hands a release to the thread's own waiting acquire at
 * once); else back to the pool, and the oldest record, younger than the
 * bound, is woken to try again (F2): a running thread may take the slot
 * first, and the record then queues again in its place. Answers 0 with
 * *flags (SAB_SEMA_HANDED_SELF, SAB_SEMA_POOLED), or SAB_E_CORRUPT. */
static inline int F_(release)(F_C c, const sab_sema_t *s, F_KEY_T key, uint32_t owner, int64_t slot,
                              F_WAKES_T *x, uint64_t now, uint32_t *flags) {
  F_H h = F_OLDEST(c, key);
  if (h != F_NIL) {
    uint32_t to = F_OWNER(c, h);
    if (to == owner || F_(starving)(c, s, h, now)) {
      if (sab__sema_hand(s, slot, owner, to) != 0) return SAB_E_CORRUPT;
      F_HAND(c, h, (uint32_t)slot, x);
      if (to == owner) *flags |= SAB_SEMA_HANDED_SELF;
      return 0;
    }
  }
  if (sab__sema_pool_put(s, slot, owner) != 0) return SAB_E_CORRUPT;
  *flags |= SAB_SEMA_POOLED;
  if (h != F_NIL) F_RETRY(c, s, h, x);
  return 0;
}

/* Under the lock: dead holders' slots back (R1), then free slots to the
 * queued records first (K3): to every record when slots came back or
 * `all` (nobody else would wake them: F4), else to those that waited the
 * bound (F1). Answers how many came back (or a negative code). */
static inline int F_(sync)(F_C c, const sab_sema_t *s, F_KEY_T key, int force, int all,
                           F_WAKES_T *x, uint64_t now) {
  int back = F_RECLAIM(c, s, force);
  if (back < 0) return back;
  F_(hand_out)(c, s, key, x, all || back > 0, now);
  return back;
}

/* The ask of `owner`, whose acquire first asked at `since`, under the
 * lock: slots that came back (probing every holder with `force`: a space's
 * S1, when none is free) go to every queued record (F4), then the caller's
 * turn (F3, F1, K3).
 * Answers a token or SAB_SEMA_NO_TOKEN, and in *back how many came back
 * (negative: a broken state, and no token). */
static inline uint32_t F_(ask)(F_C c, const sab_sema_t *s, F_KEY_T key, uint32_t owner,
                               uint64_t since, int force, F_WAKES_T *x, uint64_t now, int *back) {
  *back = F_RECLAIM(c, s, force);
  if (*back < 0) return SAB_SEMA_NO_TOKEN;
  if (*back > 0) F_(hand_out)(c, s, key, x, 1, now);
  return F_(take_in_turn)(c, s, key, owner, since, x, now);
}

/* The release of `slot` (-1: the one `owner` got most recently) under the
 * lock: deaths first (F_(sync)), then the slot checked as `owner`'s, then
 * F_(release). Answers the slot, SAB_E_BAD_TOKEN or SAB_E_CORRUPT; *back
 * as F_(ask)'s, *free_before the free slots just before the release. */
static inline int F_(release_held)(F_C c, const sab_sema_t *s, F_KEY_T key, uint32_t owner,
                                   int64_t slot, F_WAKES_T *x, uint64_t now, uint32_t *flags,
                                   int *back, uint32_t *free_before) {
  *free_before = 0;
  if ((*back = F_(sync)(c, s, key, 0, 0, x, now)) < 0) return SAB_E_CORRUPT;
  if ((slot = sab__sema_held(s, owner, slot)) < 0) return SAB_E_BAD_TOKEN;
  *free_before = sab__sema_count_free(s);
  return F_(release)(c, s, key, owner, slot, x, now, flags) != 0 ? SAB_E_CORRUPT : (int)slot;
}
