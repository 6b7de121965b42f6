/*
 * Portable parker: a mutex and condition variable (libuv's) in the record.
 *
 * The notifier stores the final state and signals with the record's mutex
 * held, and does so while it holds the bucket lock, because the condvar
 * lives in the waiter's stack frame: after the bucket lock is released the
 * waiter may be gone. The waiter takes the record's mutex once more before
 * it destroys it (sab__parker_destroy), so a notifier still inside that
 * mutex has left it first.
 */
#ifdef SAB_PARKER_UV

#include "internal.h"

#include <stdlib.h>
#include <unistd.h>

int sab__spin_allowed(void) {
  static int allowed = -1;
  int a = __atomic_load_n(&allowed, __ATOMIC_RELAXED);
  if (a < 0) {
    a = sysconf(_SC_NPROCESSORS_ONLN) > 1;
    __atomic_store_n(&allowed, a, __ATOMIC_RELAXED);
  }
  return a;
}

void sab__parker_init(sab_waiter_t *w) {
  if (uv_mutex_init(&w->mu) != 0 || uv_cond_init(&w->cv) != 0) abort();
}

void sab__parker_destroy(sab_waiter_t *w) {
  uv_mutex_lock(&w->mu);
  uv_mutex_unlock(&w->mu);
  uv_cond_destroy(&w->cv);
  uv_mutex_destroy(&w->mu);
}

uint32_t sab__park(sab_waiter_t *w, uint64_t deadline) {
  uint32_t s = sab__spin(w);
  if (s != SAB_W_WAITING && s != SAB_W_PARKED) return s;
  uv_mutex_lock(&w->mu);
  for (;;) {
    s = SAB_LOAD(&w->state);
    if (s != SAB_W_WAITING && s != SAB_W_PARKED) break;
    if (__atomic_load_n(&w->nudged, __ATOMIC_ACQUIRE)) break; /* set under w->mu */
    if (deadline == UINT64_MAX) {
      uv_cond_wait(&w->cv, &w->mu);
    } else {
      uint64_t now = sab_now();
      if (now >= deadline) break;
      (void)uv_cond_timedwait(&w->cv, &w->mu, deadline - now);
    }
  }
  uv_mutex_unlock(&w->mu);
  return s;
}

void *sab__unpark_locked(sab_waiter_t *w, uint32_t state) {
  uv_mutex_lock(&w->mu);
  SAB_STORE(&w->state, state);
  uv_cond_signal(&w->cv);
  uv_mutex_unlock(&w->mu);
  return NULL;
}

void sab__unpark(void *token) { (void)token; }

#endif /* SAB_PARKER_UV */
