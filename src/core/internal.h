/*
 * Internals shared by the core's files: the atomics we use, the bucket
 * table, and the parker interface that each platform file implements.
 */
#ifndef SAB_INTERNAL_H
#define SAB_INTERNAL_H

#if !defined(_GNU_SOURCE) && !defined(_POSIX_C_SOURCE)
#define _POSIX_C_SOURCE 200809L
#endif

#include "sabsync.h"

#include <pthread.h>

#define SAB_LOAD(p)     __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define SAB_STORE(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)

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
typedef struct {
  pthread_mutex_t mu;
  sab_waiter_t *head; /* guarded by mu */
  sab_waiter_t *tail; /* guarded by mu */
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
void sab__enqueue_locked(sab__bucket_t *b, sab_waiter_t *w, uintptr_t addr);
typedef struct {
  void *futex;         /* a parked blocking record's word, or NULL */
  sab_waiter_t *async; /* an async record to hand to its wake callback */
} sab__wake_t;
sab__wake_t sab__dequeue_locked(sab__bucket_t *b, sab_waiter_t *w, uint32_t state);
void sab__wake_unlocked(sab__wake_t wk);

/* Wakes collected under a bucket lock, delivered after it is released
 * (sab__wake_list_run): async records in order, futex words in a small
 * array that is flushed under the lock if it fills. */
typedef struct {
  sab_waiter_t *async_head;
  sab_waiter_t **async_tail;
  void *futex[32];
  unsigned nfutex;
} sab__wake_list_t;
void sab__wake_list_init(sab__wake_list_t *l);
void sab__wake_list_add(sab__wake_list_t *l, sab__wake_t wk);
void sab__wake_list_run(sab__wake_list_t *l);

/* Wake every record watching `owner` or any owner (owner.c, at a death);
 * for records watching SAB_WATCH_SEMA, run sab__sema_on_death instead. */
void sab__wake_watchers(uint32_t owner);

/* A death happened and records are queued on the semaphore at `addr`
 * (bucket `b`, locked): reclaim slots of dead holders and hand them to the
 * oldest waiters. Touches the semaphore's memory only while a record is
 * queued on it (that record keeps the memory alive). */
void sab__sema_on_death(sab__bucket_t *b, uintptr_t addr, sab__wake_list_t *l);

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

/* Spin until the record leaves WAITING or SAB_SPIN_NS pass; answer the
 * state last seen. Shared by both parkers. */
uint32_t sab__spin(sab_waiter_t *w);

#endif /* SAB_INTERNAL_H */
