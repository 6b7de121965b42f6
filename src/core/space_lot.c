/*
 * Wait queues in a space, for waiters in any process: the lot's queue
 * (queue.h, the same algorithm as lot.c's) over records named by index in
 * the space, with the space's accessors (every word read once and checked),
 * its lock (space_lock.c), its futex flag (shared: space_sys.c) and its
 * liveness probe (lifeline.c). What is the space's own: taking and freeing
 * records, repairing a list that does not check out, and its wakes (a
 * futex word or a process's doorbell).
 *
 * A waiter takes a record (a 64-byte slot of the records table, claimed by a
 * compare-exchange of its owner word from 0 to the waiter's owner id) and
 * queues it in the bucket its cell's offset hashes to. A bucket is a
 * bookkeeping lock word (space_sys.c) and a doubly linked FIFO list of record indexes
 * (index + 1; 0 ends the list). A blocking waiter sleeps on its record's
 * state word with a shared futex; an async waiter's owner has a waker thread
 * sleeping on its slot's doorbell, which a notifier rings after it moved the
 * record to NOTIFIED.
 *
 * Invariants, under the bucket lock:
 *  L1 A record is linked in a bucket's list iff its state is WAITING or
 *     PARKED, and both change together.
 *  L2 A record's `seq` is the bucket's enqueue count when it was queued, so
 *     list order is seq order (ages, mod 2^32).
 *  L3 The bucket's counter (public, for JS's notify fast path) is raised
 *     before the enqueuer loads its cell, and counts the queued records
 *     otherwise.
 *  L4 Wakes (futex syscalls) happen after the lock is released; a futex
 *     wake that lands on a record freed and taken again meanwhile is a
 *     spurious wake, absorbed by its waiter's state loop.
 *
 * A holder killed inside a critical section (any instruction) leaves the
 * bucket's lock naming a dead id; the next locker takes it over and rebuilds
 * the list from the records' states, keys and seqs (repair), which is also
 * what any walk does when it meets a link that does not check out. So a
 * dead holder costs one rebuild, never a wedged or corrupt queue.
 *
 * Shared words read here, and how each is checked:
 *
 *   word             read by               checked / used as
 *   bucket.head/tail walks, enqueue        0 or 1..NRECORDS, else repair; walks
 *                                          stop after NRECORDS steps (repair)
 *   bucket.seq       enqueue, repair       any value: an order, mod 2^32
 *   record.next/prev walks, unlink         0 or 1..NRECORDS and linking back to the
 *                                          record, else repair
 *   record.state     walks, park, settle   one of SAB_W_*; a queued record that is
 *                                          not WAITING/PARKED means repair
 *   record.key       walks, repair         compared with the caller's offset; in
 *                                          repair, hashed to pick its bucket
 *   record.owner     notify, settle,       compared with ids; probed for liveness
 *                    death                 (lifeline.c checks it is an id)
 *   record.watch     death                 compared with the dying id
 *   record.token     settle                handed to the caller as a value
 *   record.flags     notify                bit 0 only
 *   counts[b]        never for a decision  raised and lowered only (JS may write it)
 *   cell             enqueue               compared with the expected value only
 *
 * Cells: the offset comes from the caller (the binding checked it lies in
 * the public part), and is checked again here against the space's size and
 * the cell's alignment.
 */
#define _GNU_SOURCE
#include "space_lot.h"
#include "glibc_old.h"

#if defined(__linux__)

#include <stdlib.h>
#include <string.h>

#include <errno.h>

#define QUEUED(s) ((s) == SAB_W_WAITING || (s) == SAB_W_PARKED)

static int rec_ok(uint32_t i) { return i >= 1 && i <= NRECORDS; }

/* ---- wakes collected under a lock, run after it ---- */

typedef sab__wakes_t wakes_t;

static void wakes_add(wakes_t *w, uint32_t *word) {
  if (w->n == sizeof w->words / sizeof w->words[0]) {
    for (unsigned i = 0; i < w->n; i++) sab__futex_wake(w->words[i], 1 << 30, 1);
    w->n = 0;
  }
  w->words[w->n++] = word;
}

void sab__wakes_run(wakes_t *w) {
  for (unsigned i = 0; i < w->n; i++) sab__futex_wake(w->words[i], 1 << 30, 1);
  w->n = 0;
}
#define wakes_run sab__wakes_run

/* ---- repair ---- */

typedef struct {
  uint32_t age, index;
} aged_t;

static int by_age_desc(const void *a, const void *b) {
  uint32_t x = ((const aged_t *)a)->age, y = ((const aged_t *)b)->age;
  return x < y ? 1 : x > y ? -1 : 0;
}

/* Under the lock: rebuild bucket b's list from the records that say they are
 * queued in it, oldest first (L1, L2), and its counter (L3), plus `extra`
 * raises the caller made and will take back. */
static void repair_counted(sab_space_t *sp, uint32_t b, uint32_t extra) {
  sab__sbucket_t *bk = sab__sbucket(sp, b);
  aged_t *found = malloc(NRECORDS * sizeof *found);
  uint32_t n = 0, now = sab__ld(&bk->seq);
  if (found == NULL) abort(); /* 16 KiB */
  for (uint32_t i = 1; i <= NRECORDS; i++) {
    sab__record_t *r = sab__record(sp, i);
    uint32_t st = sab__ld(&r->state);
    if (!QUEUED(st) || sab__sbucket_of(sab__ld(&r->key) & ~3u) != b) continue;
    found[n].age = now - sab__ld(&r->seq);
    found[n].index = i;
    n++;
  }
  qsort(found, n, sizeof *found, by_age_desc);
  for (uint32_t k = 0; k < n; k++) {
    sab__record_t *r = sab__record(sp, found[k].index);
    sab__st(&r->prev, k == 0 ? 0 : found[k - 1].index);
    sab__st(&r->next, k + 1 == n ? 0 : found[k + 1].index);
  }
  sab__st(&bk->head, n == 0 ? 0 : found[0].index);
  sab__st(&bk->tail, n == 0 ? 0 : found[n - 1].index);
  __atomic_store_n(sab__count(sp, b), (int32_t)(n + extra), __ATOMIC_SEQ_CST);
  free(found);
}

static void repair(sab_space_t *sp, uint32_t b) { repair_counted(sp, b, 0); }

/* Lock bucket b for this process (its lock id: bucket locks are never held
 * across calls, so a thread's death inside one is its process's),
 * repairing it if its last holder died inside. NULL: the lock could not be
 * had by the thread's lock deadline (space_sys.c). */
static sab__sbucket_t *lock_bucket(sab_space_t *sp, uint32_t b) {
  sab__sbucket_t *bk = sab__sbucket(sp, b);
  uint32_t me = sab__lock_id(sp);
  if (me == 0) return NULL; /* a forked child that could not get one */
  int r = sab__slock(sp, &bk->lock, me);
  if (r < 0) return NULL;
  if (r == 1) repair(sp, b);
  return bk;
}

static void unlock_bucket(sab__sbucket_t *bk) { sab__sunlock(&bk->lock); }

sab__sbucket_t *sab__space_lock(sab_space_t *sp, uint32_t b) { return lock_bucket(sp, b); }
void sab__space_unlock(sab__sbucket_t *bk) { unlock_bucket(bk); }

/* ---- the queue (queue.h) over records in the space ---- */

/* A bucket of the space, with what a visit reports to its caller: the
 * deaths it met (buried above this file), and the semaphores' death hook. */
typedef struct {
  sab_space_t *sp;
  uint32_t b;
  sab__deaths_t *dead;
  sab__sema_hook_t hook;
} spq_c;

static spq_c bucket_of(sab_space_t *sp, uint32_t b, sab__deaths_t *dead) {
  spq_c c = {sp, b, dead, NULL};
  return c;
}

static uint32_t unlink_record(spq_c c, uint32_t i, uint32_t state);
static void notify_record(spq_c c, uint32_t i, wakes_t *w);
static int live(spq_c c, uint32_t i, uint32_t owner);
static void drop(spq_c c, uint32_t i, uint32_t owner);

/* A handle is a record's index, and every word is read once through
 * sab__ld into the caller's local; queue.h checks each handle read from a
 * link (rec_ok, the link back) before it follows it: an index becomes an
 * address within the records table, never a pointer read from the space. */
#define SPQ_REC(c, h)       sab__record((c).sp, (h))
#define SPQ_BK(c)           sab__sbucket((c).sp, (c).b)
#define Q_(name)            spq_##name
#define Q_H                 uint32_t
#define Q_NIL               0u
#define Q_C                 spq_c
#define Q_KEY_T             uint32_t
#define Q_WAKES_T           wakes_t
#define Q_HEAD(c)           sab__ld(&SPQ_BK(c)->head)
#define Q_TAIL(c)           sab__ld(&SPQ_BK(c)->tail)
#define Q_SET_HEAD(c, h)    sab__st(&SPQ_BK(c)->head, (h))
#define Q_SET_TAIL(c, h)    sab__st(&SPQ_BK(c)->tail, (h))
#define Q_NEXT(c, h)        sab__ld(&SPQ_REC(c, h)->next)
#define Q_PREV(c, h)        sab__ld(&SPQ_REC(c, h)->prev)
#define Q_SET_NEXT(c, h, v) sab__st(&SPQ_REC(c, h)->next, (v))
#define Q_SET_PREV(c, h, v) sab__st(&SPQ_REC(c, h)->prev, (v))
#define Q_KEY(c, h)         sab__ld(&SPQ_REC(c, h)->key)
#define Q_OWNER(c, h)       sab__ld(&SPQ_REC(c, h)->owner)
#define Q_WATCH(c, h)       sab__ld(&SPQ_REC(c, h)->watch)
#define Q_QUEUED(c, h)      QUEUED(sab__ld(&SPQ_REC(c, h)->state))
#define Q_SINCE(c, h)       sab__space_since((c).sp, (h))
#define Q_COUNT(c, d)       __atomic_fetch_add(sab__count((c).sp, (c).b), (d), __ATOMIC_SEQ_CST)
#define Q_CHECKED           1
#define Q_OK(h)             rec_ok(h)
#define Q_MAX               NRECORDS
#define Q_REPAIR(c)         repair((c).sp, (c).b)
#define Q_LIVE(c, h, owner) live((c), (h), (owner))
#define Q_DROPS_DEAD        1
#define Q_DROP(c, h, owner) drop((c), (h), (owner))
#define Q_NOTIFY(c, h, x)   notify_record((c), (h), (x))
/* A semaphore's waiters are keyed off | 1 (SAB_SPACE_SEMA): a death runs
 * its hook (space_sema.c) unless the record is the dead's own. */
#define Q_HOOKED(c, h, key, owner, id) (((key)&1u) && (owner) != (id))
#define Q_RUN_HOOK(c, key, h, x) \
  ((void)(h), (c).hook != NULL ? (c).hook((c).sp, (c).b, (key) & ~3u, (x), (c).dead) : (void)0)
#include "queue.h"

/* Take record i (queued, state read as queued) out of the list, storing its
 * final `state`; answers the state it replaced. Links that do not check out
 * mean repair: the record's state is stored first, so the rebuilt list
 * leaves it out. */
static uint32_t unlink_record(spq_c c, uint32_t i, uint32_t state) {
  int ok = spq_unlink(c, i) == Q_DONE;
  /* The exchange tells a notifier whether the waiter sleeps (PARKED): the
   * waiter's WAITING -> PARKED is a compare-exchange, so exactly one of the
   * two sees the other. */
  uint32_t old = __atomic_exchange_n(&sab__record(c.sp, i)->state, state, __ATOMIC_SEQ_CST);
  if (!ok) repair(c.sp, c.b);
  return old;
}

/* Record i of a dead owner leaves its queue: its thread will never look,
 * and a wake counted for it would be lost. */
static void drop(spq_c c, uint32_t i, uint32_t owner) {
  unlink_record(c, i, SAB_W_CANCELLED);
  sab__space_free(c.sp, i, owner);
}

/* Whether record i's owner lives, under the lock (probes without
 * blocking; a death found goes to c.dead); a dead owner's record is
 * dropped. */
static int live(spq_c c, uint32_t i, uint32_t owner) {
  if (sab__space_alive_locked(c.sp, owner, c.dead)) return 1;
  drop(c, i, owner);
  return 0;
}

/* ---- records ---- */

uint32_t sab__space_take(sab_space_t *sp, uint32_t id) {
  uint32_t *hint = &sab__hdr(sp)[HDR_REC_HINT];
  uint32_t start = __atomic_load_n(hint, __ATOMIC_RELAXED) % NRECORDS;
  for (uint32_t k = 0; k < NRECORDS; k++) {
    uint32_t i = (start + k) % NRECORDS + 1;
    sab__record_t *r = sab__record(sp, i);
    uint32_t zero = 0;
    if (__atomic_load_n(&r->owner, __ATOMIC_RELAXED) == 0 &&
        __atomic_compare_exchange_n(&r->owner, &zero, id, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
      __atomic_store_n(hint, i, __ATOMIC_RELAXED);
      sab__st(&r->state, SAB_W_IDLE);
      sab__st(&r->next, 0);
      sab__st(&r->prev, 0);
      return i;
    }
  }
  return 0;
}

void sab__space_free(sab_space_t *sp, uint32_t i, uint32_t id) {
  uint32_t expected = id;
  __atomic_compare_exchange_n(&sab__record(sp, i)->owner, &expected, 0, 0, __ATOMIC_RELEASE,
                              __ATOMIC_RELAXED);
}

uint32_t sab_space_records_used(sab_space_t *sp) {
  uint32_t n = 0;
  for (uint32_t i = 1; i <= NRECORDS; i++) n += sab__ld(&sab__record(sp, i)->owner) != 0;
  return n;
}

/* ---- cells ---- */

static int cell_ok(const sab_space_t *sp, uint32_t off, int size) {
  return (size == 4 || size == 8) && off >= sp->pub_off && off % (uint32_t)size == 0 &&
         off <= sp->size - (uint32_t)size;
}

static int cell_equals(const sab_space_t *sp, uint32_t off, int size, int64_t expected) {
  if (size == 8) {
    return __atomic_load_n((const int64_t *)(sp->base + off), __ATOMIC_SEQ_CST) == expected;
  }
  return __atomic_load_n((const int32_t *)(sp->base + off), __ATOMIC_SEQ_CST) == (int32_t)expected;
}

/* ---- waiting ---- */

uint64_t sab__space_since(sab_space_t *sp, uint32_t i) {
  sab__record_t *r = sab__record(sp, i);
  uint64_t lo = sab__ld(&r->since_lo), hi = sab__ld(&r->since_hi);
  return hi << 32 | lo;
}

void sab__space_queue(sab_space_t *sp, uint32_t b, uint32_t i, uint32_t off, uint32_t watch,
                      uint32_t flags, uint64_t since, uint32_t raised) {
  sab__sbucket_t *bk = sab__sbucket(sp, b);
  sab__record_t *r = sab__record(sp, i);
  uint32_t seq = sab__ld(&bk->seq);
  sab__st(&bk->seq, seq + 1);
  /* SAB_SPACE_SEMA: a semaphore's queue, keyed off | 1 (see sabsync_space.h). */
  uint32_t key = off | ((flags & SAB_SPACE_SEMA) ? 1u : 0u), before = 0;
  spq_c c = bucket_of(sp, b, NULL);
  /* A semaphore's records stay in order of since (sema.c F2): a retry goes
   * back to the place its first ask earned, and takes the seq just before
   * the record it goes before, so that a rebuilt list (L2) keeps it there
   * (ties with its predecessor aside: fairness only). */
  if ((flags & SAB_SPACE_SEMA) && spq_before_since(c, key, since, &before) == Q_DONE &&
      before != 0) {
    seq = sab__ld(&sab__record(sp, before)->seq) - 1;
  }
  sab__st(&r->key, key);
  sab__st(&r->watch, watch);
  sab__st(&r->flags, flags & 0xFFu);
  sab__st(&r->token, 0xFFFFFFFFu);
  sab__st(&r->seq, seq);
  sab__st(&r->since_lo, (uint32_t)since);
  sab__st(&r->since_hi, (uint32_t)(since >> 32));
  sab__st(&r->state, SAB_W_WAITING);
  /* A list that does not check out is rebuilt, ours included (counted). */
  if (spq_link(c, i, before) != Q_DONE) repair_counted(sp, b, raised);
}

int sab_space_enqueue(sab_space_t *sp, uint32_t id, uint32_t off, int size, int64_t expected,
                      uint32_t watch, uint32_t epoch, uint32_t flags, uint32_t *rec) {
  if (!cell_ok(sp, off, size)) return SAB_E_INVAL;
  uint32_t i = sab__space_take(sp, id);
  if (i == 0) return SAB_E_SPACE_FULL;
  uint32_t b = sab__sbucket_of(off);
  int32_t *count = sab__count(sp, b);
  sab__sbucket_t *bk = lock_bucket(sp, b);
  if (bk == NULL) {
    sab__space_free(sp, i, id);
    return SAB_E_SPACE_BUSY;
  }
  /* L3: raise the counter before the load (both seq-cst): a notifier that
   * stored to the cell and then read the counter as 0 is ordered before this
   * load, which then sees its store. */
  __atomic_fetch_add(count, 1, __ATOMIC_SEQ_CST);
  int result = SAB_PENDING;
  if (!cell_equals(sp, off, size, expected)) {
    result = SAB_NOT_EQUAL;
  } else if (watch != 0 && sab__epoch_now(sp) != epoch) {
    /* A death raises the epoch before it visits the buckets: either we see
     * it here, or its visit of this bucket finds our record. */
    result = SAB_OWNER_DEAD;
  } else {
    sab__space_queue(sp, b, i, off, watch, flags, 0, 1);
    *rec = i;
  }
  __atomic_fetch_sub(count, 1, __ATOMIC_SEQ_CST);
  unlock_bucket(bk);
  if (result != SAB_PENDING) sab__space_free(sp, i, id);
  return result;
}

int sab_space_park(sab_space_t *sp, uint32_t rec, uint64_t deadline) {
  if (!rec_ok(rec)) return SAB_CANCELLED;
  /* The lot's park (internal.h), on a shared futex: its state, a value to
   * check as every read. */
  uint32_t s = sab__park_word(&sab__record(sp, rec)->state, deadline, NULL, 1);
  return sab__result_of(s);
}

int sab_space_peek(sab_space_t *sp, uint32_t id, uint32_t rec, uint32_t off) {
  (void)off;
  if (!rec_ok(rec)) return SAB_CANCELLED;
  sab__record_t *r = sab__record(sp, rec);
  uint32_t s = sab__ld(&r->state);
  if (sab__ld(&r->owner) != id) return SAB_CANCELLED;
  return sab__result_of(s);
}

int sab_space_settle(sab_space_t *sp, uint32_t id, uint32_t rec, uint32_t off, int why,
                     uint32_t *token) {
  if (!rec_ok(rec)) return SAB_CANCELLED;
  sab__record_t *r = sab__record(sp, rec);
  uint32_t b = sab__sbucket_of(off);
  sab__sbucket_t *bk = lock_bucket(sp, b);
  int result;
  if (sab__ld(&r->owner) != id) {
    /* Not ours any more (freed by a death that was not ours to die, or
     * scribbled): nothing to settle. */
    result = SAB_CANCELLED;
  } else {
    uint32_t s = sab__ld(&r->state);
    if (QUEUED(s) && bk != NULL) {
      s = why == SAB_TIMED_OUT ? SAB_W_TIMED_OUT : SAB_W_CANCELLED;
      unlink_record(bucket_of(sp, b, NULL), rec, s);
    }
    result = sab__result_of(s);
    if (result == SAB_PENDING) result = SAB_CANCELLED;
    if (token != NULL) *token = sab__ld(&r->token);
    sab__space_free(sp, rec, id);
  }
  if (bk != NULL) unlock_bucket(bk);
  return result;
}

/* ---- notify ---- */

/* Under the lock: record i leaves the queue NOTIFIED; queue its wake (its
 * owner's doorbell for an async record, its state word if it sleeps). */
static void notify_record(spq_c c, uint32_t i, wakes_t *w) {
  sab__record_t *r = sab__record(c.sp, i);
  uint32_t flags = sab__ld(&r->flags), owner = sab__ld(&r->owner);
  uint32_t old = unlink_record(c, i, SAB_W_NOTIFIED);
  if (flags & SAB_SPACE_ASYNC) {
    uint32_t *bell = sab_space_doorbell(c.sp, owner);
    if (bell != NULL) {
      __atomic_fetch_add(bell, 1, __ATOMIC_SEQ_CST);
      wakes_add(w, bell);
    }
  } else if (old == SAB_W_PARKED) {
    wakes_add(w, &r->state);
  }
}

uint32_t sab__space_oldest(sab_space_t *sp, uint32_t b, uint32_t key, sab__deaths_t *dead) {
  return spq_oldest(bucket_of(sp, b, dead), key);
}

uint32_t sab__space_owner(sab_space_t *sp, uint32_t i) {
  return sab__ld(&sab__record(sp, i)->owner);
}

void sab__space_notify_token(sab_space_t *sp, uint32_t b, uint32_t i, uint32_t token,
                             sab__wakes_t *w) {
  sab__st(&sab__record(sp, i)->token, token);
  notify_record(bucket_of(sp, b, NULL), i, w);
}

uint64_t sab__lot_notify(sab_space_t *sp, uint32_t off, uint64_t count, sab__deaths_t *dead) {
  wakes_t w = {{0}, 0};
  if (count == 0 || off >= sp->size) return 0;
  uint32_t b = sab__sbucket_of(off);
  sab__sbucket_t *bk = lock_bucket(sp, b);
  if (bk == NULL) return 0;
  uint64_t n = spq_notify(bucket_of(sp, b, dead), off, count, &w);
  unlock_bucket(bk);
  wakes_run(&w);
  return n;
}

uint32_t sab__space_waiters_locked(sab_space_t *sp, uint32_t b, uint32_t key, sab__deaths_t *dead) {
  return spq_waiters(bucket_of(sp, b, dead), key);
}

uint32_t sab__lot_waiters(sab_space_t *sp, uint32_t off, sab__deaths_t *dead) {
  if (off >= sp->size) return 0;
  uint32_t b = sab__sbucket_of(off);
  sab__sbucket_t *bk = lock_bucket(sp, b);
  if (bk == NULL) return 0;
  uint32_t n = spq_waiters(bucket_of(sp, b, dead), off);
  unlock_bucket(bk);
  return n;
}

/* ---- deaths ---- */

void sab__space_wake_watchers(sab_space_t *sp, uint32_t id, sab__sema_hook_t hook,
                              sab__deaths_t *dead) {
  for (uint32_t b = 0; b < NBUCKETS; b++) {
    wakes_t w = {{0}, 0};
    sab__sbucket_t *bk = lock_bucket(sp, b);
    if (bk == NULL) continue;
    spq_c c = bucket_of(sp, b, dead);
    c.hook = hook;
    /* Semaphores whose waiters queue here: slots of the dead go to them. */
    spq_died(c, id, &w);
    unlock_bucket(bk);
    wakes_run(&w);
  }
  /* Records the dead took but had not queued, or had been woken in and not
   * yet freed: nobody else names them. */
  for (uint32_t i = 1; i <= NRECORDS; i++) {
    sab__record_t *r = sab__record(sp, i);
    if (sab__ld(&r->owner) == id && !QUEUED(sab__ld(&r->state))) sab__space_free(sp, i, id);
  }
}

int sab_space_wait(sab_space_t *sp, uint32_t id, uint32_t off, int size, int64_t expected,
                   uint64_t timeout_ns) {
  uint32_t rec;
  uint64_t deadline = UINT64_MAX;
  if (timeout_ns != UINT64_MAX) {
    uint64_t now = sab_now();
    deadline = timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
  }
  int r = sab_space_enqueue(sp, id, off, size, expected, 0, 0, 0, &rec);
  if (r != SAB_PENDING) return r;
  sab_space_park(sp, rec, deadline);
  return sab_space_settle(sp, id, rec, off, SAB_TIMED_OUT, NULL);
}

#endif /* __linux__ */
