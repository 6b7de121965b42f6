/*
 * The binding of RateLimiter (src/core/limiter.c): a view of a table's
 * checked shape and the caller's parameters, made once per JS limiter, and
 * consume, peek and lower (refund, reset) on it. The answer is a code; its
 * figures go into this thread's out slots (results.h), from which
 * lib/rate-limiter.js builds the answer object.
 */
#include "errors.h"
#include "register.h"
#include "results.h"
#include "values.h"

#include <stdio.h>
#include <stdlib.h>

/* A key up to this many UTF-16 code units is read into the stack; a
 * longer one into the heap (same table, same rules, any length). */
#define KEY_STACK 128

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

/* A BigInt64Array of at least `need` words: the table's slots (2 * keys),
 * then its claim locks (one per 16 slots). Looked up each call, never kept: a space's close()
 * detaches it (then its length is 0). */
static int64_t *words_of(napi_env env, napi_value v, size_t need, const char *what) {
  napi_typedarray_type t;
  size_t length;
  void *data;
  /* napi_get_typedarray_info answers napi_invalid_arg for any other value. */
  if (napi_get_typedarray_info(env, v, &t, &length, &data, NULL, NULL) != napi_ok ||
      t != napi_bigint64_array || length < need) {
    char msg[96];
    snprintf(msg, sizeof msg, "RateLimiter: a BigInt64Array of the table's %s expected", what);
    napi_throw_type_error(env, NULL, msg);
    return NULL;
  }
  return data;
}

/* A key's UTF-16 code units: in `stack` when they fit, else in a heap
 * buffer the caller frees (*heap). NULL with an exception pending. */
static const uint16_t *key_of(napi_env env, napi_value v, uint16_t *stack, uint16_t **heap,
                              size_t *len) {
  *heap = NULL;
  SAB_CALL(env, napi_get_value_string_utf16(env, v, (char16_t *)stack, KEY_STACK, len), NULL);
  if (*len < KEY_STACK - 1) return stack; /* not cut short */
  SAB_CALL(env, napi_get_value_string_utf16(env, v, NULL, 0, len), NULL);
  if (*len < KEY_STACK - 1) return stack;
  *heap = malloc((*len + 1) * sizeof(uint16_t));
  if (*heap == NULL) {
    sab_napi_throw(env, SAB_ERR_NOMEM, "sabsync: out of memory");
    return NULL;
  }
  size_t got;
  if (napi_get_value_string_utf16(env, v, (char16_t *)*heap, *len + 1, &got) != napi_ok ||
      got != *len) {
    free(*heap);
    *heap = NULL;
    sab_napi_throw_last(env, "RateLimiter key");
    return NULL;
  }
  return *heap;
}

static napi_value answer(napi_env env, int r, const sab_limiter_out_t *o) {
  if (r == SAB_E_CORRUPT) {
    sab_napi_throw(env, SAB_ERR_BAD_MEMORY,
                   "RateLimiter: the table's shared state is corrupt (a slot that kept changing, "
                   "or a claim lock no participant wrote)");
    return NULL;
  }
  double *out = sab_napi_out(env);
  if (out == NULL) return NULL;
  out[0] = (double)o->ahead;
  out[1] = (double)o->behind;
  return sab_napi_number(env, r);
}

/* limiterConsume(view, table, key, points) -> SAB_LIMITER_ALLOWED,
 * _DENIED, _FULL or _BUSY, with out[0] ahead and out[1] behind (ns);
 * throws ERR_SABSYNC_BAD_MEMORY when the key's slots are corrupt. key: a
 * string; points: 1 .. burst (checked by JS). */
static napi_value limiter_consume(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 4, NULL);
  const sab_limiter_t *l =
      sab_napi_unwrap(env, argv[0], &sab_napi_tag_limiter_view, "a RateLimiter view");
  if (l == NULL) return NULL;
  /* The slots and, after them, the claim locks: one array, one lookup. */
  int64_t *slots =
      words_of(env, argv[1], 2 * (size_t)l->keys + ((size_t)l->keys + 15) / 16, "slots");
  if (slots == NULL) return NULL;
  int64_t *locks = slots + 2 * (size_t)l->keys;
  uint32_t points;
  SAB_CALL(env, napi_get_value_uint32(env, argv[3], &points), NULL);
  if (points == 0 || (int64_t)points * l->T > l->tau) {
    napi_throw_range_error(env, NULL, "limiterConsume: points must be 1 .. burst");
    return NULL;
  }
  uint16_t stack[KEY_STACK], *heap;
  size_t len;
  const uint16_t *key = key_of(env, argv[2], stack, &heap, &len);
  if (key == NULL) return NULL;
  sab_limiter_out_t o;
  int r = sab_limiter_consume(l, slots, locks, key, len, points, &o);
  free(heap);
  return answer(env, r, &o);
}

/* limiterPeek(view, slots, key) -> _ALLOWED or _DENIED (one point), with
 * out[0] ahead and out[1] behind. */
static napi_value limiter_peek(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 3, NULL);
  const sab_limiter_t *l =
      sab_napi_unwrap(env, argv[0], &sab_napi_tag_limiter_view, "a RateLimiter view");
  if (l == NULL) return NULL;
  int64_t *slots = words_of(env, argv[1], 2 * (size_t)l->keys, "slots");
  if (slots == NULL) return NULL;
  uint16_t stack[KEY_STACK], *heap;
  size_t len;
  const uint16_t *key = key_of(env, argv[2], stack, &heap, &len);
  if (key == NULL) return NULL;
  sab_limiter_out_t o;
  int r = sab_limiter_peek(l, slots, key, len, &o);
  free(heap);
  return answer(env, r, &o);
}

/* limiterLower(view, slots, key, points) -> OK: points given back (0: all,
 * a reset). */
static napi_value limiter_lower(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 4, NULL);
  const sab_limiter_t *l =
      sab_napi_unwrap(env, argv[0], &sab_napi_tag_limiter_view, "a RateLimiter view");
  if (l == NULL) return NULL;
  int64_t *slots = words_of(env, argv[1], 2 * (size_t)l->keys, "slots");
  if (slots == NULL) return NULL;
  uint32_t points;
  SAB_CALL(env, napi_get_value_uint32(env, argv[3], &points), NULL);
  uint16_t stack[KEY_STACK], *heap;
  size_t len;
  const uint16_t *key = key_of(env, argv[2], stack, &heap, &len);
  if (key == NULL) return NULL;
  sab_limiter_out_t o = {0};
  int r = sab_limiter_lower(l, slots, key, len, points, &o);
  free(heap);
  return answer(env, r, &o);
}

/* limiterHash(key, k0, k1) -> OK, the hash's halves in out[0] (low) and
 * out[1] (high), as int32: where a key lands (tests). */
static napi_value limiter_hash(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 3, NULL);
  int32_t k0, k1;
  SAB_CALL(env, napi_get_value_int32(env, argv[1], &k0), NULL);
  SAB_CALL(env, napi_get_value_int32(env, argv[2], &k1), NULL);
  uint16_t stack[KEY_STACK], *heap;
  size_t len;
  const uint16_t *key = key_of(env, argv[0], stack, &heap, &len);
  if (key == NULL) return NULL;
  uint32_t f[2];
  sab_limiter_hash(key, len, (uint32_t)k0, (uint32_t)k1, f);
  free(heap);
  double *out = sab_napi_out(env);
  if (out == NULL) return NULL;
  out[0] = (double)(int32_t)f[0];
  out[1] = (double)(int32_t)f[1];
  return sab_napi_number(env, SAB_OK);
}

int sab_napi_limiter_register(napi_env env, napi_value exports) {
  static const sab_napi_fn_t fns[] = {
      {"limiterView", limiter_view}, {"limiterConsume", limiter_consume},
      {"limiterPeek", limiter_peek}, {"limiterLower", limiter_lower},
      {"limiterHash", limiter_hash},
  };
  return sab_napi_add_functions(env, exports, fns, sizeof fns / sizeof fns[0]);
}
