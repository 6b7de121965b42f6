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

sab_waiter_t *sab__oldest_locked(sab__bucket_t *b, uintptr_t addr) {
  sab_waiter_t *w = b->head;
  while (w != NULL && w->addr != addr) w = w->next;
  return w;
}

static void unlink_record(sab__bucket_t *b, sab_waiter_t *w) {
  if (w->prev != NULL)
    w->prev->next = w->next;
  else
    b->head = w->next;
  if (w->next != NULL)
    w->next->prev = w->prev;
  else
    b->tail = w->prev;
  w->next = w->prev = NULL;
  __atomic_fetch_sub(&counts[sab_bucket_of(w->addr) * SAB_COUNT_STRIDE], 1, __ATOMIC_SEQ_CST);
}

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
  w->next = before;
  w->prev = before != NULL ? before->prev : b->tail;
  if (w->prev != NULL)
    w->prev->next = w;
  else
    b->head = w;
  if (before != NULL)
    before->prev = w;
  else
    b->tail = w;
  __atomic_fetch_add(&counts[sab_bucket_of(addr) * SAB_COUNT_STRIDE], 1, __ATOMIC_SEQ_CST);
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

static int result_of(uint32_t state) {
  switch (state) {
    case SAB_W_NOTIFIED: return SAB_OK;
    case SAB_W_TIMED_OUT: return SAB_TIMED_OUT;
    case SAB_W_CANCELLED: return SAB_CANCELLED;
    default: return SAB_PENDING;
  }
}

int sab_wait_park(sab_waiter_t *w, uint64_t deadline) {
  uint32_t s = sab__park(w, deadline);
  /* A nudge seen or not, the caller re-checks why it waits after this
   * return; a nudge from now on makes the next park return at once. An
   * acquire exchange: a nudge it clears happened before that re-check
   * (the nudger's store is a release), so the re-check sees what the
   * nudger did before nudging (the exit flag). */
  (void)__atomic_exchange_n(&w->nudged, 0, __ATOMIC_ACQUIRE);
  return result_of(s);
}

int sab_wait_cancel(sab_waiter_t *w, int why) {
  sab__bucket_t *b = lock_bucket(w->addr, NULL);
  uint32_t s = SAB_LOAD(&w->state);
  if (s == SAB_W_WAITING || s == SAB_W_PARKED) {
    unlink_record(b, w);
    s = why == SAB_TIMED_OUT ? SAB_W_TIMED_OUT : SAB_W_CANCELLED;
    /* The caller is the record's own thread: nobody sleeps on it. */
    SAB_STORE(&w->state, s);
  }
  unlock_bucket(b);
  return result_of(s);
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
  unlink_record(b, w);
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
  uint64_t n = 0;
  sab__wake_list_t l;
  if (count == 0) return 0;
  sab__wake_list_init(&l);
  sab__bucket_t *b = lock_bucket(addr, NULL);
  sab_waiter_t *w = b->head;
  while (w != NULL && n < count) {
    sab_waiter_t *next = w->next; /* read before w's state is final */
    if (w->addr == addr) {
      sab__wake_list_add(&l, sab__dequeue_locked(b, w, SAB_W_NOTIFIED));
      n++;
    }
    w = next;
  }
  unlock_bucket(b);
  sab__wake_list_run(&l);
  return n;
}

/* Wake every record watching `owner` (or any owner), and run each address's
 * death hook once, bucket by bucket. */
static void wake_watchers(uint32_t owner) {
  for (unsigned i = 0; i < SAB_BUCKETS; i++) {
    sab__bucket_t *b = &buckets[i];
    sab__wake_list_t l;
    if (__atomic_load_n(&counts[i * SAB_COUNT_STRIDE], __ATOMIC_SEQ_CST) == 0) continue;
    sab__wake_list_init(&l);
    if (pthread_mutex_lock(&b->mu) != 0) abort();
    uintptr_t hooked[8];
    unsigned nhooked = 0;
    for (sab_waiter_t *w = b->head, *next; w != NULL; w = next) {
      next = w->next;
      if (w->on_death != NULL) {
        /* The hook dequeues records of this address only: step past them
         * first, so that `next` stays queued. Each address runs once per
         * visit (again only if `hooked` overflows; hooks are idempotent). */
        uintptr_t addr = w->addr;
        unsigned k = 0;
        while (k < nhooked && hooked[k] != addr) k++;
        if (k < nhooked) continue;
        if (nhooked < sizeof hooked / sizeof hooked[0]) hooked[nhooked++] = addr;
        while (next != NULL && next->addr == addr) next = next->next;
        w->on_death(b, w, &l);
      } else if (w->watch == owner || w->watch == SAB_WATCH_ANY) {
        sab__wake_list_add(&l, sab__dequeue_locked(b, w, SAB_W_NOTIFIED));
      }
    }
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

uint32_t sab__waiters_locked(const sab__bucket_t *b, uintptr_t addr) {
  uint32_t n = 0;
  for (const sab_waiter_t *w = b->head; w != NULL; w = w->next) {
    if (w->addr == addr) n++;
  }
  return n;
}

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
