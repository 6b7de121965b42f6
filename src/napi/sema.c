/*
 * The binding of the token semaphore and the rate limiter: JS values to
 * core calls (src/core/sema.c, rate.c), nothing more.
 *
 * lib/sema.js and lib/rate-limit.js validate what users pass; here every
 * call re-makes a checked view of the memory from the Int32Array it is
 * given (sab_sema_open / sab_rate_open), so no word of the shared memory is
 * trusted for an index, and a broken state throws ERR_SABSYNC_BAD_MEMORY.
 * The caller's owner id is its env's.
 */
#include "check.h"
#include "env.h"
#include "sabsync.h"

#include <math.h>
#include <stdlib.h>

/* An async acquire: the env's record and the view its ctx points to. */
typedef struct {
  sab_async_t a; /* first: env.c frees it as a sab_async_t */
  sab_sema_t sema;
} sema_async_t;

static napi_value number(napi_env env, double v) {
  napi_value r;
  SAB_CALL(env, napi_create_double(env, v, &r), NULL);
  return r;
}

static void throw_code(napi_env env, const char *code, const char *msg) {
  napi_throw_error(env, code, msg);
}

/* The Int32Array `ta`'s bytes; its buffer in *buffer if wanted. */
static int get_memory(napi_env env, napi_value ta, void **data, size_t *bytes, napi_value *buffer) {
  bool is_ta = false;
  napi_typedarray_type type;
  size_t length = 0, offset = 0;
  napi_value ab;
  SAB_CALL(env, napi_is_typedarray(env, ta, &is_ta), -1);
  if (is_ta)
    SAB_CALL(env, napi_get_typedarray_info(env, ta, &type, &length, data, &ab, &offset), -1);
  if (!is_ta || type != napi_int32_array || *data == NULL) {
    napi_throw_type_error(env, NULL, "memory must be an Int32Array");
    return -1;
  }
  *bytes = length * 4;
  if (buffer != NULL) *buffer = ab;
  return 0;
}

/*
 * A Sema's checked view, made once per JS Sema (semaView) and passed instead
 * of its Int32Array by the calls that run often, which then skip the typed
 * array lookups and the header checks (most of a call's cost). The JS Sema
 * keeps both the view and the Int32Array, so the memory outlives every call
 * that is given the view. Its type tag (sab_napi_tag_sema_view) tells it
 * from other externals.
 */
typedef struct {
  sab_sema_t sema;
} sema_view_t;

static void view_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  free(data);
}

/* A Sema from its view or its Int32Array (`buffer` wanted: the array). */
static int get_sema(napi_env env, napi_value ta, sab_sema_t *s, napi_value *buffer) {
  void *data;
  size_t bytes;
  if (buffer == NULL) {
    napi_valuetype t;
    SAB_CALL(env, napi_typeof(env, ta, &t), -1);
    if (t == napi_external) {
      const sema_view_t *v =
          sab_napi_unwrap(env, ta, &sab_napi_tag_sema_view, "a Sema view or an Int32Array");
      if (v == NULL) return -1;
      /* What sab_sema_open checks that can change: the header words (the
       * memory may have been overwritten, or made a Sema anew). */
      if (sab_sema_check(&v->sema) != 0) {
        throw_code(env, "ERR_SABSYNC_BAD_MEMORY", "sabsync: this memory does not hold a Sema");
        return -1;
      }
      *s = v->sema;
      return 0;
    }
  }
  if (get_memory(env, ta, &data, &bytes, buffer) != 0) return -1;
  if (sab_sema_open(s, data, bytes) != 0) {
    throw_code(env, "ERR_SABSYNC_BAD_MEMORY", "sabsync: this memory does not hold a Sema");
    return -1;
  }
  return 0;
}

static int get_env(napi_env env, sab_env_t **e) {
  *e = sab_napi_env_get(env);
  if (*e == NULL) {
    throw_code(env, "ERR_SABSYNC_NAPI", "sabsync: no per-thread state");
    return -1;
  }
  return 0;
}

static napi_value corrupt(napi_env env) {
  throw_code(env, "ERR_SABSYNC_BAD_MEMORY", "sabsync: the Sema's shared state is corrupt");
  return NULL;
}

/* semaBytes(nr) -> bytes, 0 when nr is out of range */
static napi_value sema_bytes(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  uint32_t nr;
  SAB_CALL(env, napi_get_value_uint32(env, argv[0], &nr), NULL);
  return number(env, (double)sab_sema_bytes(nr));
}

/* semaInit(i32, nr) */
static napi_value sema_init(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  void *data;
  size_t bytes;
  uint32_t nr;
  sab_sema_t s;
  if (get_memory(env, argv[0], &data, &bytes, NULL) != 0) return NULL;
  SAB_CALL(env, napi_get_value_uint32(env, argv[1], &nr), NULL);
  if (sab_sema_init(&s, data, bytes, nr) != 0) {
    napi_throw_range_error(env, NULL, "nr does not fit the memory");
    return NULL;
  }
  return NULL;
}

/* semaView(i32) -> the Sema's view (throws ERR_SABSYNC_BAD_MEMORY) */
static napi_value sema_view(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_sema_t s;
  napi_value view;
  if (get_sema(env, argv[0], &s, NULL) != 0) return NULL;
  sema_view_t *v = malloc(sizeof *v);
  if (v == NULL) {
    throw_code(env, "ERR_SABSYNC_NOMEM", "sabsync: out of memory");
    return NULL;
  }
  v->sema = s;
  if (napi_create_external(env, v, view_finalize, NULL, &view) != napi_ok) {
    sab_napi_throw_last(env, "semaView");
    free(v);
    return NULL;
  }
  /* On failure the external's finalizer frees v. */
  if (sab_napi_tag(env, view, &sab_napi_tag_sema_view) != 0) return NULL;
  return view;
}

/* semaTry(view or i32) -> token, or -1 when none is free (or others wait) */
static napi_value sema_try(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_env_t *e;
  sab_sema_t s;
  uint32_t token;
  if (get_env(env, &e) != 0 || get_sema(env, argv[0], &s, NULL) != 0) return NULL;
  int r = sab_sema_acquire(&s, e->id, NULL, &token);
  if (r == SAB_E_CORRUPT) return corrupt(env);
  return number(env, r == SAB_OK ? (double)token : -1);
}

/*
 * semaAcquire(view or i32, timeoutMs) -> token, or -1 on timeout. Blocks in slices
 * like binding.c's wait: between slices it looks for the env's
 * termination, and then leaves the queue, gives back a slot handed over
 * meanwhile, and returns with the termination exception pending.
 */
static napi_value sema_acquire(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  sab_env_t *e;
  sab_sema_t s;
  double ms;
  uint32_t token = SAB_SEMA_NO_TOKEN;
  if (get_env(env, &e) != 0 || get_sema(env, argv[0], &s, NULL) != 0) return NULL;
  SAB_CALL(env, napi_get_value_double(env, argv[1], &ms), NULL);
  uint64_t deadline = sab_napi_deadline(ms);
  int r;
  for (;;) {
    sab_waiter_t w;
    sab_waiter_init_blocking(&w);
    r = sab_sema_acquire(&s, e->id, &w, &token); /* SAB_OK sets token */
    while (r == SAB_PENDING) {
      uint64_t now = sab_now();
      if (now >= deadline) {
        r = sab_wait_cancel(&w, SAB_TIMED_OUT); /* SAB_OK: handed over first */
        break;
      }
      uint64_t slice = sab_napi_slice_ns();
      r = sab_wait_park(&w, deadline - now > slice ? now + slice : deadline);
      if (r == SAB_PENDING && sab_napi_env_terminating(e)) {
        if (sab_wait_cancel(&w, SAB_CANCELLED) == SAB_OK) sab_sema_give_back(&s, e->id, w.token);
        sab_waiter_destroy(&w);
        return NULL;
      }
    }
    if (r == SAB_OK && token == SAB_SEMA_NO_TOKEN) token = w.token;
    sab_waiter_destroy(&w);
    if (r != SAB_OK || token != SAB_SEMA_NO_TOKEN) break;
    /* Woken without a slot (only a raw notify on the waiters' key can do
     * that): queue again, unless the thread is being torn down meanwhile. A
     * stream of such wakes must not keep it from seeing its termination,
     * which the loop above checks only after a quiet slice. */
    if (sab_napi_env_terminating(e)) return NULL;
  }
  if (r == SAB_E_CORRUPT) return corrupt(env);
  if (r != SAB_OK) return number(env, -1);
  if (sab_napi_env_terminating(e)) {
    /* Got one, but this thread will never run JS again. */
    sab_sema_give_back(&s, e->id, token);
    return NULL;
  }
  return number(env, token);
}

static void sema_unconsumed(sab_async_t *a) {
  /* Env teardown: the record's buffer reference still keeps the memory. */
  sema_async_t *r = (sema_async_t *)a;
  sab_sema_give_back(&r->sema, a->w.owner, a->w.token);
}

/*
 * semaAcquireAsync(i32, timeoutMs, flags) -> a token (a slot was free), or
 * the promise, or [promise, handle] when flags & 2 (for abort); flags & 1:
 * keep the loop alive. timeoutMs > 0 (JS tries first for 0). The promise
 * resolves with the token, -1 on timeout, or -2 when woken without one (a
 * stray notify on the Sema's word: acquire again).
 */
static napi_value sema_acquire_async(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 3, NULL);
  sab_env_t *e;
  double ms;
  uint32_t flags, token;
  napi_value buffer, result;
  if (get_env(env, &e) != 0) return NULL;
  SAB_CALL(env, napi_get_value_double(env, argv[1], &ms), NULL);
  SAB_CALL(env, napi_get_value_uint32(env, argv[2], &flags), NULL);
  sema_async_t *rec = calloc(1, sizeof *rec);
  if (rec == NULL) {
    throw_code(env, "ERR_SABSYNC_NOMEM", "sabsync: out of memory");
    return NULL;
  }
  if (get_sema(env, argv[0], &rec->sema, &buffer) != 0) {
    free(rec);
    return NULL;
  }
  sab_async_t *a = &rec->a;
  a->yields_token = 1;
  a->unconsumed = sema_unconsumed;
  if (sab_napi_async_prepare(env, e, a, buffer, flags, ms, "semaAcquireAsync", &result) != 0)
    return NULL;
  int r = sab_sema_acquire(&rec->sema, e->id, &a->w, &token);
  if (r != SAB_PENDING) {
    /* Not queued: the promise is never handed out. */
    sab_napi_async_discard(e, a);
    if (r == SAB_E_CORRUPT) return corrupt(env);
    return number(env, token);
  }
  sab_napi_async_track(e, a);
  return result;
}

/*
 * semaRelease(view or i32, slot) -> slot * 4 + info bits (SAB_SEMA_HANDED_SELF,
 * SAB_SEMA_POOLED), or -1: not a slot this thread holds. slot -1: the one
 * this thread got most recently.
 */
static napi_value sema_release(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  sab_env_t *e;
  sab_sema_t s;
  int64_t slot;
  uint32_t bits = 0;
  if (get_env(env, &e) != 0 || get_sema(env, argv[0], &s, NULL) != 0) return NULL;
  SAB_CALL(env, napi_get_value_int64(env, argv[1], &slot), NULL);
  int r = sab_sema_release(&s, e->id, slot < 0 ? -1 : slot, &bits);
  if (r == SAB_E_CORRUPT) return corrupt(env);
  return number(env, r < 0 ? -1 : (double)r * 4 + bits);
}

/* semaWaiting(view or i32) -> queued waiters of every thread */
static napi_value sema_waiting(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_sema_t s;
  if (get_sema(env, argv[0], &s, NULL) != 0) return NULL;
  return number(env, sab_sema_waiting(&s));
}

/* semaAvailable(view or i32) -> slots in the pool, after reclaiming dead holders' */
static napi_value sema_available(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_sema_t s;
  if (get_sema(env, argv[0], &s, NULL) != 0) return NULL;
  int r = sab_sema_available(&s);
  if (r < 0) return corrupt(env);
  return number(env, r);
}

/* ---- the rate limiter ---- */

static int get_rate(napi_env env, napi_value ta, sab_rate_t *r) {
  void *data;
  size_t bytes;
  if (get_memory(env, ta, &data, &bytes, NULL) != 0) return -1;
  if (sab_rate_open(r, data, bytes) != 0) {
    throw_code(env, "ERR_SABSYNC_BAD_MEMORY", "sabsync: this memory does not hold a RateLimit");
    return -1;
  }
  return 0;
}

/* rateBytes(rps) -> bytes, 0 when rps is out of range */
static napi_value rate_bytes(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  uint32_t rps;
  SAB_CALL(env, napi_get_value_uint32(env, argv[0], &rps), NULL);
  return number(env, (double)sab_rate_bytes(rps));
}

/* rateInit(i32, rps, timeUnitMs, uniform) */
static napi_value rate_init(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 4, NULL);
  void *data;
  size_t bytes;
  uint32_t rps;
  double unit_ms;
  bool uniform;
  sab_rate_t r;
  if (get_memory(env, argv[0], &data, &bytes, NULL) != 0) return NULL;
  SAB_CALL(env, napi_get_value_uint32(env, argv[1], &rps), NULL);
  SAB_CALL(env, napi_get_value_double(env, argv[2], &unit_ms), NULL);
  SAB_CALL(env, napi_get_value_bool(env, argv[3], &uniform), NULL);
  double unit_ns = ceil(unit_ms * 1e6);
  if (!(unit_ns >= 1 && unit_ns < 1e18) ||
      sab_rate_init(&r, data, bytes, rps, (uint64_t)unit_ns, uniform) != 0) {
    napi_throw_range_error(env, NULL, "rps or timeUnit does not fit");
    return NULL;
  }
  return NULL;
}

/* rateOpen(i32) -> [rps, timeUnitMs, uniform] */
static napi_value rate_open(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_rate_t r;
  napi_value result, v;
  if (get_rate(env, argv[0], &r) != 0) return NULL;
  SAB_CALL(env, napi_create_array_with_length(env, 3, &result), NULL);
  SAB_CALL(env, napi_create_double(env, r.rps, &v), NULL);
  SAB_CALL(env, napi_set_element(env, result, 0, v), NULL);
  SAB_CALL(env, napi_create_double(env, (double)sab_rate_unit_ns(&r) / 1e6, &v), NULL);
  SAB_CALL(env, napi_set_element(env, result, 1, v), NULL);
  SAB_CALL(env, napi_get_boolean(env, sab_rate_uniform(&r) != 0, &v), NULL);
  SAB_CALL(env, napi_set_element(env, result, 2, v), NULL);
  return result;
}

/* rateTake(i32) -> the grant's time in ms (> 0, the monotonic clock of
 * process.hrtime), or minus the ms to wait before trying again. */
static napi_value rate_take(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_rate_t r;
  uint64_t at = 0, wait = 0;
  if (get_rate(env, argv[0], &r) != 0) return NULL;
  int res = sab_rate_take(&r, &at, &wait);
  if (res == SAB_E_CORRUPT) {
    throw_code(env, "ERR_SABSYNC_BAD_MEMORY", "sabsync: the RateLimit's shared state is corrupt");
    return NULL;
  }
  if (res == SAB_OK) return number(env, (double)at / 1e6 > 0 ? (double)at / 1e6 : 1e-6);
  return number(env, -((double)wait / 1e6));
}

/* now() -> the monotonic clock in ms (sab_now(): process.hrtime's). */
static napi_value now_ms(napi_env env, napi_callback_info info) {
  (void)info;
  return number(env, (double)sab_now() / 1e6);
}

int sab_napi_sema_register(napi_env env, napi_value exports) {
  static const struct {
    const char *name;
    napi_callback cb;
  } fns[] = {
      {"semaBytes", sema_bytes},         {"semaInit", sema_init},
      {"semaView", sema_view},           {"semaTry", sema_try},
      {"semaAcquire", sema_acquire},     {"semaAcquireAsync", sema_acquire_async},
      {"semaRelease", sema_release},     {"semaWaiting", sema_waiting},
      {"semaAvailable", sema_available}, {"rateBytes", rate_bytes},
      {"rateInit", rate_init},           {"rateOpen", rate_open},
      {"rateTake", rate_take},           {"now", now_ms},
  };
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    napi_value fn;
    SAB_CALL(env, napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].cb, NULL, &fn),
             -1);
    SAB_CALL(env, napi_set_named_property(env, exports, fns[i].name, fn), -1);
  }
  return 0;
}
