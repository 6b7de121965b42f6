/*
 * The lot's queue, written once for both memories.
 *
 * A bucket holds a doubly linked FIFO list of waiter records. In this
 * process (lot.c) a record is a sab_waiter_t and its handle a pointer; in a
 * shared space (space_lot.c) a record is a slot of the space's record table
 * and its handle an index (1..NRECORDS, 0 ends a list), read from memory
 * that any process may write. The operations below (link, unlink, the walk,
 * the oldest record of a key, notify, the count of waiters, the visit at a
 * death) are the same for both; each memory says how a handle is followed,
 * what its records' words mean, and whether what it reads can be trusted.
 * As musl passes a private/shared flag down one code path, the place the
 * memory lives is a parameter here, not a second copy.
 *
 * Every function runs under the bucket's lock. The includer defines the
 * parameters below, then includes this file (once per memory; it may be
 * included more than once):
 *
 *   Q_(name)             the name of a function made here (e.g. lotq_name)
 *   Q_H, Q_NIL           the handle type, and the handle of no record
 *   Q_C                  one bucket of the memory, passed by value
 *   Q_KEY_T              a queue's key: the cell's address or offset
 *   Q_WAKES_T            the memory's list of wakes run after unlocking
 *   Q_HEAD(c) Q_TAIL(c) Q_SET_HEAD(c, h) Q_SET_TAIL(c, h)
 *   Q_NEXT(c, h) Q_PREV(c, h) Q_SET_NEXT(c, h, v) Q_SET_PREV(c, h, v)
 *   Q_KEY(c, h)          the key a queued record waits on
 *   Q_OWNER(c, h) Q_WATCH(c, h)
 *                        its owner id, and the owner whose death wakes it
 *   Q_QUEUED(c, h)       its state reads WAITING or PARKED
 *   Q_SINCE(c, h)        when the acquire of a semaphore's record first
 *                        asked (sab_now(); any value in a space: an order)
 *   Q_COUNT(c, d)        add d to the bucket's public counter (seq-cst)
 *   Q_CHECKED            1 when the memory is untrusted: every handle read
 *                        from a link is checked (Q_OK), must link back, and
 *                        walks are bounded by Q_MAX steps; a list that does
 *                        not check out answers Q_BROKEN and is rebuilt with
 *                        Q_REPAIR(c). 0 in process memory: the checks
 *                        compile away.
 *   Q_OK(h) Q_MAX Q_REPAIR(c)
 *   Q_LIVE(c, h, owner)  whether the record's owner lives; a memory that
 *                        probes liveness (a space) drops the record of a dead
 *                        owner here and answers 0: a wake counted for it
 *                        would be lost
 *   Q_DROP(c, h, owner)  dequeue the record of a dead owner, CANCELLED
 *   Q_DROPS_DEAD         1 if a death visit drops the dead's own records
 *                        (a space: nobody else will); 0 in process memory,
 *                        where the dead env's cleanup cancels them
 *   Q_NOTIFY(c, h, x)    dequeue h NOTIFIED and add its wake to x
 *   Q_HOOKED(c, h, key, owner, id)
 *                        whether a death of `id` runs a hook for the queue
 *                        of h's key (a semaphore's: it reclaims slots)
 *   Q_RUN_HOOK(c, key, h, x)
 *                        run that hook, once per key, after the walk, with
 *                        the oldest hooked record h of the key; it may
 *                        dequeue records of that key only, into x
 *
 * A handle read from a link is read once, into a local, checked (Q_OK and
 * the link back) when Q_CHECKED, and only the local is used; so is each
 * word a visit reads. Nothing here follows a value of a space as a pointer:
 * the space's accessors turn an index into an address within the mapping.
 */
#ifndef SAB_QUEUE_H_ONCE
#define SAB_QUEUE_H_ONCE
#include <stdint.h>
#include <stdlib.h>
enum { Q_DONE = 0, Q_BROKEN = -1 };
#endif

/* Link record h just before `before`, a queued record (Q_NIL: at the
 * tail). Q_BROKEN: the neighbours' links did not check out, nothing was
 * written, and the caller rebuilds the list (h's state says queued by
 * then, so the rebuilt list holds it). */
static inline int Q_(link)(Q_C c, Q_H h, Q_H before) {
  Q_H prev;
  if (before == Q_NIL) {
    prev = Q_TAIL(c);
    if (Q_CHECKED && (prev == Q_NIL ? Q_HEAD(c) != Q_NIL
                                    : !Q_OK(prev) || prev == h || Q_NEXT(c, prev) != Q_NIL)) {
      return Q_BROKEN;
    }
  } else {
    prev = Q_PREV(c, before);
    if (Q_CHECKED &&
        (before == h || (prev == Q_NIL ? Q_HEAD(c) != before
                                       : !Q_OK(prev) || prev == h || Q_NEXT(c, prev) != before))) {
      return Q_BROKEN;
    }
  }
  Q_SET_NEXT(c, h, before);
  Q_SET_PREV(c, h, prev);
  if (prev == Q_NIL)
    Q_SET_HEAD(c, h);
  else
    Q_SET_NEXT(c, prev, h);
  if (before == Q_NIL)
    Q_SET_TAIL(c, h);
  else
    Q_SET_PREV(c, before, h);
  Q_COUNT(c, 1);
  return Q_DONE;
}

/* Take queued record h out of the list (its state is the caller's).
 * Q_BROKEN: its links did not check out; h's own links are cleared and the
 * list is left for the caller to rebuild, once h's state is final. */
static inline int Q_(unlink)(Q_C c, Q_H h) {
  Q_H next = Q_NEXT(c, h);
  Q_H prev = Q_PREV(c, h);
  if (Q_CHECKED && !((next == Q_NIL || Q_OK(next)) && (prev == Q_NIL || Q_OK(prev)) &&
                     (prev == Q_NIL ? Q_HEAD(c) == h : Q_NEXT(c, prev) == h) &&
                     (next == Q_NIL ? Q_TAIL(c) == h : Q_PREV(c, next) == h))) {
    Q_SET_NEXT(c, h, Q_NIL);
    Q_SET_PREV(c, h, Q_NIL);
    return Q_BROKEN;
  }
  if (prev == Q_NIL)
    Q_SET_HEAD(c, next);
  else
    Q_SET_NEXT(c, prev, next);
  if (next == Q_NIL)
    Q_SET_TAIL(c, prev);
  else
    Q_SET_PREV(c, next, prev);
  Q_SET_NEXT(c, h, Q_NIL);
  Q_SET_PREV(c, h, Q_NIL);
  Q_COUNT(c, -1);
  return Q_DONE;
}

/* Visit the queued records in order: fn answers 0 to go on, 1 to stop, and
 * may dequeue the record it was given (no other: its successor was read
 * before the call). Q_BROKEN: a link or state did not check out. */
static inline int Q_(walk)(Q_C c, int (*fn)(Q_C, Q_H, void *), void *arg) {
  Q_H h = Q_HEAD(c);
  Q_H prev = Q_NIL;
  uint32_t steps = 0;
  (void)prev;
  (void)steps;
  while (h != Q_NIL) {
    if (Q_CHECKED && (!Q_OK(h) || ++steps > Q_MAX)) return Q_BROKEN;
    Q_H next = Q_NEXT(c, h); /* read before fn: h may leave, or be gone */
    if (Q_CHECKED && (!Q_QUEUED(c, h) || Q_PREV(c, h) != prev)) return Q_BROKEN;
    if (fn(c, h, arg)) return Q_DONE;
    /* In a space, fn may have unlinked h: the walk goes on from its old
     * next, whose prev is now h's old prev. (In process memory h is not
     * read again: a dequeued blocking record's frame may be gone.) */
    if (Q_CHECKED && Q_QUEUED(c, h)) prev = h;
    h = next;
  }
  return Q_DONE;
}

/* A walk, and where the memory is untrusted, one more over the rebuilt
 * list if the first met a link that did not check out. */
static inline void Q_(visit)(Q_C c, int (*fn)(Q_C, Q_H, void *), void *arg) {
  if (Q_(walk)(c, fn, arg) == Q_BROKEN && Q_CHECKED) {
    Q_REPAIR(c);
    (void)Q_(walk)(c, fn, arg);
  }
}

/* Where a record of `key` that first asked at `since` goes, so that the
 * key's records stay in order of since (sema.c F2: a retry keeps the place
 * its first ask earned; a newcomer goes last): *before, the first of the
 * key that is younger (Q_NIL: at the tail). Walked from the tail, which
 * stops at the first record of the key that is not younger. Q_BROKEN: a
 * link did not check out (*before is Q_NIL: the tail). */
static inline int Q_(before_since)(Q_C c, Q_KEY_T key, uint64_t since, Q_H *before) {
  Q_H h = Q_TAIL(c);
  Q_H next = Q_NIL;
  uint32_t steps = 0;
  (void)next;
  (void)steps;
  *before = Q_NIL;
  while (h != Q_NIL) {
    if (Q_CHECKED && (!Q_OK(h) || ++steps > Q_MAX || Q_NEXT(c, h) != next || !Q_QUEUED(c, h))) {
      *before = Q_NIL;
      return Q_BROKEN;
    }
    if (Q_KEY(c, h) == key) {
      if (Q_SINCE(c, h) <= since) break;
      *before = h;
    }
    next = h;
    h = Q_PREV(c, h);
  }
  return Q_DONE;
}

/* ---- the oldest record of a key ---- */

struct Q_(find_s) {
  Q_KEY_T key;
  Q_H found;
};

static inline int Q_(oldest_visit)(Q_C c, Q_H h, void *arg) {
  struct Q_(find_s) *f = arg;
  if (Q_KEY(c, h) != f->key || !Q_LIVE(c, h, Q_OWNER(c, h))) return 0;
  f->found = h;
  return 1;
}

/* The oldest record queued with `key` whose owner lives, or Q_NIL. */
static inline Q_H Q_(oldest)(Q_C c, Q_KEY_T key) {
  struct Q_(find_s) f = {key, Q_NIL};
  Q_(visit)(c, Q_(oldest_visit), &f);
  return f.found;
}

/* ---- notify and the count of waiters ---- */

struct Q_(notify_s) {
  Q_KEY_T key;
  uint64_t count, woken;
  Q_WAKES_T *wakes;
};

static inline int Q_(notify_visit)(Q_C c, Q_H h, void *arg) {
  struct Q_(notify_s) *n = arg;
  if (Q_KEY(c, h) != n->key || !Q_LIVE(c, h, Q_OWNER(c, h))) return 0;
  Q_NOTIFY(c, h, n->wakes);
  return ++n->woken >= n->count;
}

/* Dequeue up to `count` (> 0) records of `key`, oldest first, NOTIFIED,
 * their wakes into x: how many. The count is exactly the records moved. */
static inline uint64_t Q_(notify)(Q_C c, Q_KEY_T key, uint64_t count, Q_WAKES_T *x) {
  struct Q_(notify_s) n = {key, count, 0, x};
  Q_(visit)(c, Q_(notify_visit), &n);
  return n.woken;
}

struct Q_(count_s) {
  Q_KEY_T key;
  uint32_t n;
};

static inline int Q_(count_visit)(Q_C c, Q_H h, void *arg) {
  struct Q_(count_s) *k = arg;
  if (Q_KEY(c, h) == k->key && Q_LIVE(c, h, Q_OWNER(c, h))) k->n++;
  return 0;
}

/* Records queued with `key` (whose owners live). */
static inline uint32_t Q_(waiters)(Q_C c, Q_KEY_T key) {
  struct Q_(count_s) k = {key, 0};
  Q_(visit)(c, Q_(count_visit), &k);
  return k.n;
}

/* ---- a death ---- */

struct Q_(hook_s) {
  Q_KEY_T key;
  Q_H oldest;
};

struct Q_(death_s) {
  uint32_t id;
  Q_WAKES_T *wakes;
  /* Keys whose hooks run after the walk, each once, with their oldest
   * hooked record: in `some`, then in `more` (malloc'd) past it. */
  struct Q_(hook_s) some[8], *more;
  unsigned n, cap;
};

static inline struct Q_(hook_s) * Q_(hook_at)(struct Q_(death_s) * d, unsigned k) {
  return k < 8 ? &d->some[k] : &d->more[k - 8];
}

static inline void Q_(hook_add)(struct Q_(death_s) * d, Q_KEY_T key, Q_H h) {
  for (unsigned k = 0; k < d->n; k++) {
    if (Q_(hook_at)(d, k)->key == key) return;
  }
  if (d->n >= 8 && d->n - 8 == d->cap) {
    d->cap = d->cap == 0 ? 16 : 2 * d->cap;
    d->more = realloc(d->more, d->cap * sizeof *d->more);
    if (d->more == NULL) abort(); /* as any allocation failure of the core */
  }
  struct Q_(hook_s) *e = Q_(hook_at)(d, d->n++);
  e->key = key;
  e->oldest = h;
}

static inline int Q_(death_visit)(Q_C c, Q_H h, void *arg) {
  struct Q_(death_s) *d = arg;
  Q_KEY_T key = Q_KEY(c, h);
  uint32_t owner = Q_OWNER(c, h);
  int hooked = Q_HOOKED(c, h, key, owner, d->id);
  if (hooked) Q_(hook_add)(d, key, h);
  if (Q_DROPS_DEAD && owner == d->id) {
    Q_DROP(c, h, owner); /* its thread will never look */
  } else if (!hooked) {
    uint32_t watch = Q_WATCH(c, h);
    if (watch != 0 && (watch == d->id || watch == SAB_WATCH_ANY)) Q_NOTIFY(c, h, d->wakes);
  }
  return 0;
}

/* At the death of `id` (marked dead already): wake the records that watch
 * it (or any owner), drop the records it left queued (Q_DROPS_DEAD), then
 * run each hooked key's hook once. Wakes go to x. */
static inline void Q_(died)(Q_C c, uint32_t id, Q_WAKES_T *x) {
  struct Q_(death_s) d;
  d.id = id;
  d.wakes = x;
  d.more = NULL;
  d.n = d.cap = 0;
  Q_(visit)(c, Q_(death_visit), &d);
  /* Each hook dequeues records of its own key only: the oldest records of
   * the keys after it are still queued when their turns come. */
  for (unsigned k = 0; k < d.n; k++) {
    struct Q_(hook_s) *e = Q_(hook_at)(&d, k);
    Q_RUN_HOOK(c, e->key, e->oldest, x);
  }
  free(d.more);
}
