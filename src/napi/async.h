/*
 * Async waiters: records queued in the lot whose wake is delivered on their
 * env's own loop (a uv_async_t), with deadlines on one uv_timer_t per env.
 * Shared by waitAsync (wait.c) and the semaphore's acquire (sema.c).
 */
#ifndef SAB_NAPI_ASYNC_H
#define SAB_NAPI_ASYNC_H

#include "env.h"

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
  /* Resolve with the record's token (a number; SAB_NAPI_SEMA_TIMED_OUT or
   * SAB_NAPI_SEMA_NO_TOKEN without one) instead of the result's name
   * (token semaphores). */
  uint8_t yields_token;
  /* A wake this record was counted for but will never deliver (its env is
   * torn down): hand it on. NULL: sab_notify(addr, 1), the plain waiters'
   * way; a token semaphore gives its slot back instead. Env thread only. */
  void (*unconsumed)(sab_async_t *a);
  /* A token semaphore's record woken without a token (to try again): ask
   * again with the same record; timed_out: its deadline passed, try once
   * without queuing. Answers SAB_PENDING (queued again: the record stays
   * pending) or the result to settle with. NULL: settle as woken. Env
   * thread only. */
  int (*retry)(sab_async_t *a, int timed_out);
  /* An abort that came while the record was woken to try again (off the
   * lot, its delivery on the way): the retry rejects with it instead of
   * asking again. Env thread only. */
  napi_ref abort_reason;
  /* Guarded by env->mu. */
  uint8_t queued;
  sab_async_t *qnext;
};

/* What a token semaphore's promise resolves to without a token. */
#define SAB_NAPI_SEMA_TIMED_OUT (-1)
#define SAB_NAPI_SEMA_NO_TOKEN  (-2) /* woken by a stray notify: acquire again */

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

/* The env's loop handles: open at creation (0, or a libuv error with
 * nothing left open), and at teardown settle every record, then close them
 * (`closed` runs once per handle; there are SAB_NAPI_ASYNC_HANDLES). */
#define SAB_NAPI_ASYNC_HANDLES 3
int sab_napi_async_open(sab_env_t *e);
void sab_napi_async_teardown(sab_env_t *e, uv_close_cb closed);

#endif /* SAB_NAPI_ASYNC_H */
