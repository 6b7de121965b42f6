/*
 * The binding of RateLimiter's common path (src/core/limiter.c): a view of
 * a table's checked parameters, made once per JS limiter, and consume on
 * it. The answer is a code; its figures go into this thread's out slots
 * (results.h), from which lib/rate-limiter.js builds the answer object.
 */
#include "errors.h"
#include "register.h"
#include "results.h"
#include "values.h"

#include <stdio.h>
#include <stdlib.h>

/* Keys up to this many UTF-16 code units are hashed here; a longer key is
 * answered SAB_LIMITER_LONG and consumed in JS (same table, same rules). */
#define KEY_MAX          128
#define SAB_LIMITER_LONG 3

static void view_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  free(data);
}

static int get_bigint(napi_env env, napi_value v, const char *name, int64_t *out) {
  bool lossless;
  if (napi_get_value_bigint_int64(env, v, out, &lossless) != napi_ok || !lossless) {
    char msg[96];
    snprintf(msg, sizeof msg, "limiterView: %s must be a BigInt that fits 64 bits", name);
    napi_throw_type_error(env, NULL, msg);
    return -1;
  }
  return 0;
}

/* limiterView(keys, probe, k0, k1, T, tau) -> the view (T and tau BigInts) */
static napi_value limiter_view(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 6, NULL);
  sab_limiter_t l;
  int32_t k0, k1;
  napi_value view;
  SAB_CALL(env, napi_get_value_uint32(env, argv[0], &l.keys), NULL);
  SAB_CALL(env, napi_get_value_uint32(env, argv[1], &l.probe), NULL);
  SAB_CALL(env, napi_get_value_int32(env, argv[2], &k0), NULL);
  SAB_CALL(env, napi_get_value_int32(env, argv[3], &k1), NULL);
  if (get_bigint(env, argv[4], "T", &l.T) != 0 || get_bigint(env, argv[5], "tau", &l.tau) != 0)
    return NULL;
  if (l.keys == 0 || l.probe == 0 || l.probe > l.keys || l.T < 1 || l.tau < l.T ||
      l.tau >= ((int64_t)1 << 60)) {
    napi_throw_range_error(env, NULL, "limiterView: keys, probe, T or tau out of range");
    return NULL;
  }
  l.k0 = (uint32_t)k0;
  l.k1 = (uint32_t)k1;
  sab_limiter_t *v = malloc(sizeof *v);
  if (v == NULL) {
    sab_napi_throw(env, SAB_ERR_NOMEM, "sabsync: out of memory");
    return NULL;
  }
  *v = l;
  if (napi_create_external(env, v, view_finalize, NULL, &view) != napi_ok) {
    sab_napi_throw_last(env, "limiterView");
    free(v);
    return NULL;
  }
  /* On failure from here the external's finalizer frees v. */
  if (sab_napi_tag(env, view, &sab_napi_tag_limiter_view) != 0) return NULL;
  return view;
}

/* The table's slots: a BigInt64Array of at least 2 * keys. Looked up each
 * call, never kept: a space's close() detaches it (then its length is 0). */
static int64_t *slots_of(napi_env env, napi_value v, uint32_t keys) {
  napi_typedarray_type t;
  size_t length;
  void *data;
  /* napi_get_typedarray_info answers napi_invalid_arg for any other value. */
  if (napi_get_typedarray_info(env, v, &t, &length, &data, NULL, NULL) != napi_ok ||
      t != napi_bigint64_array || length < 2 * (size_t)keys) {
    napi_throw_type_error(env, NULL,
                          "limiterConsume: a BigInt64Array of the table's slots expected");
    return NULL;
  }
  return data;
}

/* limiterConsume(view, w64, key, points) -> SAB_LIMITER_ALLOWED, _DENIED,
 * _ABSENT or SAB_LIMITER_LONG, with out[0] ahead and out[1] behind (ns);
 * throws ERR_SABSYNC_BAD_MEMORY when the key's slots are corrupt. key: a
 * string; points: 1 .. burst (checked by JS). */
static napi_value limiter_consume(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 4, NULL);
  const sab_limiter_t *l =
      sab_napi_unwrap(env, argv[0], &sab_napi_tag_limiter_view, "a RateLimiter view");
  if (l == NULL) return NULL;
  int64_t *slots = slots_of(env, argv[1], l->keys);
  if (slots == NULL) return NULL;
  uint32_t points;
  SAB_CALL(env, napi_get_value_uint32(env, argv[3], &points), NULL);
  if (points == 0 || (int64_t)points * l->T > l->tau) {
    napi_throw_range_error(env, NULL, "limiterConsume: points must be 1 .. burst");
    return NULL;
  }
  uint16_t key[KEY_MAX + 1];
  size_t len;
  SAB_CALL(env, napi_get_value_string_utf16(env, argv[2], (char16_t *)key, KEY_MAX + 1, &len),
           NULL);
  if (len > KEY_MAX - 1) return sab_napi_number(env, SAB_LIMITER_LONG); /* maybe cut short */
  sab_limiter_out_t o;
  int r = sab_limiter_consume(l, slots, key, len, points, &o);
  if (r == SAB_E_CORRUPT) {
    sab_napi_throw(env, SAB_ERR_BAD_MEMORY,
                   "RateLimiter: the table's shared state is corrupt (a time beyond the bucket, "
                   "or a slot that kept changing)");
    return NULL;
  }
  double *out = sab_napi_out(env);
  if (out == NULL) return NULL;
  out[0] = (double)o.ahead;
  out[1] = (double)o.behind;
  return sab_napi_number(env, r);
}

/* limiterHash(key, k0, k1) -> OK, the hash's halves in out[0] (low) and
 * out[1] (high), as int32 (tests compare it with JS's) */
static napi_value limiter_hash(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 3, NULL);
  int32_t k0, k1;
  size_t len;
  uint16_t key[KEY_MAX + 1];
  SAB_CALL(env, napi_get_value_string_utf16(env, argv[0], (char16_t *)key, KEY_MAX + 1, &len),
           NULL);
  if (len > KEY_MAX - 1) {
    napi_throw_range_error(env, NULL, "limiterHash: keys up to 127 code units");
    return NULL;
  }
  SAB_CALL(env, napi_get_value_int32(env, argv[1], &k0), NULL);
  SAB_CALL(env, napi_get_value_int32(env, argv[2], &k1), NULL);
  uint32_t f[2];
  sab_limiter_hash(key, len, (uint32_t)k0, (uint32_t)k1, f);
  double *out = sab_napi_out(env);
  if (out == NULL) return NULL;
  out[0] = (double)(int32_t)f[0];
  out[1] = (double)(int32_t)f[1];
  return sab_napi_number(env, SAB_OK);
}

int sab_napi_limiter_register(napi_env env, napi_value exports) {
  static const sab_napi_fn_t fns[] = {
      {"limiterView", limiter_view},
      {"limiterConsume", limiter_consume},
      {"limiterHash", limiter_hash},
  };
  return sab_napi_add_functions(env, exports, fns, sizeof fns / sizeof fns[0]);
}
