/*
 * Value helpers shared by the binding's files (values.h).
 */
#include "values.h"

#include <math.h>
#include <stdio.h>

void sab_napi_throw_last(napi_env env, const char *call) {
  bool pending = false;
  if (napi_is_exception_pending(env, &pending) == napi_ok && pending) return;
  const napi_extended_error_info *info = NULL;
  const char *msg = NULL;
  if (napi_get_last_error_info(env, &info) == napi_ok && info != NULL) msg = info->error_message;
  char buf[256];
  snprintf(buf, sizeof buf, "sabsync: %s failed: %s", call, msg != NULL ? msg : "unknown error");
  sab_napi_throw(env, SAB_ERR_NAPI, buf);
}

uint32_t sab_napi_failures;

void sab_napi_note_failure(napi_status status) {
  if (status != napi_ok) __atomic_fetch_add(&sab_napi_failures, 1, __ATOMIC_RELAXED);
}

napi_value sab_napi_number(napi_env env, double v) {
  napi_value r;
  SAB_CALL(env, napi_create_double(env, v, &r), NULL);
  return r;
}

int sab_napi_get_u32(napi_env env, napi_value v, uint32_t *out) {
  SAB_CALL(env, napi_get_value_uint32(env, v, out), -1);
  return 0;
}

int sab_napi_get_double(napi_env env, napi_value v, double *out) {
  SAB_CALL(env, napi_get_value_double(env, v, out), -1);
  return 0;
}

int sab_napi_int32_memory(napi_env env, napi_value ta, const char *name, void **data, size_t *bytes,
                          napi_value *buffer) {
  bool is_ta = false;
  napi_typedarray_type type = napi_int8_array;
  size_t length = 0, offset = 0;
  napi_value ab;
  *data = NULL;
  SAB_CALL(env, napi_is_typedarray(env, ta, &is_ta), -1);
  if (is_ta)
    SAB_CALL(env, napi_get_typedarray_info(env, ta, &type, &length, data, &ab, &offset), -1);
  if (!is_ta || type != napi_int32_array || *data == NULL) {
    char msg[96];
    snprintf(msg, sizeof msg, "%s must be an Int32Array", name);
    napi_throw_type_error(env, NULL, msg);
    return -1;
  }
  *bytes = length * 4;
  if (buffer != NULL) *buffer = ab;
  return 0;
}

uint64_t sab_napi_deadline(double ms) {
  if (!(ms < 1e13)) return UINT64_MAX; /* ~317 years: forever */
  if (ms <= 0) return sab_now();
  return sab_now() + (uint64_t)ceil(ms * 1e6);
}

/* Random 128-bit values, fixed: a tag must mean the same in every copy and
 * version of the addon that could meet the external. */
const napi_type_tag sab_napi_tag_sema_view = {0x47c2e9b1f05a3d86ull, 0x1e6b8f4ac27d905bull};
const napi_type_tag sab_napi_tag_limiter_view = {0x9d3a51c07e26f4b8ull, 0x63f0b2d94a1c85e7ull};

int sab_napi_tag(napi_env env, napi_value external, const napi_type_tag *tag) {
  SAB_CALL(env, napi_type_tag_object(env, external, tag), -1);
  return 0;
}

void *sab_napi_unwrap(napi_env env, napi_value v, const napi_type_tag *tag, const char *what) {
  napi_valuetype t;
  bool tagged = false;
  void *data = NULL;
  SAB_CALL(env, napi_typeof(env, v, &t), NULL);
  if (t == napi_external) SAB_CALL(env, napi_check_object_type_tag(env, v, tag, &tagged), NULL);
  if (!tagged) {
    char msg[128];
    snprintf(msg, sizeof msg, "handle must be %s", what);
    napi_throw_type_error(env, NULL, msg);
    return NULL;
  }
  SAB_CALL(env, napi_get_value_external(env, v, &data), NULL);
  return data;
}

const char *sab_napi_result_name(int result) {
  switch (result) {
    case SAB_OK: return "ok";
    case SAB_NOT_EQUAL: return "not-equal";
    case SAB_TIMED_OUT: return "timed-out";
    default: return NULL;
  }
}

int sab_napi_add_functions(napi_env env, napi_value exports, const sab_napi_fn_t *fns, size_t n) {
  for (size_t i = 0; i < n; i++) {
    napi_value fn;
    SAB_CALL(env, napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].cb, NULL, &fn),
             -1);
    SAB_CALL(env, napi_set_named_property(env, exports, fns[i].name, fn), -1);
  }
  return 0;
}

int sab_napi_cell_value(napi_env env, napi_value v, int size, int64_t *out) {
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
