/*
 * Results of more than one value (results.h).
 */
#include "results.h"
#include "values.h"

#include <stdlib.h>

static void out_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  free(data);
}

int sab_napi_out_create(napi_env env, sab_env_t *e, napi_value exports) {
  napi_value ab, ta;
  size_t bytes = SAB_NAPI_OUT * sizeof(double);
  double *mem = calloc(SAB_NAPI_OUT, sizeof(double));
  if (mem == NULL) {
    sab_napi_throw(env, SAB_ERR_NOMEM, "sabsync: out of memory");
    return -1;
  }
  if (napi_create_external_arraybuffer(env, mem, bytes, out_finalize, NULL, &ab) != napi_ok) {
    /* No external buffers here (a sandboxed runtime): a plain one, which
     * could be detached, so sab_napi_out looks before each write. */
    const napi_extended_error_info *ignored;
    free(mem);
    SAB_CALL(env, napi_get_last_error_info(env, &ignored), -1);
    SAB_CALL(env, napi_create_arraybuffer(env, bytes, (void **)&mem, &ab), -1);
    e->out_detachable = 1;
  }
  SAB_CALL(env, napi_create_reference(env, ab, 1, &e->out_ref), -1);
  e->out = mem;
  SAB_CALL(env, napi_create_typedarray(env, napi_float64_array, SAB_NAPI_OUT, ab, 0, &ta), -1);
  SAB_CALL(env, napi_set_named_property(env, exports, "out", ta), -1);
  return 0;
}

double *sab_napi_out(napi_env env) {
  sab_env_t *e = sab_napi_env_get(env);
  if (e == NULL) return NULL;
  if (e->out == NULL) {
    sab_napi_throw(env, SAB_ERR_NAPI, "sabsync: no result array");
    return NULL;
  }
  if (e->out_detachable) {
    napi_value ab;
    bool detached = true;
    SAB_CALL(env, napi_get_reference_value(env, e->out_ref, &ab), NULL);
    if (ab == NULL || napi_is_detached_arraybuffer(env, ab, &detached) != napi_ok || detached) {
      sab_napi_throw(env, SAB_ERR_NAPI, "sabsync: the result array was detached");
      return NULL;
    }
  }
  return e->out;
}

napi_value sab_napi_result1(napi_env env, int code, double value) {
  double *out = sab_napi_out(env);
  if (out == NULL) return NULL;
  out[0] = value;
  return sab_napi_number(env, code);
}

napi_value sab_napi_rate_result(napi_env env, int granted, uint64_t at, uint64_t wait) {
  /* A grant's time is > 0 (the public calls resolve with it). */
  double ms = (double)at / 1e6;
  return granted ? sab_napi_result1(env, SAB_OK, ms > 0 ? ms : 1e-6)
                 : sab_napi_result1(env, SAB_TIMED_OUT, (double)wait / 1e6);
}

napi_value sab_napi_token_result(napi_env env, int got, uint32_t token) {
  return got ? sab_napi_result1(env, SAB_OK, token) : sab_napi_number(env, SAB_TIMED_OUT);
}

napi_value sab_napi_release_result(napi_env env, int r, uint32_t bits) {
  if (r < 0) return sab_napi_number(env, SAB_E_BAD_TOKEN);
  double *out = sab_napi_out(env);
  if (out == NULL) return NULL;
  out[0] = bits;
  out[1] = r;
  return sab_napi_number(env, SAB_OK);
}
