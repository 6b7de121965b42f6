/*
 * Internals shared by the core's files: the atomics we use, the bucket
 * table, and the parker interface that each platform file implements.
 */
#ifndef SAB_INTERNAL_H
#define SAB_INTERNAL_H

#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif
/* Apple's headers hide what POSIX does not define (sysconf's
 * _SC_NPROCESSORS_ONLN, parker_uv.c) once _POSIX_C_SOURCE is set, unless
 * _DARWIN_C_SOURCE asks for them too. */
#if defined(__APPLE__) && !defined(_DARWIN_C_SOURCE)
#define _DARWIN_C_SOURCE
#endif

#include "sabsync.h"

#include <pthread.h>

#define SAB_LOAD(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define SAB_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

/*
 * Reads of a primitive's shared memory (sema.c, rate.c) go through these,
 * relaxed (the bucket lock orders them). Built with SAB_FUZZ_READS, each read
 * is followed by a call of sab__fuzz_after_read, which may write any word of
 * the object as another thread could (test/c/fuzz_shared.c): a word read a
 * second time after it was checked then comes back hostile, and ASan sees
 * where it is used.
 */
#ifdef SAB_FUZZ_READS
void sab__fuzz_after_read(const void *word);
#else
#define sab__fuzz_after_read(word) ((void)0)
#endif
static inline uint32_t sab__rd32(const int32_t *p) {
  uint32_t v = (uint32_t)__atomic_load_n(p, __ATOMIC_RELAXED);
  sab__fuzz_after_read(p);
  return v;
}
/* The same, seq-cst: a read that must be ordered after a seq-cst write of
 * another word (the semaphore's holder words, sema.c K2). */
static inline uint32_t sab__rd32_sc(const int32_t *p) {
  uint32_t v = (uint32_t)__atomic_load_n(p, __ATOMIC_SEQ_CST);
  sab__fuzz_after_read(p);
  return v;
}
static inline int64_t sab__rd64(const int64_t *p) {
  int64_t v = __atomic_load_n(p, __ATOMIC_RELAXED);
  sab__fuzz_after_read(p);
  return v;
}

#if defined(__x86_64__) || defined(__i386__)
#define SAB_CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define SAB_CPU_RELAX() __asm__ __volatile__("yield" ::: "memory")
#else
#define SAB_CPU_RELAX() __asm__ __volatile__("" ::: "memory")
#endif

/* How long a blocking waiter spins on its record before it sleeps. A wake
 * across CPUs then costs a cache-line transfer instead of a syscall pair. */
#ifndef SAB_SPIN_NS
#define SAB_SPIN_NS 4000
#endif

/*
 * One bucket: its lock and a FIFO list of the records queued on any
 * address that hashes here. 64-byte aligned so that two buckets never
 * share a cache line.
 */
typedef struct sab__bucket_s {
  pthread_mutex_t mu;
  sab_waiter_t *head; /* guarded by mu */
  sab_waiter_t *tail; /* guarded by mu */
  /* The semaphore's asks woken to try again, not back yet (sema.c F5),
   * of any key in the bucket; guarded by mu. */
  struct sab_sema_ask_s *retry;
} __attribute__((aligned(64))) sab__bucket_t;

/*
 * Bucket access for primitives whose state changes under the lock of the
 * bucket of their address (the token semaphore): lock, find and dequeue the
 * oldest record queued on an address, wake dequeued records after
 * unlocking. sab__dequeue_locked stores `state` (a final state) and returns
 * the record's wake token for sab__wake_unlocked; it must not be touched
 * after that.
 */
sab__bucket_t *sab__lock(uintptr_t addr);
void sab__unlock(sab__bucket_t *b);
sab_waiter_t *sab__oldest_locked(sab__bucket_t *b, uintptr_t addr);
/* Records queued on addr (sab_waiters, under the caller's lock). */
uint32_t sab__waiters_locked(sab__bucket_t *b, uintptr_t addr);
void sab__enqueue_locked(sab__bucket_t *b, sab_waiter_t *w, uintptr_t addr);
/* Queue `w` just before `before` (a record in b's list; NULL: at the tail). */
void sab__enqueue_before_locked(sab__bucket_t *b, sab_waiter_t *w, uintptr_t addr,
                                sab_waiter_t *before);
/* Queue a semaphore's record `w` (its ctx its ask) among the records of
 * `key` in order of since (sema.c F2). */
void sab__enqueue_by_since_locked(sab__bucket_t *b, sab_waiter_t *w, uintptr_t key);
typedef struct {
  void *futex;         /* a parked blocking record's word, or NULL */
  sab_waiter_t *async; /* an async record to hand to its wake callback */
} sab__wake_t;
sab__wake_t sab__dequeue_locked(sab__bucket_t *b, sab_waiter_t *w, uint32_t state);
void sab__wake_unlocked(sab__wake_t wk);

/* Wakes collected under a bucket lock, delivered after it is released
 * (sab__wake_list_run): async records in order, futex words in a small
 * array that is flushed under the lock if it fills. */
typedef struct sab__wake_list_s {
  sab_waiter_t *async_head;
  sab_waiter_t **async_tail;
  void *futex[32];
  unsigned nfutex;
} sab__wake_list_t;
void sab__wake_list_init(sab__wake_list_t *l);
void sab__wake_list_add(sab__wake_list_t *l, sab__wake_t wk);
void sab__wake_list_run(sab__wake_list_t *l);

/* Mark an owner dead and raise the death epoch (owner.c); sab_owner_died
 * (lot.c) does this, then visits the lot's buckets. */
void sab__owner_mark_dead(uint32_t id);

/* Nonzero when spinning can help: more than one CPU is ours to run on. */
int sab__spin_allowed(void);

/*
 * The parker. sab__park sleeps while the record is queued, `deadline` has
 * not passed and the record is not nudged, and answers the state it last
 * saw (WAITING or PARKED mean: the deadline passed, or a nudge). sab__unpark_locked, called with
 * the bucket lock held, stores the record's final state and answers a token for sab__unpark, called
 * after the lock is released (NULL: nothing to do).
 */
void sab__parker_init(sab_waiter_t *w);
void sab__parker_destroy(sab_waiter_t *w);
uint32_t sab__park(sab_waiter_t *w, uint64_t deadline);
void *sab__unpark_locked(sab_waiter_t *w, uint32_t state);
void sab__unpark(void *token);

/* Spin until a record's state word leaves WAITING or SAB_SPIN_NS pass;
 * answer the state last seen (a value to check: in a space, any). Shared
 * by both parkers (each has sab__spin_allowed) and the space's records. */
static inline uint32_t sab__spin_word(const uint32_t *state) {
  uint32_t s = SAB_LOAD(state);
  if (s != SAB_W_WAITING || !sab__spin_allowed()) return s;
  uint64_t until = sab_now() + SAB_SPIN_NS;
  for (unsigned i = 1;; i++) {
    SAB_CPU_RELAX();
    s = SAB_LOAD(state);
    if (s != SAB_W_WAITING) return s;
    if ((i & 31) == 0 && sab_now() >= until) return s;
  }
}
static inline uint32_t sab__spin(sab_waiter_t *w) { return sab__spin_word(&w->state); }

#if defined(__linux__) || defined(SAB_PARKER_WIN)
/* futex.c: the one futex wait (absolute CLOCK_MONOTONIC deadline;
 * UINT64_MAX: none) and wake; `shared`: a word of a space (any process's
 * mapping), else private to this process. On Windows, parker_win.c's
 * WaitOnAddress and WakeByAddress* (this process's words only). */
void sab__futex_wait(uint32_t *word, uint32_t expected, uint64_t deadline, int shared);
void sab__futex_wake(uint32_t *word, int n, int shared);

/*
 * A blocking record's park on its state word, one loop for both memories,
 * the memory a flag (`shared`: a space's record, space_lot.c; else this
 * process's, parker_futex.c), as futex.c takes it. After the
 * spin, announce the sleep with WAITING -> PARKED, a compare-exchange that
 * a notifier's exchange of the final state races (exactly one sees the
 * other), then sleep while the word reads PARKED, `nudged` (NULL: none)
 * reads 0 and `deadline` has not passed. Loops on the word, never on what
 * the futex answers (spurious wakes, EINTR, a wake meant for an earlier
 * tenant of the word). Answers the state last seen: a final state, or
 * WAITING/PARKED (the deadline passed, or a nudge); in a space any value,
 * which the caller checks (sab__result_of).
 */
static inline uint32_t sab__park_word(uint32_t *state, uint64_t deadline, const uint32_t *nudged,
                                      int shared) {
  uint32_t s = sab__spin_word(state);
  if (s == SAB_W_WAITING) {
    uint32_t expected = SAB_W_WAITING;
    if (!__atomic_compare_exchange_n(state, &expected, SAB_W_PARKED, 0, __ATOMIC_SEQ_CST,
                                     __ATOMIC_ACQUIRE)) {
      return expected; /* a final state arrived meanwhile */
    }
  }
  for (;;) {
    s = SAB_LOAD(state);
    sab__fuzz_after_read(state);
    if (s != SAB_W_PARKED) return s;
    /* A nudge that came before our compare-exchange: its exchange is what
     * that compare-exchange read, so its flag is visible here. */
    if (nudged != NULL && __atomic_load_n(nudged, __ATOMIC_ACQUIRE)) return s;
    if (deadline != UINT64_MAX && sab_now() >= deadline) return s;
    sab__futex_wait(state, SAB_W_PARKED, deadline, shared);
  }
}
#endif /* __linux__ || SAB_PARKER_WIN */

/* What a record's final state answers its waiter (any other: still
 * pending), in both memories. */
static inline int sab__result_of(uint32_t state) {
  switch (state) {
    case SAB_W_NOTIFIED: return SAB_OK;
    case SAB_W_TIMED_OUT: return SAB_TIMED_OUT;
    case SAB_W_CANCELLED: return SAB_CANCELLED;
    default: return SAB_PENDING;
  }
}

/* rate.c's take without its lock: the caller holds the lock that guards
 * this limiter (in a shared space, its turn's bucket: space_sema.c). */
int sab__rate_take_locked(const sab_rate_t *r, uint64_t *at, uint64_t *wait_ns);

#endif /* SAB_INTERNAL_H */
