/*
 * The binding's blocking park (park.h), used by every blocking call.
 *
 * A thread blocked in native code is not interrupted by worker.terminate()
 * or process.exit(): V8 interrupts only its own Atomics.wait. So a parked
 * record sleeps in slices, and between slices (and after any wake) its
 * thread probes the env (sab_napi_env_terminating): once termination was
 * asked for, it leaves the queue and returns, handing the caller any wake
 * it was counted for. The main thread's 'exit' nudges every parked thread
 * (sab_nudge_all) and shortens the slices, so that a process exiting with
 * parked, unref'd workers does not wait a whole slice per worker.
 */
#include "park.h"

/* How long a blocking wait sleeps between checks for termination. */
#define SLICE_NS (50ull * 1000000ull)
/* The same, once the main thread is exiting. */
#define EXIT_SLICE_NS (5ull * 1000000ull)

/* Set when the main thread emits 'exit'. */
static int exiting;

void sab_napi_park_exiting(void) {
  __atomic_store_n(&exiting, 1, __ATOMIC_RELAXED);
  sab_nudge_all();
}

int sab_napi_park(sab_env_t *e, sab_waiter_t *w, uint64_t deadline, int *woken) {
  *woken = 0;
  for (;;) {
    uint64_t now = sab_now();
    int r;
    if (now >= deadline) {
      /* SAB_OK here: a notify took the record first. */
      r = sab_wait_cancel(w, SAB_TIMED_OUT);
    } else {
      uint64_t slice = __atomic_load_n(&exiting, __ATOMIC_RELAXED) ? EXIT_SLICE_NS : SLICE_NS;
      r = sab_wait_park(w, deadline - now > slice ? now + slice : deadline);
      if (r == SAB_PENDING) {
        if (!sab_napi_env_terminating(e)) continue;
        /* Leave the queue; a notify may have taken us meanwhile. */
        *woken = sab_wait_cancel(w, SAB_CANCELLED) == SAB_OK;
        return SAB_NAPI_TERMINATED;
      }
    }
    if (r == SAB_OK && sab_napi_env_terminating(e)) {
      /* Woken, but this thread will never run JS again (terminate()
       * arrived while we slept): the wake would be lost with it. */
      *woken = 1;
      return SAB_NAPI_TERMINATED;
    }
    return r;
  }
}
