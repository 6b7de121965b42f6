/*
 * Per-env state of the binding: the env's loop, its async delivery queue,
 * the deadline heap of its async waiters, and teardown.
 */
#ifndef SAB_NAPI_ENV_H
#define SAB_NAPI_ENV_H

#include "check.h"
#include "sabsync.h"

#include <uv.h>

typedef struct sab_env_s sab_env_t;
typedef struct sab_async_s sab_async_t;

/*
 * An async waiter. Owned by its env's thread while queued in the lot; from
 * NOTIFIED until its wake callback has queued it for delivery, by the
 * notifier (see sab_wake_cb).
 */
struct sab_async_s {
  sab_waiter_t w; /* first: the core hands us &w */
  sab_env_t *env;
  /* Env thread only. */
  sab_async_t *pnext, *pprev; /* the env's unsettled records */
  size_t heap_index;          /* in the deadline heap, or SIZE_MAX */
  uint64_t deadline;          /* sab_now() scale, UINT64_MAX: none */
  napi_ref memory;            /* keeps the SharedArrayBuffer alive */
  napi_deferred deferred;
  uint8_t keeps_loop; /* counted in env->nref */
  uint8_t js_holds;   /* a JS handle points here (abort) */
  uint8_t settled;
  /* Resolve with the record's token (a number; -1 timed out, -2 woken
   * without one) instead of 'ok' / 'timed-out' (token semaphores). */
  uint8_t yields_token;
  /* A wake this record was counted for but will never deliver (its env is
   * torn down): hand it on. NULL: sab_notify(addr, 1), the plain waiters'
   * way; a token semaphore gives its slot back instead. Env thread only. */
  void (*unconsumed)(sab_async_t *a);
  /* Guarded by env->mu. */
  uint8_t queued;
  sab_async_t *qnext;
};

struct sab_env_s {
  napi_env env;
  uv_loop_t *loop;
  uint32_t id;       /* unique for the process's life, never reused */
  napi_ref noop;     /* called to detect termination */
  napi_ref resource; /* async resource for callback scopes */
  napi_async_context actx;
  napi_async_cleanup_hook_handle hook;
  uv_async_t async;
  uv_timer_t timer;
  uv_prepare_t prepare; /* active while async waits are pending */
  int open_handles;

  /* Guarded by mu: the delivery queue, filled from any thread. */
  uv_mutex_t mu;
  uv_cond_t cv;
  int closed;
  sab_async_t *qhead, *qtail;

  /* Env thread only. */
  sab_async_t *pending;
  sab_async_t **heap;
  size_t heap_len, heap_cap;
  uint32_t nref;
};

/*
 * Type tags of the externals this binding hands to JS: each is tagged when
 * it is made and checked before its pointer is used (sab_napi_unwrap), so
 * that an external of another kind, or another addon's, is a TypeError and
 * never a pointer taken for what it is not.
 */
extern const napi_type_tag sab_napi_tag_async;     /* a sab_async_t (waitAsync handles) */
extern const napi_type_tag sab_napi_tag_sema_view; /* a Sema's checked view */
/* Tag a fresh external: 0, or -1 with an exception pending. */
int sab_napi_tag(napi_env env, napi_value external, const napi_type_tag *tag);
/* The pointer of `v` if it is an external tagged `tag`; else NULL with a
 * TypeError pending that says `what` was expected. */
void *sab_napi_unwrap(napi_env env, napi_value v, const napi_type_tag *tag, const char *what);

/* Create the env's state and register its teardown. NULL: an exception is
 * pending. */
sab_env_t *sab_napi_env_create(napi_env env);
sab_env_t *sab_napi_env_get(napi_env env);

/* Nonzero when the env is being torn down (worker.terminate(), exit): JS
 * can no longer run, and a pending exception says so. */
int sab_napi_env_terminating(sab_env_t *e);

/* Milliseconds (normalised by JS: >= 0, or +Infinity) to a deadline on
 * sab_now()'s clock, rounded up so that it is never early. */
uint64_t sab_napi_deadline(double ms);

/* flags of the async calls (waitAsync, semaAcquireAsync) */
#define SAB_ASYNC_REF    1 /* the pending wait keeps the loop alive */
#define SAB_ASYNC_HANDLE 2 /* answer [promise, handle], for cancel() */

/*
 * Make `a` (zeroed, allocated by the caller) a record ready to queue: its
 * wake callback, a reference to `buffer`, a promise, a deadline `ms` from
 * now, and in *out the promise, or [promise, handle] with SAB_ASYNC_HANDLE.
 * 0, or -1 with an exception pending (naming `what`) and the record gone.
 */
int sab_napi_async_prepare(napi_env env, sab_env_t *e, sab_async_t *a, napi_value buffer,
                           uint32_t flags, double ms, const char *what, napi_value *out);
/* A prepared record that the lot did not queue (the call answered at once):
 * settle its unseen promise and free it. */
void sab_napi_async_discard(sab_env_t *e, sab_async_t *a);
/* Register a queued async record (prepared as above). */
void sab_napi_async_track(sab_env_t *e, sab_async_t *a);
/* Abort a record from JS: answers 1 if it was still queued (it is then
 * rejected with `reason`), 0 if it had already settled or been woken. */
int sab_napi_async_cancel(sab_env_t *e, sab_async_t *a, napi_value reason);
/* A JS handle to the record was collected. */
void sab_napi_async_release_handle(sab_async_t *a);
/* The wake callback given to the core for every async record. */
void sab_napi_async_wake(sab_waiter_t *w);
void sab_napi_async_free(sab_env_t *e, sab_async_t *a);

/* How long a blocking wait sleeps between checks for termination (shorter
 * once the main thread is exiting). binding.c. */
uint64_t sab_napi_slice_ns(void);
/* Add the token semaphore's and rate limiter's functions to `exports`:
 * 0, or -1 with an exception pending. sema.c. */
int sab_napi_sema_register(napi_env env, napi_value exports);

#endif /* SAB_NAPI_ENV_H */
