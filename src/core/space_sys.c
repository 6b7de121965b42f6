/*
 * The system calls of a shared space, apart so that every space file can
 * use them: futexes on shared words, robust process-shared mutexes.
 */
#define _GNU_SOURCE
#include "space_internal.h"
#include "glibc_old.h"

#if defined(__linux__)

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- futexes on shared words ---- */

void sab__futex_wait_shared(uint32_t *word, uint32_t expected, uint64_t deadline) {
  struct timespec ts, *tsp = NULL;
  if (deadline != UINT64_MAX) {
    ts.tv_sec = (time_t)(deadline / 1000000000u);
    ts.tv_nsec = (long)(deadline % 1000000000u);
    tsp = &ts;
  }
  /* No FUTEX_PRIVATE_FLAG: the kernel keys the wait by the page's file and
   * offset, so a wake from another process's mapping reaches it. */
  syscall(SYS_futex, word, FUTEX_WAIT_BITSET, expected, tsp, NULL, FUTEX_BITSET_MATCH_ANY);
}

void sab__futex_wake_shared(uint32_t *word, int n) {
  syscall(SYS_futex, word, FUTEX_WAKE, n, NULL, NULL, 0);
}

/* ---- robust mutexes ---- */

int sab__robust_init(pthread_mutex_t *mu) {
  pthread_mutexattr_t a;
  int r = pthread_mutexattr_init(&a);
  if (r == 0) r = pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  if (r == 0) r = pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  if (r == 0) r = pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ERRORCHECK);
  if (r == 0) r = pthread_mutex_init(mu, &a);
  pthread_mutexattr_destroy(&a);
  return r == 0 ? 0 : -1;
}

int sab__robust_lock(pthread_mutex_t *mu) {
  int r = pthread_mutex_lock(mu);
  if (r == 0) return 0;
  if (r == EOWNERDEAD) {
    pthread_mutex_consistent(mu);
    return 1;
  }
  return -1; /* ENOTRECOVERABLE, EINVAL, EDEADLK: not held */
}

#endif /* __linux__ */
