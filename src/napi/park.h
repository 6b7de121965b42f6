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

/*
 * A queued record of another memory (a shared space's, space.c), parked by
 * the same loop as sab_napi_park: the loop owns the slices, the deadline,
 * the termination probes and the watchdog; the memory supplies these.
 */
typedef struct sab_napi_parker sab_napi_parker_t;
struct sab_napi_parker {
  /* Sleep until the record is woken or `until` (sab_now() scale) passes:
   * SAB_PENDING while the record is still queued (a slice ended, a spurious
   * wake), else its end, decided (SAB_OK: notified). */
  int (*park)(sab_napi_parker_t *self, uint64_t until);
  /* Take the record out of the queue, for `why` (SAB_TIMED_OUT or
   * SAB_CANCELLED): SAB_OK when a notify took it first, else `why`. */
  int (*leave)(sab_napi_parker_t *self, int why);
  /* Between two slices of a record still queued (NULL: nothing to do):
   * SAB_PENDING to park on, anything else ends the wait with that answer
   * (the hook has settled the record). */
  int (*between)(sab_napi_parker_t *self);
};

/* sab_napi_park for a record of another memory: the same answers. Its
 * slices are timed (the watchdog nudges only the in-process lot). */
int sab_napi_park_on(sab_env_t *e, sab_napi_parker_t *p, uint64_t deadline, int *woken);

/* The main thread is exiting: parked threads look for their termination
 * at once, and from then on every few milliseconds. */
void sab_napi_park_exiting(void);

/* An env was made / is being torn down (lifecycle.c): the park's watchdog
 * thread is stopped with the last env. */
void sab_napi_park_env_added(void);
void sab_napi_park_env_gone(void);

#endif /* SAB_NAPI_PARK_H */
