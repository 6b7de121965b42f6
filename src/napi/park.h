/*
 * The one blocking park of the binding: a queued blocking record sleeps in
 * slices, and between slices its thread looks for its own termination.
 */
#ifndef SAB_NAPI_PARK_H
#define SAB_NAPI_PARK_H

#include "env.h"

/* sab_napi_park's answer when the env is being torn down. */
#define SAB_NAPI_TERMINATED (-100)

/*
 * Park `w` (queued by the caller) until it leaves the queue or `deadline`
 * (sab_now() scale; UINT64_MAX: none) passes. Answers SAB_OK (notified) or
 * SAB_TIMED_OUT (dequeued at the deadline), or SAB_NAPI_TERMINATED when the
 * thread is being torn down (worker.terminate(), the process exiting): the
 * record has then left the queue, and *woken says whether a notify took it
 * first, so that the caller hands that wake on (it would be lost with the
 * thread). JS can no longer run then, and an exception is pending.
 */
int sab_napi_park(sab_env_t *e, sab_waiter_t *w, uint64_t deadline, int *woken);

/* The main thread is exiting: parked threads look for their termination
 * at once, and from then on every few milliseconds. */
void sab_napi_park_exiting(void);

/* An env was made / is being torn down (lifecycle.c): the park's watchdog
 * thread is stopped with the last env. */
void sab_napi_park_env_added(void);
void sab_napi_park_env_gone(void);

#endif /* SAB_NAPI_PARK_H */
