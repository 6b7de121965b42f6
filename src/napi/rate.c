/*
 * The binding of the rate limiter: JS values to core calls
 * (src/core/rate.c; a shared space's, src/core/space_sema.c, through the
 * same rateTake). Every call makes a checked view of the memory from
 * the Int32Array it is given (sab_rate_open), so no word of the shared
 * memory is trusted for an index; a broken state throws
 * ERR_SABSYNC_BAD_MEMORY.
 */
#include "register.h"
#include "results.h"
#include "space.h"
#include "values.h"

#include <math.h>

static int get_rate(napi_env env, napi_value ta, sab_rate_t *r) {
  void *data;
  size_t bytes;
  if (sab_napi_int32_memory(env, ta, "memory", &data, &bytes, NULL) != 0) return -1;
  if (sab_rate_open(r, data, bytes) != 0) {
    sab_napi_throw(env, SAB_ERR_BAD_MEMORY, "sabsync: this memory does not hold a RateLimit");
    return -1;
  }
  return 0;
}

/* rateBytes(rps) -> bytes, 0 when rps is out of range */
static napi_value rate_bytes(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  uint32_t rps;
  SAB_CALL(env, napi_get_value_uint32(env, argv[0], &rps), NULL);
  return sab_napi_number(env, (double)sab_rate_bytes(rps));
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
  if (sab_napi_int32_memory(env, argv[0], "memory", &data, &bytes, NULL) != 0) return NULL;
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

/* rateOpen(i32) -> OK with rps, timeUnitMs and uniform (0 or 1) in
 * out[0..2]. */
static napi_value rate_open(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_rate_t r;
  if (get_rate(env, argv[0], &r) != 0) return NULL;
  double *out = sab_napi_out(env);
  if (out == NULL) return NULL;
  out[0] = r.rps;
  out[1] = (double)sab_rate_unit_ns(&r) / 1e6;
  out[2] = sab_rate_uniform(&r) != 0;
  return sab_napi_number(env, SAB_OK);
}

/* now() -> the monotonic clock in ms (sab_now(): process.hrtime's). */
static napi_value now_ms(napi_env env, napi_callback_info info) {
  (void)info;
  return sab_napi_number(env, (double)sab_now() / 1e6);
}

/*
 * rateTake(i32[, turnFreeOnly, turnOff, space]) -> OK with the grant's time
 * in ms in out[0] (the monotonic clock of process.hrtime), or TIMED_OUT
 * with the ms to wait before trying again in out[0]. One function for both
 * memories: in this process's, the caller holds the turn (lib/rate-limit.js)
 * and the grant is taken under the lot's lock of the ring; in a shared
 * space's (`space` its handle, i32 over its buffer, the turn at the space
 * offset turnOff), under the turn's bucket lock, which orders the grants of
 * every process, and with turnFreeOnly only while the turn is free and
 * nobody waits for it: PENDING otherwise (the caller then takes the turn).
 */
static napi_value rate_take(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 4, NULL);
  sab_rate_t r;
  uint64_t at = 0, wait = 0;
  napi_valuetype t = napi_undefined;
  if (argc > 3) SAB_CALL(env, napi_typeof(env, argv[3], &t), NULL);
  if (t == napi_undefined) {
    if (get_rate(env, argv[0], &r) != 0) return NULL;
    int res = sab_rate_take(&r, &at, &wait);
    if (res == SAB_E_CORRUPT) {
      sab_napi_throw(env, SAB_ERR_BAD_MEMORY, "sabsync: the RateLimit's shared state is corrupt");
      return NULL;
    }
    return sab_napi_rate_result(env, res == SAB_OK, at, wait);
  }
#if defined(__linux__)
  void *data;
  size_t bytes;
  uint32_t turn_off;
  bool free_only;
  sab_napi_reg_t *reg = sab_napi_space_unwrap(env, argv[3]);
  if (reg == NULL || sab_napi_int32_memory(env, argv[0], "memory", &data, &bytes, NULL) != 0 ||
      sab_napi_get_u32(env, argv[2], &turn_off) != 0) {
    return NULL;
  }
  SAB_CALL(env, napi_get_value_bool(env, argv[1], &free_only), NULL);
  uint32_t rate_off;
  if (sab_napi_space_off(env, reg, data, &rate_off) != 0) return NULL;
  int res = sab_space_rate_take(reg->sp, turn_off, rate_off, free_only, &at, &wait);
  if (res == SAB_E_CORRUPT) {
    sab_napi_throw_core(env, SAB_E_CORRUPT, "RateLimit");
    return NULL;
  }
  /* Busy (a live holder keeps the turn's bucket): the caller takes the
   * turn, whose acquire answers by its timeout. */
  if (res == SAB_TIMED_OUT || res == SAB_E_SPACE_BUSY) return sab_napi_number(env, SAB_PENDING);
  return sab_napi_rate_result(env, res == SAB_OK, at, wait);
#else
  napi_throw_type_error(env, NULL, "space must be undefined: shared spaces need Linux");
  return NULL;
#endif
}

int sab_napi_rate_register(napi_env env, napi_value exports) {
  static const sab_napi_fn_t fns[] = {
      {"rateBytes", rate_bytes}, {"rateInit", rate_init}, {"rateOpen", rate_open},
      {"rateTake", rate_take},   {"now", now_ms},
  };
  return sab_napi_add_functions(env, exports, fns, sizeof fns / sizeof fns[0]);
}
