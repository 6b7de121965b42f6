/*
 * A shared space's registration as the binding files that serve both
 * memories see it: wait.c, sema.c and rate.c take a space's calls beside
 * their in-process ones; space.c keeps open, close, the directory, owners
 * and the waker thread that delivers async waits (see its top). Linux only.
 */
#ifndef SAB_NAPI_SPACE_H
#define SAB_NAPI_SPACE_H

#if defined(__linux__)

#include "env.h"
#include "park.h"
#include "sabsync_space.h"

#include <pthread.h>
#include <stdint.h>

/* A pending async wait of a registration (space.c's waker delivers it). */
typedef struct sab_napi_pending_s {
  struct sab_napi_pending_s *next;
  uint32_t rec, off, watch, epoch;
  int32_t *proxy; /* the in-process cell its JS promise parks on */
  napi_ref keep;  /* the proxy's SharedArrayBuffer; env thread only */
  int delivered;  /* the proxy was rung */
  uint32_t flags; /* SAB_SPACE_SEMA: hand a slot back, not a wake */
} sab_napi_pending_t;

typedef struct sab_napi_reg_s {
  sab_space_t *sp;
  sab_space_info_t info;
  uint32_t id;
  napi_env env;
  napi_ref buffer; /* weak: to detach it at close */
  int closed;      /* env thread only */
  int orphaned;    /* the JS handle was collected; env thread only */
  pthread_mutex_t mu;
  sab_napi_pending_t *pending; /* guarded by mu */
  int stop;                    /* guarded by mu */
  int idle;                    /* guarded by mu: the waker sleeps with no deadline */
  int waker_started;           /* env thread only */
  pthread_t waker;
} sab_napi_reg_t;

/* The registration of a space's handle, open; NULL with an exception
 * pending (a TypeError, or ERR_SABSYNC_SHARED_CLOSED). */
sab_napi_reg_t *sab_napi_space_unwrap(napi_env env, napi_value v);

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

/* An async wait's entry, its wake delivered through `proxy` (an
 * Int32Array of one element over a SharedArrayBuffer, holding 0): NULL
 * with an exception pending. Listed with pending_add, under reg->mu, in
 * the same hold as the enqueue (the waker must see it whenever it looks
 * after a notify rang); pending_add answers whether to ring the waker once
 * unlocked. pending_take unlists the entry of `rec` (NULL with an
 * exception pending). */
sab_napi_pending_t *sab_napi_space_pending_new(napi_env env, sab_napi_reg_t *reg, napi_value proxy);
void sab_napi_space_pending_free(sab_napi_reg_t *reg, sab_napi_pending_t *p);
int sab_napi_space_pending_add(sab_napi_reg_t *reg, sab_napi_pending_t *p, uint32_t rec);
sab_napi_pending_t *sab_napi_space_pending_take(napi_env env, sab_napi_reg_t *reg, uint32_t rec);
/* The end of an async wait's record, from JS's (handle, rec, why) (why:
 * SAB_TIMED_OUT, or SAB_CANCELLED: the proxy woke or was aborted),
 * decided by sab_space_settle under its bucket lock into *result (`token`
 * as there); its entry is freed. 0, or -1 with an exception pending. */
int sab_napi_space_settle(napi_env env, napi_callback_info info, uint32_t *token, int *result);
/* Wake the registration's waker: it looks at its pending waits again. */
void sab_napi_space_ring(sab_napi_reg_t *reg);

#endif /* __linux__ */

#endif /* SAB_NAPI_SPACE_H */
