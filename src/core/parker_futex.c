/*
 * Linux parker: the blocking record's own state word is the futex.
 *
 * The waiter announces that it sleeps with WAITING -> PARKED (a
 * compare-exchange), then sleeps while the word reads PARKED. A notifier
 * exchanges in the final state under the bucket lock and issues the wake
 * syscall only if it took PARKED out, after unlocking. The waiter may have
 * returned by then; a FUTEX_WAKE on an address nobody waits on is a no-op,
 * and one that lands on a later wait at the same stack address is a
 * spurious wake, which sab__park absorbs by re-reading the state.
 */
#ifndef SAB_PARKER_UV

#define _GNU_SOURCE
#include "internal.h"

#include <sched.h>
#include <unistd.h>

static int spin_allowed = -1;

int sab__spin_allowed(void) {
  int a = __atomic_load_n(&spin_allowed, __ATOMIC_RELAXED);
  if (a < 0) {
    cpu_set_t set;
    a = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) > 1
                                                    : sysconf(_SC_NPROCESSORS_ONLN) > 1;
    __atomic_store_n(&spin_allowed, a, __ATOMIC_RELAXED);
  }
  return a;
}

void sab__parker_init(sab_waiter_t *w) { (void)w; }
void sab__parker_destroy(sab_waiter_t *w) { (void)w; }

/* Private futexes (futex.c): the lot's records are words of this process. */
uint32_t sab__park(sab_waiter_t *w, uint64_t deadline) {
  return sab__park_word(&w->state, deadline, &w->nudged, 0);
}

void *sab__unpark_locked(sab_waiter_t *w, uint32_t state) {
  uint32_t old = __atomic_exchange_n(&w->state, state, __ATOMIC_SEQ_CST);
  return old == SAB_W_PARKED ? (void *)&w->state : NULL;
}

void sab__unpark(void *token) {
  if (token != NULL) sab__futex_wake(token, 1, 0);
}

#endif /* !SAB_PARKER_UV */
