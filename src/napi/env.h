/*
 * Per-env state of the binding (one per JS thread that loaded the addon):
 * its owner id, the termination probe, and the libuv handles and queues of
 * its async waiters (async.c). lifecycle.c makes it and tears it down.
 */
#ifndef SAB_NAPI_ENV_H
#define SAB_NAPI_ENV_H

#include "check.h"
#include "heap.h"
#include "keep.h"
#include "pool.h"
#include "sabsync.h"

#include <uv.h>

typedef struct sab_env_s sab_env_t;
typedef struct sab_async_s sab_async_t;

struct sab_env_s {
  napi_env env;
  uv_loop_t *loop;
  uint32_t id;       /* unique for the process's life, never reused */
  napi_ref noop;     /* a JS no-op, called to detect termination (env.c) */
  napi_ref resource; /* async resource for callback scopes */
  napi_async_context actx;
  /* exports.out (results.c): memory of its own (malloc'd, freed by the
   * ArrayBuffer's finalizer), kept alive by out_ref for the env's life. */
  double *out;
  napi_ref out_ref;
  int out_detachable; /* a plain ArrayBuffer (no external ones here) */
  napi_async_cleanup_hook_handle hook;
  uv_async_t async;
  uv_timer_t timer;
  uv_prepare_t prepare; /* active while async waits are pending */
  int open_handles;

  /* Guarded by mu: the delivery queue, filled from any thread (async.c). */
  uv_mutex_t mu;
  uv_cond_t cv;
  int closed;
  sab_async_t *qhead, *qtail;

  /* Env thread only (async.c). */
  sab_pool_t pools[3];         /* records, by kind (SAB_ASYNC_PLAIN...) */
  sab_keep_t keep;             /* the memory they wait on */
  uint32_t npending;           /* records queued or on their way to delivery */
  uint32_t nref;               /* of which keep the loop alive */
  uint32_t serial;             /* of the next record with a JS handle */
  sab_heap_t heap;             /* deadlines of the records (heap.h) */
  struct sab_lclient_s *locks; /* its agent in the named locks (locks.c), or NULL */
  void **waits;                /* its lock waits (lockwaits.c), by handle - 1 */
  uint32_t nwaits;
};

/* The env's state; NULL with an ERR_SABSYNC_NAPI error pending if none. */
sab_env_t *sab_napi_env_get(napi_env env);

/* Nonzero when the env is being torn down (worker.terminate(), exit): JS
 * can no longer run, and a pending exception says so. */
int sab_napi_env_terminating(sab_env_t *e);

/* The same, cheaper, for the path of every wake: a Node-API call that Node
 * refuses once the env is stopping (env.c). The slices still probe with the
 * call (sab_napi_env_terminating), which any runtime must refuse. */
int sab_napi_env_stopping(sab_env_t *e);

#endif /* SAB_NAPI_ENV_H */
