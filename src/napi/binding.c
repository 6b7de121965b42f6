/*
 * The module: per-env state, the parts of the binding (wait.c, sema.c,
 * rate.c), the owner calls, and the constants JS shares with the core.
 *
 * Every constant that lib/ compares with an answer of the binding or that
 * it reads from shared memory is exported here from the core's own
 * definitions (`constants`), so JS never types one by hand. Every call
 * answers a result code of this one export (or a count, a size, a
 * handle); one that has more to say writes the rest into exports.out
 * (env.h sab_napi_out), whose slots each call's comment names.
 */
#include "async.h"
#include "lifecycle.h"
#include "park.h"
#include "register.h"
#include "results.h"
#include "values.h"
#include "sabsync_space.h"

/* shutdown(): the main thread is exiting; make parked threads look. */
static napi_value main_exiting(napi_env env, napi_callback_info info) {
  (void)env;
  (void)info;
  sab_napi_park_exiting();
  return NULL;
}

/* envId() -> this thread's owner id (unique, never reused). */
static napi_value env_id(napi_env env, napi_callback_info info) {
  (void)info;
  sab_env_t *e = sab_napi_env_get(env);
  return e != NULL ? sab_napi_number(env, e->id) : NULL;
}

/* alive(id) -> whether that owner's thread still runs. */
static napi_value owner_alive(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  uint32_t id;
  napi_value r;
  SAB_CALL(env, napi_get_value_uint32(env, argv[0], &id), NULL);
  SAB_CALL(env, napi_get_boolean(env, sab_owner_alive(id) != 0, &r), NULL);
  return r;
}

/* deathEpoch() -> the count of owner deaths so far (mod 2^32). */
static napi_value death_epoch(napi_env env, napi_callback_info info) {
  (void)info;
  return sab_napi_number(env, sab_death_epoch());
}

/* failures() -> napi calls that failed where no caller could be told
 * (teardown, loop callbacks), in this process so far. */
static napi_value napi_failures(napi_env env, napi_callback_info info) {
  (void)info;
  return sab_napi_number(env, __atomic_load_n(&sab_napi_failures, __ATOMIC_RELAXED));
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
    /* Only clears the error: the call itself cannot fail here. */
    SAB_CALL(env, napi_get_last_error_info(env, &ignored), -1);
    SAB_CALL(env, napi_get_null(env, &null), -1);
    SAB_CALL(env, napi_set_named_property(env, exports, "counts", null), -1);
    return 0;
  }
  SAB_CALL(env, napi_create_typedarray(env, napi_int32_array, bytes / 4, ab, 0, &ta), -1);
  SAB_CALL(env, napi_set_named_property(env, exports, "counts", ta), -1);
  return 0;
}

/* exports.constants, and exports.resultNames (by result code). */
static int set_constants(napi_env env, napi_value exports) {
  static const struct {
    const char *name;
    double value;
  } k[] = {
      {"OK", SAB_OK},
      {"NOT_EQUAL", SAB_NOT_EQUAL},
      {"TIMED_OUT", SAB_TIMED_OUT},
      {"OWNER_DEAD", SAB_OWNER_DEAD},
      {"CANCELLED", SAB_CANCELLED},
      {"PENDING", SAB_PENDING},
      {"BAD_TOKEN", SAB_E_BAD_TOKEN},
      {"WATCH_ANY", SAB_WATCH_ANY},
      {"ASYNC_REF", SAB_ASYNC_REF},
      {"ASYNC_HANDLE", SAB_ASYNC_HANDLE},
      {"BUCKET_BITS", SAB_BUCKET_BITS},
      {"COUNT_STRIDE", SAB_COUNT_STRIDE},
      {"SEMA_MAGIC", SAB_SEMA_MAGIC},
      {"SEMA_MAX", SAB_SEMA_MAX},
      {"SEMA_FAIR_NS", SAB_SEMA_FAIR_NS},
      {"SEMA_W_AVAIL", SAB_SEMA_W_AVAIL},
      {"SEMA_W_NR", SAB_SEMA_W_NR},
      {"SEMA_W_NEXT", SAB_SEMA_W_NEXT},
      {"SEMA_KEY_OFFSET", SAB_SEMA_KEY_OFFSET},
      {"SEMA_HELD_RECOVERED", SAB_SEMA_HELD_RECOVERED},
      {"SEMA_HEADER_BYTES", SAB_SEMA_HEADER_BYTES},
      {"SEMA_RECOVERED", SAB_SEMA_RECOVERED},
      {"SEMA_HANDED_SELF", SAB_SEMA_HANDED_SELF},
      {"SEMA_POOLED", SAB_SEMA_POOLED},
      {"SEMA_TIMED_OUT", SAB_NAPI_SEMA_TIMED_OUT},
      {"SEMA_NO_TOKEN", SAB_NAPI_SEMA_NO_TOKEN},
      {"RATE_MAGIC", SAB_RATE_MAGIC},
      {"RATE_MAX", SAB_RATE_MAX},
      {"RATE_W_RPS", SAB_RATE_W_RPS},
      {"LIMITER_ALLOWED", SAB_LIMITER_ALLOWED},
      {"LIMITER_DENIED", SAB_LIMITER_DENIED},
      {"LIMITER_FULL", SAB_LIMITER_FULL},
      {"LIMITER_BUSY", SAB_LIMITER_BUSY},
      {"RATE_HEADER_BYTES", SAB_RATE_HEADER_BYTES},
      {"SPACE_SEMA", SAB_SPACE_SEMA},
      {"SPACE_ATTACH", SAB_SPACE_ATTACH},
      {"SPACE_CREATE", SAB_SPACE_CREATE},
      {"SPACE_KEY_MAX", SAB_SPACE_KEY_MAX},
      {"SPACE_RETIRE_VERSIONS", SAB_RETIRE_VERSIONS},
      {"SPACE_RETIRE_SELF", SAB_RETIRE_SELF},
      {"SPACE_NAME_MAX", SAB_SPACE_NAME_MAX},
      {"SPACE_MIN_SIZE", SAB_SPACE_MIN_SIZE},
      {"SPACE_MAX_SIZE", SAB_SPACE_MAX_SIZE},
      {"SPACE_DEFAULT_SIZE", SAB_SPACE_DEFAULT_SIZE},
  };
  napi_value obj, names, name;
  SAB_CALL(env, napi_create_object(env, &obj), -1);
  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    if (set_number(env, obj, k[i].name, k[i].value) != 0) return -1;
  }
  SAB_CALL(env, napi_object_freeze(env, obj), -1);
  SAB_CALL(env, napi_set_named_property(env, exports, "constants", obj), -1);
  SAB_CALL(env, napi_create_array(env, &names), -1);
  for (int r = SAB_OK; r <= SAB_TIMED_OUT; r++) {
    SAB_CALL(env, napi_create_string_utf8(env, sab_napi_result_name(r), NAPI_AUTO_LENGTH, &name),
             -1);
    SAB_CALL(env, napi_set_element(env, names, (uint32_t)r, name), -1);
  }
  SAB_CALL(env, napi_object_freeze(env, names), -1);
  SAB_CALL(env, napi_set_named_property(env, exports, "resultNames", names), -1);
  return 0;
}

NAPI_MODULE_INIT(/* napi_env env, napi_value exports */) {
  static const sab_napi_fn_t fns[] = {
      {"shutdown", main_exiting},  {"envId", env_id},           {"alive", owner_alive},
      {"deathEpoch", death_epoch}, {"failures", napi_failures},
  };
  sab_env_t *e = sab_napi_env_create(env);
  if (e == NULL || sab_napi_out_create(env, e, exports) != 0) return NULL;
  if (sab_napi_add_functions(env, exports, fns, sizeof fns / sizeof fns[0]) != 0 ||
      sab_napi_wait_register(env, exports) != 0 || sab_napi_sema_register(env, exports) != 0 ||
      sab_napi_rate_register(env, exports) != 0 || sab_napi_limiter_register(env, exports) != 0 ||
      sab_napi_space_register(env, exports) != 0 || sab_napi_locks_register(env, exports) != 0 ||
      sab_napi_inside_register(env, exports) != 0 ||
      sab_napi_lockwaits_register(env, exports) != 0 || set_counts(env, exports) != 0 ||
      set_constants(env, exports) != 0 || sab_napi_set_error_codes(env, exports) != 0) {
    return NULL;
  }
  return exports;
}
