/*
 * A shared space's registration as the binding files that serve both
 * memories see it: wait.c and sema.c take a space's handle as the last
 * argument of each call, rate.c has a space's calls beside its in-process
 * ones; space.c keeps open, close, the directory, owners, the waker thread
 * that decides and delivers async records, and the memory's parker and
 * async hooks (see its top). Linux only.
 */
#ifndef SAB_NAPI_SPACE_H
#define SAB_NAPI_SPACE_H

#if defined(__linux__)

#include "env.h"
#include "park.h"
#include "sabsync_space.h"

#include <pthread.h>
#include <stdint.h>

/*
 * An async record of a space: a hooked record of async.c (its promise,
 * deadline, abort and delivery are the in-process ones'), whose hooks keep
 * this in the record's bytes (sab_async_ext). Its queue entry is in the
 * space, where a notifier in any process reaches it; the registration's
 * waker thread, rung by that notifier, decides how it ended and hands it
 * to its env's delivery queue (space.c).
 */
typedef struct sab_napi_space_async_s sab_napi_space_async_t;
struct sab_napi_space_async_s {
  sab_napi_space_async_t *next, *prev; /* the registration's records; reg->mu */
  struct sab_napi_reg_s *reg;          /* NULL once its space was closed */
  uint32_t rec, off, watch, epoch;     /* its record in the space, and what it was asked */
  uint32_t token;                      /* a Sema's: the slot it was handed */
  uint8_t sema;                        /* a Sema's acquire (SAB_SPACE_SEMA) */
  uint8_t queued;                      /* its record is queued: the waker looks at it; reg->mu */
  int result;                          /* once not queued: how it ended */
};

typedef struct sab_napi_reg_s {
  sab_space_t *sp;
  sab_space_info_t info;
  uint32_t id;
  napi_env env;
  napi_ref buffer; /* weak: to detach it at close */
  int closed;      /* env thread only */
  int orphaned;    /* the JS handle was collected; env thread only */
  pthread_mutex_t mu;
  sab_napi_space_async_t *records; /* guarded by mu: its async records, until freed */
  int stop;                        /* guarded by mu */
  int idle;                        /* guarded by mu: the waker sleeps with no deadline */
  int waker_started;               /* env thread only */
  pthread_t waker;
} sab_napi_reg_t;

/* The registration of a space's handle, open; NULL with an exception
 * pending (a TypeError, or ERR_SABSYNC_SHARED_CLOSED). */
sab_napi_reg_t *sab_napi_space_unwrap(napi_env env, napi_value v);

/* The offset in reg's space of `data`, an address JS gave as a typed
 * array over the space's buffer: 0, or -1 with a RangeError pending when
 * it does not lie in the space's mapping (the core checks the rest). */
int sab_napi_space_off(napi_env env, const sab_napi_reg_t *reg, const void *data, uint32_t *off);

/* This thread's env; NULL with an exception pending. */
sab_env_t *sab_napi_space_env(napi_env env);

/* A blocking call with this deadline bounds its waits on the space's
 * bookkeeping locks accordingly (space_sys.c): its own deadline, plus slack
 * for a holder that was preempted, within the bound every bookkeeping lock
 * has anyway. The call's wrapper puts the thread's previous bound back
 * (sab_space_deadline). */
void sab_napi_space_lock_deadline(uint64_t deadline);
/* A blocking call with this deadline found a bookkeeping lock busy
 * (SAB_E_SPACE_BUSY: a live holder that did not let go within the bound):
 * 1 to ask again, with a fresh bound (the call's deadline has not passed:
 * an untimed call waits for a stopped holder as for any live one, in
 * bounds that look for its thread's end); 0 to answer its timeout (a
 * stopped holder is not corruption); -1 when its thread is being torn
 * down (an exception is pending). */
int sab_napi_space_busy_again(sab_env_t *e, uint64_t deadline);
/* Run the blocking call `in` (which sets its bound with the above) and
 * put the thread's previous bound back. */
napi_value sab_napi_space_blocking(napi_env env, napi_callback_info info, napi_callback in);

/* A queued record of a space, parked by the binding's one park loop
 * (park.c): each end is decided by sab_space_settle under its bucket lock;
 * `token` (NULL for a plain wait) receives a Sema's handed-over slot. */
typedef struct {
  sab_napi_parker_t base;
  sab_napi_reg_t *reg;
  uint32_t rec, off, watch, epoch;
  int reaps; /* between slices: reap every WATCH_NS */
  uint64_t last_reap;
  uint32_t *token;
} sab_napi_space_parker_t;
void sab_napi_space_parker_init(sab_napi_space_parker_t *p, sab_napi_reg_t *reg, uint32_t rec,
                                uint32_t off, uint32_t watch, uint32_t epoch, uint32_t *token);

/*
 * Async records of a space (async.h, hooked). sab_napi_space_async_begin
 * fills a new record's bytes and takes the registration's lock; the caller
 * queues the record in the space (sab_space_enqueue or a Sema's acquire,
 * with SAB_SPACE_ASYNC) and ends with sab_napi_space_async_end, which lists
 * it with the waker when it was queued (in the same hold: the waker must
 * see it whenever it looks after a notify rang) and unlocks. 0, or -1 with
 * an exception pending (the waker thread could not start: nothing locked).
 * The hooks that are the memory's, not the operation's: cancel, arrived,
 * hand_on (a wake it will never deliver: to the next waiter, or a Sema's
 * slot back), done.
 */
int sab_napi_space_async_begin(napi_env env, sab_napi_reg_t *reg, sab_async_t *a, uint32_t off,
                               uint32_t watch, uint32_t epoch, int sema);
void sab_napi_space_async_end(sab_async_t *a, int r, uint32_t rec);
sab_napi_space_async_t *sab_napi_space_async_of(const sab_async_t *a);
int sab_napi_space_async_cancel(sab_async_t *a, int why);
int sab_napi_space_async_arrived(sab_async_t *a);
void sab_napi_space_async_hand_on(sab_async_t *a);
void sab_napi_space_async_done(sab_async_t *a);
/* A bookkeeping lock bound for a loop callback's call on a record's space
 * (no JS call sets one): the record's deadline plus slack, or a short
 * bound. Put the previous one back with sab_space_deadline. */
uint64_t sab_napi_space_async_bound(const sab_async_t *a);

#endif /* __linux__ */

#endif /* SAB_NAPI_SPACE_H */
