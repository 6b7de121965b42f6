/*
 * The parking lot: buckets of FIFO wait queues keyed by byte address.
 *
 * Invariants:
 * - A record is in a bucket's list exactly while its state is WAITING or
 *   PARKED, and both facts change together under the bucket lock.
 * - The cell is loaded under the bucket lock, after the record's bucket
 *   counter was raised; a notify that follows a store to the cell therefore
 *   either finds the record queued, or the record's load saw the store.
 * - Wakes (futex syscalls, async delivery) happen after the lock is
 *   released, and never dereference a blocking record again: once its state
 *   is final its thread may return and its stack frame be gone.
 */
#include "internal.h"

#include <stdlib.h>

/* Initialised statically, so that no call can race the first lock (and the
 * binary needs no pthread_once, which glibc 2.34 moved and versioned anew:
 * a prebuilt binary that used it would not load on an older glibc). */
static sab__bucket_t buckets[SAB_BUCKETS] = {
    [0 ... SAB_BUCKETS - 1] = {.mu = PTHREAD_MUTEX_INITIALIZER}};
static int32_t counts[SAB_BUCKETS * SAB_COUNT_STRIDE] __attribute__((aligned(64)));

uint32_t sab_bucket_of(uintptr_t addr) {
  /* Fibonacci hashing of the 4-byte word index; lib/lot.js computes the
   * same with Math.imul, so only the low 32 bits of addr >> 2 count. */
  return ((uint32_t)(addr >> 2) * 0x9E3779B1u) >> (32 - SAB_BUCKET_BITS);
}

int32_t *sab_bucket_counts(void) { return counts; }

/* The queue (queue.h) over records in this process: a handle is a
 * pointer, and the memory is trusted (the checks compile away). */
typedef sab_waiter_t *lotq_h;
#define Q_(name)            lotq_##name
#define Q_H                 lotq_h
#define Q_NIL               NULL
#define Q_C                 sab__bucket_t *
#define Q_KEY_T             uintptr_t
#define Q_WAKES_T           sab__wake_list_t
#define Q_HEAD(c)           ((c)->head)
#define Q_TAIL(c)           ((c)->tail)
#define Q_SET_HEAD(c, h)    ((c)->head = (h))
#define Q_SET_TAIL(c, h)    ((c)->tail = (h))
#define Q_NEXT(c, h)        ((void)(c), (h)->next)
#define Q_PREV(c, h)        ((void)(c), (h)->prev)
#define Q_SET_NEXT(c, h, v) ((void)(c), (h)->next = (v))
#define Q_SET_PREV(c, h, v) ((void)(c), (h)->prev = (v))
#define Q_KEY(c, h)         ((void)(c), (h)->addr)
#define Q_OWNER(c, h)       ((void)(c), (h)->owner)
#define Q_WATCH(c, h)       ((void)(c), (h)->watch)
#define Q_QUEUED(c, h)      1
/* Only records of a semaphore's key are asked: their ctx is their ask. */
#define Q_SINCE(c, h) ((void)(c), ((const sab_sema_ask_t *)(h)->ctx)->since)
#define Q_COUNT(c, d) \
  __atomic_fetch_add(&counts[(size_t)((c)-buckets) * SAB_COUNT_STRIDE], (d), __ATOMIC_SEQ_CST)
#define Q_CHECKED                      0
#define Q_OK(h)                        1
#define Q_MAX                          0
#define Q_REPAIR(c)                    ((void)(c))
#define Q_LIVE(c, h, owner)            1
#define Q_DROPS_DEAD                   0
#define Q_DROP(c, h, owner)            ((void)0)
#define Q_NOTIFY(c, h, x)              sab__wake_list_add((x), sab__dequeue_locked((c), (h), SAB_W_NOTIFIED))
#define Q_HOOKED(c, h, key, owner, id) ((void)(c), (h)->on_death != NULL)
#define Q_RUN_HOOK(c, key, h, x)       (h)->on_death((c), (h), (x))
#include "queue.h"

static sab__bucket_t *lock_bucket(uintptr_t addr, uint32_t *index) {
  uint32_t b = sab_bucket_of(addr);
  if (index != NULL) *index = b;
  if (pthread_mutex_lock(&buckets[b].mu) != 0) abort();
  return &buckets[b];
}

static void unlock_bucket(sab__bucket_t *b) {
  if (pthread_mutex_unlock(&b->mu) != 0) abort();
}

sab__bucket_t *sab__lock(uintptr_t addr) { return lock_bucket(addr, NULL); }
void sab__unlock(sab__bucket_t *b) { unlock_bucket(b); }

sab_waiter_t *sab__oldest_locked(sab__bucket_t *b, uintptr_t addr) { return lotq_oldest(b, addr); }

void sab_waiter_init_blocking(sab_waiter_t *w) {
  w->next = w->prev = NULL;
  w->addr = 0;
  w->state = SAB_W_WAITING;
  w->nudged = 0;
  w->kind = SAB_WAITER_BLOCKING;
  w->watch = 0;
  w->token = 0;
  w->owner = 0;
  w->ctx = NULL;
  w->on_death = NULL;
  sab__parker_init(w);
}

/*
 * The wake callbacks of async records, by index: a record's kind says which
 * (SAB_WAITER_ASYNC + index), so that no record carries the pointer (a
 * pending waitAsync's memory is what it costs). A process has one or two
 * callbacks (the binding has one), each added once, by a compare-exchange;
 * an entry never changes once set.
 */
#define SAB_WAKE_CBS 8
static sab_wake_cb wake_cbs[SAB_WAKE_CBS];

static uint8_t wake_cb_index(sab_wake_cb wake) {
  for (unsigned i = 0; i < SAB_WAKE_CBS; i++) {
    sab_wake_cb cur = __atomic_load_n(&wake_cbs[i], __ATOMIC_ACQUIRE);
    if (cur == NULL) {
      if (__atomic_compare_exchange_n(&wake_cbs[i], &cur, wake, 0, __ATOMIC_ACQ_REL,
                                      __ATOMIC_ACQUIRE))
        return (uint8_t)i;
    }
    if (cur == wake) return (uint8_t)i;
  }
  abort(); /* more distinct callbacks than any client of the lot has */
}

static void wake_async(sab_waiter_t *w) {
  __atomic_load_n(&wake_cbs[w->kind - SAB_WAITER_ASYNC], __ATOMIC_ACQUIRE)(w);
}

void sab_waiter_init_async(sab_waiter_t *w, sab_wake_cb wake) {
  w->next = w->prev = NULL;
  w->addr = 0;
  w->state = SAB_W_WAITING;
  w->nudged = 0;
  w->kind = (uint8_t)(SAB_WAITER_ASYNC + wake_cb_index(wake));
  w->watch = 0;
  w->token = 0;
  w->owner = 0;
  w->ctx = NULL;
  w->on_death = NULL;
}

void sab_waiter_destroy(sab_waiter_t *w) {
  if (w->kind == SAB_WAITER_BLOCKING) sab__parker_destroy(w);
}

static int cell_equals(const void *cell, int size, int64_t expected) {
  if (size == 8) {
    return __atomic_load_n((const int64_t *)cell, __ATOMIC_SEQ_CST) == expected;
  }
  return __atomic_load_n((const int32_t *)cell, __ATOMIC_SEQ_CST) == (int32_t)expected;
}

void sab__enqueue_before_locked(sab__bucket_t *b, sab_waiter_t *w, uintptr_t addr,
                                sab_waiter_t *before) {
  w->addr = addr;
  w->state = SAB_W_WAITING;
  (void)lotq_link(b, w, before); /* trusted memory: never Q_BROKEN */
}

void sab__enqueue_by_since_locked(sab__bucket_t *b, sab_waiter_t *w, uintptr_t key) {
  sab_waiter_t *before;
  (void)lotq_before_since(b, key, ((const sab_sema_ask_t *)w->ctx)->since, &before);
  sab__enqueue_before_locked(b, w, key, before);
}

void sab__enqueue_locked(sab__bucket_t *b, sab_waiter_t *w, uintptr_t addr) {
  sab__enqueue_before_locked(b, w, addr, NULL);
}

int sab_wait_enqueue_watch(sab_waiter_t *w, const void *cell, int size, int64_t expected,
                           uint32_t watch, uint32_t epoch) {
  uint32_t index;
  uintptr_t addr = (uintptr_t)cell;
  int32_t *count;
  sab__bucket_t *b = lock_bucket(addr, &index);
  count = &counts[index * SAB_COUNT_STRIDE];
  /* Raise the counter before the load (both seq-cst): a notifier that
   * stored to the cell and then read the counter as 0 is ordered before
   * this load, which then sees its store. See lib/lot.js. */
  __atomic_fetch_add(count, 1, __ATOMIC_SEQ_CST);
  int r = SAB_PENDING;
  if (!cell_equals(cell, size, expected)) {
    r = SAB_NOT_EQUAL;
  } else if (watch != 0 && sab_death_epoch() != epoch) {
    /* sab_owner_died raises the epoch before it visits any bucket: either
     * we see the new epoch here, or its visit to this bucket finds us. */
    r = SAB_OWNER_DEAD;
  } else {
    w->watch = watch;
    sab__enqueue_locked(b, w, addr);
  }
  __atomic_fetch_sub(count, 1, __ATOMIC_SEQ_CST); /* enqueue counted it again */
  unlock_bucket(b);
  return r;
}

int sab_wait_enqueue(sab_waiter_t *w, const void *cell, int size, int64_t expected) {
  return sab_wait_enqueue_watch(w, cell, size, expected, 0, 0);
}

int sab_wait_park(sab_waiter_t *w, uint64_t deadline) {
  uint32_t s = sab__park(w, deadline);
  /* A nudge seen or not, the caller re-checks why it waits after this
   * return; a nudge from now on makes the next park return at once. An
   * acquire exchange: a nudge it clears happened before that re-check
   * (the nudger's store is a release), so the re-check sees what the
   * nudger did before nudging (the exit flag). */
  (void)__atomic_exchange_n(&w->nudged, 0, __ATOMIC_ACQUIRE);
  return sab__result_of(s);
}

int sab_wait_cancel(sab_waiter_t *w, int why) {
  sab__bucket_t *b = lock_bucket(w->addr, NULL);
  uint32_t s = SAB_LOAD(&w->state);
  if (s == SAB_W_WAITING || s == SAB_W_PARKED) {
    (void)lotq_unlink(b, w);
    s = why == SAB_TIMED_OUT ? SAB_W_TIMED_OUT : SAB_W_CANCELLED;
    /* The caller is the record's own thread: nobody sleeps on it. */
    SAB_STORE(&w->state, s);
  }
  unlock_bucket(b);
  return sab__result_of(s);
}

int sab_wait(const void *cell, int size, int64_t expected, uint64_t timeout_ns) {
  sab_waiter_t w;
  uint64_t deadline = UINT64_MAX;
  if (timeout_ns != UINT64_MAX) {
    uint64_t now = sab_now();
    deadline = timeout_ns > UINT64_MAX - now ? UINT64_MAX : now + timeout_ns;
  }
  sab_waiter_init_blocking(&w);
  int r = sab_wait_enqueue(&w, cell, size, expected);
  if (r == SAB_PENDING) {
    r = sab_wait_park(&w, deadline);
    if (r == SAB_PENDING) r = sab_wait_cancel(&w, SAB_TIMED_OUT);
  }
  sab_waiter_destroy(&w);
  return r;
}

sab__wake_t sab__dequeue_locked(sab__bucket_t *b, sab_waiter_t *w, uint32_t state) {
  sab__wake_t wk = {NULL, NULL};
  (void)lotq_unlink(b, w);
  if (w->kind != SAB_WAITER_BLOCKING) {
    SAB_STORE(&w->state, state);
    wk.async = w;
  } else {
    wk.futex = sab__unpark_locked(w, state);
  }
  return wk;
}

void sab__wake_unlocked(sab__wake_t wk) {
  if (wk.futex != NULL) sab__unpark(wk.futex);
  if (wk.async != NULL) wake_async(wk.async);
}

void sab__wake_list_init(sab__wake_list_t *l) {
  l->async_head = NULL;
  l->async_tail = &l->async_head;
  l->nfutex = 0;
}

void sab__wake_list_add(sab__wake_list_t *l, sab__wake_t wk) {
  if (wk.async != NULL) {
    /* Dequeued: its `next` is free for this list (sabsync.h). */
    wk.async->next = NULL;
    *l->async_tail = wk.async;
    l->async_tail = &wk.async->next;
  }
  if (wk.futex != NULL) {
    if (l->nfutex == sizeof l->futex / sizeof l->futex[0]) {
      /* Full: wake these while still holding the lock (rare: more than
       * 32 parked threads on one bucket). */
      for (unsigned i = 0; i < l->nfutex; i++) sab__unpark(l->futex[i]);
      l->nfutex = 0;
    }
    l->futex[l->nfutex++] = wk.futex;
  }
}

void sab__wake_list_run(sab__wake_list_t *l) {
  for (unsigned i = 0; i < l->nfutex; i++) sab__unpark(l->futex[i]);
  while (l->async_head != NULL) {
    sab_waiter_t *a = l->async_head;
    l->async_head = a->next; /* read before the record is handed on */
    wake_async(a);
  }
}

uint64_t sab_notify(uintptr_t addr, uint64_t count) {
  sab__wake_list_t l;
  if (count == 0) return 0;
  sab__wake_list_init(&l);
  sab__bucket_t *b = lock_bucket(addr, NULL);
  uint64_t n = lotq_notify(b, addr, count, &l);
  unlock_bucket(b);
  sab__wake_list_run(&l);
  return n;
}

/* Wake every record watching `owner` (or any owner), and run each
 * address's death hook once, bucket by bucket (queue.h, died). */
static void wake_watchers(uint32_t owner) {
  for (unsigned i = 0; i < SAB_BUCKETS; i++) {
    sab__bucket_t *b = &buckets[i];
    sab__wake_list_t l;
    if (__atomic_load_n(&counts[i * SAB_COUNT_STRIDE], __ATOMIC_SEQ_CST) == 0) continue;
    sab__wake_list_init(&l);
    if (pthread_mutex_lock(&b->mu) != 0) abort();
    lotq_died(b, owner, &l);
    unlock_bucket(b);
    sab__wake_list_run(&l);
  }
}

void sab_owner_died(uint32_t id) {
  if (id == 0) return;
  /* The mark and the epoch first, then the visit of every bucket: an
   * enqueue that read the old epoch is found by the visit. */
  sab__owner_mark_dead(id);
  wake_watchers(id);
}

uint32_t sab__waiters_locked(sab__bucket_t *b, uintptr_t addr) { return lotq_waiters(b, addr); }

uint32_t sab_waiters(uintptr_t addr) {
  sab__bucket_t *b = lock_bucket(addr, NULL);
  uint32_t n = sab__waiters_locked(b, addr);
  unlock_bucket(b);
  return n;
}

/*
 * A nudge marks each queued blocking record and stores WAITING into its
 * state word, under the bucket lock. A global counter compared before the
 * futex wait lost nudges (192 of 20000 without spinning): one that landed
 * between the waiter's enqueue and its snapshot of the counter, or between
 * its check and its futex wait, left the word reading PARKED, and the
 * waiter slept through it. Now either the nudge's exchange comes first in
 * the word's order and the waiter's WAITING -> PARKED compare-exchange
 * reads it, and so sees `nudged`; or it finds PARKED, and the futex wait
 * cannot sleep on WAITING (or is woken).
 */
unsigned sab_nudge_all(void) {
  unsigned n = 0;
  for (unsigned i = 0; i < SAB_BUCKETS; i++) {
    sab__bucket_t *b = &buckets[i];
    if (__atomic_load_n(&counts[i * SAB_COUNT_STRIDE], __ATOMIC_SEQ_CST) == 0) continue;
    if (pthread_mutex_lock(&b->mu) != 0) abort();
    for (sab_waiter_t *w = b->head; w != NULL; w = w->next) {
      /* Wake under the lock: the record cannot leave while we hold it. The
       * flag's store is ordered before the state's exchange (a release; in
       * the portable parker, w's mutex). */
      if (w->kind != SAB_WAITER_BLOCKING) continue;
      __atomic_store_n(&w->nudged, 1, __ATOMIC_RELEASE);
      sab__unpark(sab__unpark_locked(w, SAB_W_WAITING));
      n++;
    }
    unlock_bucket(b);
  }
  return n;
}

int sab_spin_allowed(void) { return sab__spin_allowed(); }
void sab_cpu_relax(void) { SAB_CPU_RELAX(); }
