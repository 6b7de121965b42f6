/*
 * The binding of the threads tier's named locks (src/core/locks.c): one
 * agent per env, made at its first request and gone at its teardown
 * (lifecycle.c), when every lock it holds is released.
 *
 * A request that must wait is a hooked async record (async.h): the table
 * hands it to its env's loop when it is granted, and its promise resolves
 * with the ticket. Each env also arms one record, not keeping its loop
 * alive, that the table hands on when a steal robs one of its holders; JS
 * then takes the robbed tickets (locksStolen) and arms it again.
 *
 * lib/locks/threads.js is the only caller; lib/locks/front.js turns these
 * answers into the Web Locks API.
 */
#include "async.h"
#include "errors.h"
#include "locks.h"
#include "register.h"
#include "values.h"

#include "sabsync_locks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#if defined(_WIN32)
#include <process.h>
#define getpid _getpid
#else
#include <unistd.h>
#endif

/* A record's bytes (sab_async_ext). */
typedef struct {
  uint64_t ticket;
  sab_lclient_t *cl;
} lrec_t;

/* The key of every locks record in an env's keep table (async.h): the
 * object JS passes keeps nothing alive but itself. */
static const char keep_key;

static void on_granted(void *ctx) { sab_napi_async_deliver(ctx); }
static void on_stolen(void *watch) { sab_napi_async_deliver(watch); }

/* The env's agent, made at its first use: NULL with an error thrown. */
static sab_lclient_t *client_of(napi_env env, sab_env_t *e, uint32_t thread) {
  if (e->locks != NULL) return e->locks;
  sab_lclient_t *cl = calloc(1, sizeof *cl);
  if (cl == NULL) {
    sab_napi_throw(env, SAB_ERR_NOMEM, "sabsync: out of memory");
    return NULL;
  }
  cl->granted = on_granted;
  cl->stolen = on_stolen;
  cl->pid = (uint32_t)getpid();
  cl->thread = thread;
  e->locks = cl;
  return cl;
}

void sab_napi_locks_leave(sab_env_t *e) {
  sab_lclient_t *cl = e->locks;
  if (cl == NULL) return;
  e->locks = NULL;
  sab_locks_leave(cl);
  free(cl);
}

/* ---- a waiting request's record ---- */

static int request_cancel(sab_async_t *a, int why) {
  lrec_t *x = sab_async_ext(a);
  return sab_locks_cancel(x->ticket) ? why : SAB_OK;
}

/* Granted, and never to be delivered (its env going): let it go. */
static void request_hand_on(sab_async_t *a) {
  lrec_t *x = sab_async_ext(a);
  (void)sab_locks_release(x->cl, x->ticket);
}

static void record_done(sab_async_t *a) { (void)a; }

static double request_value(const sab_async_t *a, int result) {
  (void)result;
  return (double)((const lrec_t *)((const sab_async_hooked_t *)a)->ext)->ticket;
}

static const sab_async_hooks_t request_hooks = {request_cancel,  NULL,        NULL,         NULL,
                                                request_hand_on, record_done, request_value};

/* ---- the env's steal watch ---- */

static int watch_cancel(sab_async_t *a, int why) {
  lrec_t *x = sab_async_ext(a);
  return sab_locks_unwatch(x->cl, a) ? why : SAB_OK;
}

static void watch_hand_on(sab_async_t *a) { (void)a; }

static double watch_value(const sab_async_t *a, int result) {
  (void)a;
  (void)result;
  return 0;
}

static const sab_async_hooks_t watch_hooks = {watch_cancel,  NULL,        NULL,       NULL,
                                              watch_hand_on, record_done, watch_value};

/* ---- JS ---- */

/* Names up to this many code units are read into the stack. */
#define NAME_STACK 256

static int locks_failed(napi_env env, int r, size_t len) {
  char msg[160];
  switch (r) {
    case SAB_LOCKS_E_NAME:
      snprintf(msg, sizeof msg,
               "locks.request: a lock's name is at most %d UTF-16 code units long, not %zu",
               SAB_LOCKS_NAME_MAX, len);
      napi_throw_range_error(env, "ERR_OUT_OF_RANGE", msg);
      return 1;
    case SAB_LOCKS_E_FULL:
      snprintf(msg, sizeof msg,
               "locks.request: %u lock requests are held or waiting in this process, the most "
               "there can be",
               SAB_LOCKS_MAX);
      sab_napi_throw(env, SAB_ERR_LOCKS_FULL, msg);
      return 1;
    case SAB_LOCKS_E_NOMEM: sab_napi_throw(env, SAB_ERR_NOMEM, "sabsync: out of memory"); return 1;
    default: return 0;
  }
}

/*
 * locksRequest(name, flags, threadId, keep) -> the ticket (granted now), 0
 * (SAB_LOCKS_IF_AVAILABLE and not grantable), or [promise, handle] (waits:
 * the promise resolves with the ticket; the handle is for cancel()).
 * flags: the `how` (sabsync_locks.h) | 4 for shared. keep: an object.
 */
static napi_value locks_request(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 4, NULL);
  sab_env_t *e;
  uint32_t flags, thread;
  size_t len;
  uint16_t stack[NAME_STACK];
  if ((e = sab_napi_env_get(env)) == NULL) return NULL;
  SAB_CALL(env, napi_get_value_uint32(env, argv[1], &flags), NULL);
  SAB_CALL(env, napi_get_value_uint32(env, argv[2], &thread), NULL);
  /* One read when the name fits the stack (the common case); a name that
   * filled it is measured and read again. */
  uint16_t *name = stack;
  SAB_CALL(env, napi_get_value_string_utf16(env, argv[0], (char16_t *)stack, NAME_STACK, &len),
           NULL);
  if (len == NAME_STACK - 1) {
    SAB_CALL(env, napi_get_value_string_utf16(env, argv[0], NULL, 0, &len), NULL);
    if (len > SAB_LOCKS_NAME_MAX) {
      locks_failed(env, SAB_LOCKS_E_NAME, len);
      return NULL;
    }
    if ((name = malloc((len + 1) * sizeof *name)) == NULL) {
      sab_napi_throw(env, SAB_ERR_NOMEM, "sabsync: out of memory");
      return NULL;
    }
  }
  napi_value result = NULL;
  size_t got;
  sab_lclient_t *cl = client_of(env, e, thread);
  if (cl == NULL) goto out;
  if (name != stack &&
      napi_get_value_string_utf16(env, argv[0], (char16_t *)name, len + 1, &got) != napi_ok) {
    sab_napi_throw_last(env, "locks.request");
    goto out;
  }
  int how = (int)(flags & 3), shared = (flags & 4) != 0;
  uint64_t ticket = 0;
  int r = sab_locks_request(cl, name, len, shared, how, NULL, &ticket);
  if (r == SAB_LOCKS_WOULD_WAIT) {
    napi_value pair;
    sab_async_t *a =
        sab_napi_async_new(env, e, &request_hooks, argv[3], (uintptr_t)&keep_key,
                           SAB_ASYNC_REF | SAB_ASYNC_HANDLE, INFINITY, "locks.request", &pair);
    if (a == NULL) goto out;
    lrec_t *x = sab_async_ext(a);
    x->cl = cl;
    r = sab_locks_request(cl, name, len, shared, how, a, &x->ticket);
    if (r == SAB_LOCKS_QUEUED) {
      sab_napi_async_track(e, a);
      result = pair;
      goto out;
    }
    ticket = x->ticket;
    sab_napi_async_discard(e, a); /* granted after all, or failed */
  }
  if (!locks_failed(env, r, len))
    result = sab_napi_number(env, r == SAB_LOCKS_GRANTED ? (double)ticket : 0);
out:
  if (name != stack) free(name);
  return result;
}

static int get_ticket(napi_env env, napi_value v, const char *what, uint64_t *out) {
  double d;
  if (napi_get_value_double(env, v, &d) != napi_ok || !(d >= 1 && d <= 9007199254740991.0) ||
      d != floor(d)) {
    char msg[96];
    snprintf(msg, sizeof msg, "%s: the ticket must be a positive integer", what);
    napi_throw_type_error(env, "ERR_INVALID_ARG_TYPE", msg);
    return -1;
  }
  *out = (uint64_t)d;
  return 0;
}

/* locksRelease(ticket) -> true, or false when this thread holds no such
 * ticket (robbed by a steal meanwhile). */
static napi_value locks_release(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_env_t *e;
  uint64_t ticket;
  napi_value r;
  if ((e = sab_napi_env_get(env)) == NULL || get_ticket(env, argv[0], "locksRelease", &ticket) != 0)
    return NULL;
  int done = e->locks != NULL && sab_locks_release(e->locks, ticket);
  SAB_CALL(env, napi_get_boolean(env, done, &r), NULL);
  return r;
}

/* locksWatch(threadId, keep) -> a promise that resolves when a steal robs
 * one of this thread's holders, or true at once when one was robbed
 * since locksStolen last looked (look again). The promise does not keep
 * the loop alive. */
static napi_value locks_watch(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  sab_env_t *e;
  uint32_t thread;
  napi_value promise, r;
  if ((e = sab_napi_env_get(env)) == NULL) return NULL;
  SAB_CALL(env, napi_get_value_uint32(env, argv[0], &thread), NULL);
  sab_lclient_t *cl = client_of(env, e, thread);
  if (cl == NULL) return NULL;
  sab_async_t *a = sab_napi_async_new(env, e, &watch_hooks, argv[1], (uintptr_t)&keep_key, 0,
                                      INFINITY, "locksWatch", &promise);
  if (a == NULL) return NULL;
  ((lrec_t *)sab_async_ext(a))->cl = cl;
  if (sab_locks_watch(cl, a)) {
    sab_napi_async_track(e, a);
    return promise;
  }
  sab_napi_async_discard(e, a);
  SAB_CALL(env, napi_get_boolean(env, true, &r), NULL);
  return r;
}

/* locksStolen() -> the tickets of this thread robbed since the last call. */
static napi_value locks_stolen(napi_env env, napi_callback_info info) {
  (void)info;
  sab_env_t *e;
  napi_value arr;
  uint64_t some[64];
  if ((e = sab_napi_env_get(env)) == NULL) return NULL;
  SAB_CALL(env, napi_create_array(env, &arr), NULL);
  if (e->locks == NULL) return arr;
  uint32_t at = 0;
  size_t k;
  while ((k = sab_locks_take_stolen(e->locks, some, 64)) > 0) {
    for (size_t i = 0; i < k; i++) {
      napi_value v = sab_napi_number(env, (double)some[i]);
      if (v == NULL) return NULL;
      SAB_CALL(env, napi_set_element(env, arr, at++, v), NULL);
    }
  }
  return arr;
}

/* query's state while the table is locked: JS values made as it walks. */
typedef struct {
  napi_env env;
  napi_value held, pending;
  uint32_t nheld, npending;
  napi_value mode[2]; /* "exclusive", "shared" */
  int failed;
} query_t;

static void query_each(void *u, int held, const uint16_t *name, size_t len, int shared,
                       const sab_lclient_t *cl) {
  query_t *q = u;
  if (q->failed) return;
  napi_env env = q->env;
  napi_value o, n, id;
  char client[32];
  snprintf(client, sizeof client, "%u:%u", cl->pid, cl->thread);
  if (napi_create_object(env, &o) != napi_ok ||
      napi_create_string_utf16(env, (const char16_t *)name, len, &n) != napi_ok ||
      napi_create_string_utf8(env, client, NAPI_AUTO_LENGTH, &id) != napi_ok ||
      napi_set_named_property(env, o, "name", n) != napi_ok ||
      napi_set_named_property(env, o, "mode", q->mode[shared != 0]) != napi_ok ||
      napi_set_named_property(env, o, "clientId", id) != napi_ok ||
      napi_set_element(env, held ? q->held : q->pending, held ? q->nheld++ : q->npending++, o) !=
          napi_ok) {
    q->failed = 1;
  }
}

/* locksQuery() -> { held, pending }: every thread's, as query() gives
 * them ([{ name, mode, clientId: "pid:threadId" }]). */
static napi_value locks_query(napi_env env, napi_callback_info info) {
  (void)info;
  query_t q = {env, NULL, NULL, 0, 0, {NULL, NULL}, 0};
  napi_value out;
  SAB_CALL(env, napi_create_array(env, &q.held), NULL);
  SAB_CALL(env, napi_create_array(env, &q.pending), NULL);
  SAB_CALL(env, napi_create_string_utf8(env, "exclusive", NAPI_AUTO_LENGTH, &q.mode[0]), NULL);
  SAB_CALL(env, napi_create_string_utf8(env, "shared", NAPI_AUTO_LENGTH, &q.mode[1]), NULL);
  sab_locks_query(query_each, &q);
  if (q.failed) {
    sab_napi_throw_last(env, "locks.query");
    return NULL;
  }
  SAB_CALL(env, napi_create_object(env, &out), NULL);
  SAB_CALL(env, napi_set_named_property(env, out, "held", q.held), NULL);
  SAB_CALL(env, napi_set_named_property(env, out, "pending", q.pending), NULL);
  return out;
}

/* locksCounts() -> [requests held or waiting, names in use], process-wide. */
static napi_value locks_counts(napi_env env, napi_callback_info info) {
  (void)info;
  size_t requests, names;
  napi_value arr, a, b;
  sab_locks_counts(&requests, &names);
  SAB_CALL(env, napi_create_array_with_length(env, 2, &arr), NULL);
  if ((a = sab_napi_number(env, (double)requests)) == NULL ||
      (b = sab_napi_number(env, (double)names)) == NULL)
    return NULL;
  SAB_CALL(env, napi_set_element(env, arr, 0, a), NULL);
  SAB_CALL(env, napi_set_element(env, arr, 1, b), NULL);
  return arr;
}

int sab_napi_locks_register(napi_env env, napi_value exports) {
  static const sab_napi_fn_t fns[] = {
      {"locksRequest", locks_request}, {"locksRelease", locks_release},
      {"locksWatch", locks_watch},     {"locksStolen", locks_stolen},
      {"locksQuery", locks_query},     {"locksCounts", locks_counts},
  };
  return sab_napi_add_functions(env, exports, fns, sizeof fns / sizeof fns[0]);
}
