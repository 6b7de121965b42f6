/*
 * The binding: translates between JS values and core calls, nothing more.
 *
 * lib/ validates every argument with the exact conversions and errors of
 * the Atomics built-ins before it calls here; this file re-checks what it
 * must for memory safety (array type, index in range) and throws a plain
 * TypeError/RangeError if called directly with anything else.
 */
#include "check.h"
#include "env.h"
#include "sabsync.h"

#include <math.h>
#include <stdlib.h>

/* How long a blocking wait sleeps between checks for termination. */
#define SLICE_NS (50ull * 1000000ull)
/* The same, once the main thread is exiting. */
#define EXIT_SLICE_NS (5ull * 1000000ull)

/* Set when the main thread emits 'exit': parked workers check for their
 * termination more often from then on. */
static int exiting;

uint64_t sab_napi_slice_ns(void) {
  return __atomic_load_n(&exiting, __ATOMIC_RELAXED) ? EXIT_SLICE_NS : SLICE_NS;
}

/* A validated cell: its address and size. */
typedef struct {
  void *cell;
  int size;
} cell_t;

/* argv[0] must be an Int32Array or BigInt64Array and argv[1] an index in
 * range; answers 0 or throws. */
static int get_cell(napi_env env, napi_value ta, napi_value index, cell_t *out,
                    napi_value *buffer) {
  bool is_ta = false;
  napi_typedarray_type type;
  size_t length = 0, offset = 0;
  void *data = NULL;
  double i = -1;
  SAB_CALL(env, napi_is_typedarray(env, ta, &is_ta), -1);
  if (!is_ta) {
    napi_throw_type_error(env, NULL, "typedArray must be an Int32Array or BigInt64Array");
    return -1;
  }
  SAB_CALL(env, napi_get_typedarray_info(env, ta, &type, &length, &data, buffer, &offset), -1);
  if (type != napi_int32_array && type != napi_bigint64_array) {
    napi_throw_type_error(env, NULL, "typedArray must be an Int32Array or BigInt64Array");
    return -1;
  }
  SAB_CALL(env, napi_get_value_double(env, index, &i), -1);
  if (!(i >= 0 && i < (double)length) || i != floor(i) || data == NULL) {
    napi_throw_range_error(env, NULL, "index is out of range");
    return -1;
  }
  out->size = type == napi_int32_array ? 4 : 8;
  out->cell = (char *)data + (size_t)i * (size_t)out->size;
  return 0;
}

static int get_expected(napi_env env, napi_value v, int size, int64_t *out) {
  if (size == 8) {
    bool lossless;
    SAB_CALL(env, napi_get_value_bigint_int64(env, v, out, &lossless), -1);
  } else {
    int32_t x;
    SAB_CALL(env, napi_get_value_int32(env, v, &x), -1);
    *out = x;
  }
  return 0;
}

static napi_value number(napi_env env, double v) {
  napi_value r;
  SAB_CALL(env, napi_create_double(env, v, &r), NULL);
  return r;
}

/* Optional (watch, epoch) arguments: see sab_wait_enqueue_watch. */
static int get_watch(napi_env env, napi_value watch, napi_value epoch, uint32_t *w, uint32_t *ep) {
  napi_valuetype t;
  *w = *ep = 0;
  SAB_CALL(env, napi_typeof(env, watch, &t), -1);
  if (t == napi_undefined) return 0;
  SAB_CALL(env, napi_get_value_uint32(env, watch, w), -1);
  SAB_CALL(env, napi_get_value_uint32(env, epoch, ep), -1);
  return 0;
}

/* Result codes shared with lib/: 0 ok, 1 not-equal, 2 timed-out,
 * 3 owner-dead. */
static double code_of(int r) {
  switch (r) {
    case SAB_OK: return 0;
    case SAB_NOT_EQUAL: return 1;
    case SAB_OWNER_DEAD: return 3;
    default: return 2;
  }
}

/* wait(ta, index, value, timeoutMs[, watch, epoch]) -> result code */
static napi_value sab_napi_wait(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 6, NULL);
  sab_env_t *e = sab_napi_env_get(env);
  cell_t c;
  int64_t expected;
  double ms;
  uint32_t watch, epoch;
  if (e == NULL || get_cell(env, argv[0], argv[1], &c, NULL) != 0) return NULL;
  if (get_expected(env, argv[2], c.size, &expected) != 0) return NULL;
  SAB_CALL(env, napi_get_value_double(env, argv[3], &ms), NULL);
  if (get_watch(env, argv[4], argv[5], &watch, &epoch) != 0) return NULL;
  uint64_t deadline = sab_napi_deadline(ms);

  sab_waiter_t w;
  sab_waiter_init_blocking(&w);
  int r = sab_wait_enqueue_watch(&w, c.cell, c.size, expected, watch, epoch);
  while (r == SAB_PENDING) {
    uint64_t now = sab_now();
    if (now >= deadline) {
      r = sab_wait_cancel(&w, SAB_TIMED_OUT);
      break;
    }
    uint64_t slice = sab_napi_slice_ns();
    uint64_t until = deadline - now > slice ? now + slice : deadline;
    r = sab_wait_park(&w, until);
    if (r == SAB_PENDING && sab_napi_env_terminating(e)) {
      /* The thread is being torn down: leave the queue, and if a notify
       * counted us meanwhile, hand its wake to the next waiter. Return with
       * the termination exception pending. */
      if (sab_wait_cancel(&w, SAB_CANCELLED) == SAB_OK) sab_notify((uintptr_t)c.cell, 1);
      sab_waiter_destroy(&w);
      return NULL;
    }
  }
  sab_waiter_destroy(&w);
  if (r == SAB_OK && sab_napi_env_terminating(e)) {
    /* Woken, but this thread will never run JS again (terminate() arrived
     * while we slept): the wake would be lost with it, so hand it on. */
    sab_notify((uintptr_t)c.cell, 1);
    return NULL;
  }
  return number(env, code_of(r));
}

/*
 * waitAsync(ta, index, value, timeoutMs, flags[, watch, epoch]) -> 1
 * (not-equal) or 3 (owner-dead), or the promise, or [promise, handle] when
 * flags & 2. flags & 1: keep the loop alive. timeoutMs > 0 (JS answers 0
 * itself). The promise resolves 'ok' or 'timed-out'.
 */
static napi_value sab_napi_wait_async(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 7, NULL);
  sab_env_t *e = sab_napi_env_get(env);
  cell_t c;
  int64_t expected;
  double ms;
  uint32_t flags, watch, epoch;
  napi_value buffer, result;
  if (e == NULL || get_cell(env, argv[0], argv[1], &c, &buffer) != 0) return NULL;
  if (get_expected(env, argv[2], c.size, &expected) != 0) return NULL;
  SAB_CALL(env, napi_get_value_double(env, argv[3], &ms), NULL);
  SAB_CALL(env, napi_get_value_uint32(env, argv[4], &flags), NULL);
  if (get_watch(env, argv[5], argv[6], &watch, &epoch) != 0) return NULL;

  sab_async_t *a = calloc(1, sizeof *a);
  if (a == NULL) {
    napi_throw_error(env, "ERR_SABSYNC_NOMEM", "sabsync: out of memory");
    return NULL;
  }
  if (sab_napi_async_prepare(env, e, a, buffer, flags, ms, "waitAsync", &result) != 0) return NULL;
  int r = sab_wait_enqueue_watch(&a->w, c.cell, c.size, expected, watch, epoch);
  if (r != SAB_PENDING) {
    sab_napi_async_discard(e, a);
    return number(env, code_of(r));
  }
  sab_napi_async_track(e, a);
  return result;
}

/* cancel(handle, reason) -> true if the waiter left the queue (its promise
 * is then rejected with reason). */
static napi_value sab_napi_cancel(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  sab_env_t *e = sab_napi_env_get(env);
  napi_value r;
  if (e == NULL) {
    napi_throw_error(env, "ERR_SABSYNC_NAPI", "sabsync: no per-thread state");
    return NULL;
  }
  sab_async_t *a = sab_napi_unwrap(env, argv[0], &sab_napi_tag_async, "a waitAsync handle");
  if (a == NULL) return NULL;
  SAB_CALL(env, napi_get_boolean(env, sab_napi_async_cancel(e, a, argv[1]) != 0, &r), NULL);
  return r;
}

/* An address passed from JS: an integer below 2^53 (only a key). */
static int get_addr(napi_env env, napi_value v, uintptr_t *out) {
  double d;
  SAB_CALL(env, napi_get_value_double(env, v, &d), -1);
  if (!(d >= 0 && d < 9007199254740992.0) || d != floor(d)) {
    napi_throw_range_error(env, NULL, "address must be a non-negative integer");
    return -1;
  }
  *out = (uintptr_t)d;
  return 0;
}

/* notify(address, count) -> woken. count: a number >= 0, Infinity = all. */
static napi_value sab_napi_notify(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  uintptr_t addr;
  double count;
  if (get_addr(env, argv[0], &addr) != 0) return NULL;
  SAB_CALL(env, napi_get_value_double(env, argv[1], &count), NULL);
  uint64_t n = !(count < 1.8e19) ? UINT64_MAX : count > 0 ? (uint64_t)count : 0;
  return number(env, (double)sab_notify(addr, n));
}

static napi_value sab_napi_waiters(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  uintptr_t addr;
  if (get_addr(env, argv[0], &addr) != 0) return NULL;
  return number(env, sab_waiters(addr));
}

/* base(ta) -> the address of byte 0 of ta's buffer. */
static napi_value sab_napi_base(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  bool is_ta = false;
  napi_typedarray_type type;
  size_t length, offset;
  void *data;
  napi_value buffer;
  SAB_CALL(env, napi_is_typedarray(env, argv[0], &is_ta), NULL);
  if (!is_ta) {
    napi_throw_type_error(env, NULL, "typedArray must be a TypedArray");
    return NULL;
  }
  SAB_CALL(env, napi_get_typedarray_info(env, argv[0], &type, &length, &data, &buffer, &offset),
           NULL);
  return number(env, (double)((uintptr_t)data - offset));
}

/* shutdown(): the main thread is exiting; make parked threads look. */
static napi_value sab_napi_shutdown(napi_env env, napi_callback_info info) {
  (void)env;
  (void)info;
  __atomic_store_n(&exiting, 1, __ATOMIC_RELAXED);
  sab_nudge_all();
  return NULL;
}

/* envId() -> this thread's owner id (unique, never reused). */
static napi_value sab_napi_env_id(napi_env env, napi_callback_info info) {
  (void)info;
  sab_env_t *e = sab_napi_env_get(env);
  return e != NULL ? number(env, e->id) : NULL;
}

/* alive(id) -> whether that owner's thread still runs. */
static napi_value sab_napi_alive(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  uint32_t id;
  napi_value r;
  SAB_CALL(env, napi_get_value_uint32(env, argv[0], &id), NULL);
  SAB_CALL(env, napi_get_boolean(env, sab_owner_alive(id) != 0, &r), NULL);
  return r;
}

/* deathEpoch() -> the count of owner deaths so far (mod 2^32). */
static napi_value sab_napi_death_epoch(napi_env env, napi_callback_info info) {
  (void)info;
  return number(env, sab_death_epoch());
}

static int set_number(napi_env env, napi_value obj, const char *name, double v) {
  napi_value n;
  SAB_CALL(env, napi_create_double(env, v, &n), -1);
  SAB_CALL(env, napi_set_named_property(env, obj, name, n), -1);
  return 0;
}

/* The per-bucket waiter counters as an Int32Array over the core's table,
 * or null where external buffers are not allowed. */
static int set_counts(napi_env env, napi_value exports) {
  napi_value ab, ta, null;
  size_t bytes = SAB_BUCKETS * SAB_COUNT_STRIDE * sizeof(int32_t);
  if (napi_create_external_arraybuffer(env, sab_bucket_counts(), bytes, NULL, NULL, &ab) !=
      napi_ok) {
    const napi_extended_error_info *ignored;
    napi_get_last_error_info(env, &ignored); /* clears the error */
    SAB_CALL(env, napi_get_null(env, &null), -1);
    SAB_CALL(env, napi_set_named_property(env, exports, "counts", null), -1);
    return 0;
  }
  SAB_CALL(env, napi_create_typedarray(env, napi_int32_array, bytes / 4, ab, 0, &ta), -1);
  SAB_CALL(env, napi_set_named_property(env, exports, "counts", ta), -1);
  return 0;
}

int sab_napi_space_register(napi_env env, napi_value exports); /* space.c */

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  static const struct {
    const char *name;
    napi_callback cb;
  } fns[] = {
      {"wait", sab_napi_wait},         {"waitAsync", sab_napi_wait_async},
      {"cancel", sab_napi_cancel},     {"notify", sab_napi_notify},
      {"waiters", sab_napi_waiters},   {"base", sab_napi_base},
      {"shutdown", sab_napi_shutdown}, {"envId", sab_napi_env_id},
      {"alive", sab_napi_alive},       {"deathEpoch", sab_napi_death_epoch},
  };
  if (sab_napi_env_create(env) == NULL) return NULL;
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
    napi_value fn;
    SAB_CALL(env, napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].cb, NULL, &fn),
             NULL);
    SAB_CALL(env, napi_set_named_property(env, exports, fns[i].name, fn), NULL);
  }
  if (sab_napi_sema_register(env, exports) != 0) return NULL;
  if (sab_napi_space_register(env, exports) != 0) return NULL;
  if (set_number(env, exports, "bucketBits", SAB_BUCKET_BITS) != 0 ||
      set_number(env, exports, "countStride", SAB_COUNT_STRIDE) != 0 ||
      set_counts(env, exports) != 0) {
    return NULL;
  }
  return exports;
}
