/*
 * The binding of the Atomics-style calls: wait, waitAsync, cancel, notify,
 * waiters, base. Translates between JS values and core calls, nothing more.
 * A wait is one function for both memories: a cell of this process's
 * memory, or of a shared space's (given its handle), whose records are the
 * space's (space.h); only the leaves that touch a record differ.
 *
 * lib/atomics.js validates every argument with the exact conversions and
 * errors of the Atomics built-ins before it calls here; this file re-checks
 * what it must for memory safety (array type, index in range) and throws a
 * plain TypeError/RangeError if called directly with anything else.
 */
#include "async.h"
#include "park.h"
#include "register.h"
#include "space.h"
#include "values.h"

#include <math.h>

/* A validated cell of either memory: this process's (reg NULL), or a
 * shared space's (its registration, and the cell's offset in the space). */
typedef struct {
  void *cell;
  int size;
  napi_value buffer;
#if defined(__linux__)
  sab_napi_reg_t *reg;
  uint32_t off;
#endif
} cell_t;

#if !defined(__linux__)
static int not_a_space(napi_env env) {
  napi_throw_type_error(env, NULL, "space must be undefined: shared spaces need Linux");
  return -1;
}
#endif

/* The space named by argument `at` of a call that takes one last, or
 * NULL (this process's memory) when it was not passed or is undefined; -1
 * with an exception pending. */
static int space_arg(napi_env env, size_t argc, size_t at, napi_value v, void **reg) {
  napi_valuetype t = napi_undefined;
  *reg = NULL;
  if (argc > at) SAB_CALL(env, napi_typeof(env, v, &t), -1);
  if (t == napi_undefined) return 0;
#if defined(__linux__)
  return (*reg = sab_napi_space_unwrap(env, v)) != NULL ? 0 : -1;
#else
  return not_a_space(env);
#endif
}

/* `ta` must be an Int32Array or BigInt64Array and `index` an index in
 * range; with a space (argument `at`, space_arg), over that space's
 * buffer. Answers 0 or throws. */
static int get_cell(napi_env env, napi_value ta, napi_value index, size_t argc, size_t at,
                    napi_value space, cell_t *out) {
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
  SAB_CALL(env, napi_get_typedarray_info(env, ta, &type, &length, &data, &out->buffer, &offset),
           -1);
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
  void *reg;
  if (space_arg(env, argc, at, space, &reg) != 0) return -1;
#if defined(__linux__)
  if ((out->reg = reg) != NULL) return sab_napi_space_off(env, out->reg, out->cell, &out->off);
#endif
  return 0;
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

#if defined(__linux__)
/* A space's enqueue failed in a way its caller must hear of: thrown. */
static int space_enqueue_failed(napi_env env, int r, const char *what) {
  if (r != SAB_E_SPACE_FULL && r != SAB_E_INVAL && r != SAB_E_CORRUPT && r != SAB_E_SPACE_BUSY)
    return 0;
  sab_napi_throw_core(env, r == SAB_E_INVAL ? SAB_E_CORRUPT : r, what);
  return 1;
}
#endif

/* Wait on a cell of either memory until notified or `deadline`: SAB_OK,
 * SAB_NOT_EQUAL, SAB_TIMED_OUT, SAB_OWNER_DEAD; SAB_NAPI_TERMINATED (the
 * thread is torn down) or -1 with an exception pending. */
static int wait_cell(napi_env env, sab_env_t *e, const cell_t *c, int64_t expected, uint32_t watch,
                     uint32_t epoch, uint64_t deadline) {
  int r, woken = 0;
#if defined(__linux__)
  if (c->reg != NULL) {
    sab_napi_reg_t *reg = c->reg;
    uint32_t rec;
    int again;
    sab_napi_space_lock_deadline(deadline);
    while ((r = sab_space_enqueue(reg->sp, reg->id, c->off, c->size, expected, watch, epoch, 0,
                                  &rec)) == SAB_E_SPACE_BUSY) {
      if ((again = sab_napi_space_busy_again(e, deadline)) < 0) return -1;
      if (again == 0) return SAB_TIMED_OUT;
    }
    if (space_enqueue_failed(env, r, "wait")) return -1;
    if (r != SAB_PENDING) return r;
    sab_napi_space_parker_t p;
    sab_napi_space_parker_init(&p, reg, rec, c->off, watch, epoch, NULL);
    r = sab_napi_park_on(e, &p.base, deadline, &woken);
    /* Torn down: a wake that counted this thread goes on. */
    if (r == SAB_NAPI_TERMINATED && woken) sab_space_notify(reg->sp, c->off, 1);
    return r;
  }
#endif
  (void)env;
  sab_waiter_t w;
  sab_waiter_init_blocking(&w);
  r = sab_wait_enqueue_watch(&w, c->cell, c->size, expected, watch, epoch);
  if (r == SAB_PENDING) r = sab_napi_park(e, &w, deadline, &woken);
  sab_waiter_destroy(&w);
  /* Torn down: a wake that counted this thread goes on. */
  if (r == SAB_NAPI_TERMINATED && woken) sab_notify((uintptr_t)c->cell, 1);
  return r;
}

/* wait(ta, index, value, timeoutMs[, watch, epoch[, space]]) -> SAB_OK,
 * SAB_NOT_EQUAL, SAB_TIMED_OUT or SAB_OWNER_DEAD (constants). `space`: the
 * handle of the shared space ta is over (lib/space.js). */
static napi_value wait_sync(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 7, NULL);
  sab_env_t *e = sab_napi_env_get(env);
  cell_t c;
  int64_t expected;
  double ms;
  uint32_t watch, epoch;
  if (e == NULL || get_cell(env, argv[0], argv[1], argc, 6, argv[6], &c) != 0) return NULL;
  if (sab_napi_cell_value(env, argv[2], c.size, &expected) != 0) return NULL;
  SAB_CALL(env, napi_get_value_double(env, argv[3], &ms), NULL);
  if (get_watch(env, argv[4], argv[5], &watch, &epoch) != 0) return NULL;
  uint64_t deadline = sab_napi_deadline(ms);
#if defined(__linux__)
  uint64_t old = c.reg != NULL ? sab_space_deadline(UINT64_MAX) : 0;
  int r = wait_cell(env, e, &c, expected, watch, epoch, deadline);
  if (c.reg != NULL) sab_space_deadline(old);
#else
  int r = wait_cell(env, e, &c, expected, watch, epoch, deadline);
#endif
  if (r < 0) return NULL; /* torn down, or thrown */
  return sab_napi_number(env, r);
}

#if defined(__linux__)
/* A space's async wait: its hooks are the memory's (space.c). */
static const sab_async_hooks_t space_wait_hooks = {
    sab_napi_space_async_cancel,  sab_napi_space_async_arrived, NULL, NULL,
    sab_napi_space_async_hand_on, sab_napi_space_async_done,    NULL};
#endif

/* Queue an async record `a` (new, untracked) on a cell of either memory:
 * SAB_PENDING (queued), or the result, or -1 with an exception pending. */
static int wait_async_queue(napi_env env, sab_async_t *a, const cell_t *c, int64_t expected,
                            uint32_t watch, uint32_t epoch, uint64_t deadline) {
#if defined(__linux__)
  if (c->reg != NULL) {
    uint32_t rec = 0;
    uint64_t old = sab_space_deadline(UINT64_MAX);
    sab_napi_space_lock_deadline(deadline);
    if (sab_napi_space_async_begin(env, c->reg, a, c->off, watch, epoch, 0) != 0) return -1;
    int r = sab_space_enqueue(c->reg->sp, c->reg->id, c->off, c->size, expected, watch, epoch,
                              SAB_SPACE_ASYNC, &rec);
    sab_napi_space_async_end(a, r, rec);
    sab_space_deadline(old);
    /* A live holder kept the bucket's lock past the timeout. */
    if (r == SAB_E_SPACE_BUSY && sab_now() >= deadline) return SAB_TIMED_OUT;
    return space_enqueue_failed(env, r, "waitAsync") ? -1 : r;
  }
#endif
  (void)env;
  (void)deadline;
  return sab_wait_enqueue_watch(&a->w, c->cell, c->size, expected, watch, epoch);
}

/*
 * waitAsync(ta, index, value, timeoutMs, flags[, watch, epoch[, space]]) ->
 * SAB_NOT_EQUAL, SAB_OWNER_DEAD or SAB_TIMED_OUT, or the promise, or
 * [promise, handle] with SAB_ASYNC_HANDLE; SAB_ASYNC_REF: keep the loop
 * alive. timeoutMs > 0 (JS answers 0 itself). The promise resolves "ok" or
 * "timed-out" (a space's rejects with ERR_SABSYNC_SHARED_CLOSED when the
 * space is closed meanwhile).
 */
static napi_value wait_async(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 8, NULL);
  sab_env_t *e = sab_napi_env_get(env);
  cell_t c;
  int64_t expected;
  double ms;
  uint32_t flags, watch, epoch;
  napi_value result;
  if (e == NULL || get_cell(env, argv[0], argv[1], argc, 7, argv[7], &c) != 0) return NULL;
  if (sab_napi_cell_value(env, argv[2], c.size, &expected) != 0) return NULL;
  SAB_CALL(env, napi_get_value_double(env, argv[3], &ms), NULL);
  SAB_CALL(env, napi_get_value_uint32(env, argv[4], &flags), NULL);
  if (get_watch(env, argv[5], argv[6], &watch, &epoch) != 0) return NULL;

  const sab_async_hooks_t *hooks = NULL;
#if defined(__linux__)
  if (c.reg != NULL) hooks = &space_wait_hooks;
#endif
  sab_async_t *a = sab_napi_async_new(env, e, hooks, c.buffer, (uintptr_t)c.cell, flags, ms,
                                      "waitAsync", &result);
  if (a == NULL) return NULL;
  int r = wait_async_queue(env, a, &c, expected, watch, epoch, sab_napi_deadline(ms));
  if (r != SAB_PENDING) {
    sab_napi_async_discard(e, a);
    return r < 0 ? NULL : sab_napi_number(env, r);
  }
  sab_napi_async_track(e, a);
  return result;
}

/* cancel(handle, reason) -> true if the waiter left the queue (its promise
 * is then rejected with reason). */
static napi_value cancel_wait(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  sab_env_t *e = sab_napi_env_get(env);
  napi_value r;
  if (e == NULL) return NULL;
  int left = sab_napi_async_cancel(env, e, argv[0], argv[1]);
  if (left < 0) return NULL;
  SAB_CALL(env, napi_get_boolean(env, left != 0, &r), NULL);
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

/* notify(address, count[, space]) -> woken. count: a number >= 0,
 * Infinity = all. In a space, the address is the cell's offset. */
static napi_value notify_addr(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 3, NULL);
  uintptr_t addr;
  double count;
  void *reg;
  if (get_addr(env, argv[0], &addr) != 0 || space_arg(env, argc, 2, argv[2], &reg) != 0)
    return NULL;
  SAB_CALL(env, napi_get_value_double(env, argv[1], &count), NULL);
  uint64_t n = !(count < 1.8e19) ? UINT64_MAX : count > 0 ? (uint64_t)count : 0;
#if defined(__linux__)
  if (reg != NULL) {
    if (addr > UINT32_MAX) return sab_napi_number(env, 0); /* the core checks the rest */
    return sab_napi_number(
        env, (double)sab_space_notify(((sab_napi_reg_t *)reg)->sp, (uint32_t)addr, n));
  }
#endif
  return sab_napi_number(env, (double)sab_notify(addr, n));
}
/* waiters(address[, space]) -> records queued on it, every thread (every
 * process of a space, where the address is the cell's offset) */
static napi_value waiters_on(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  uintptr_t addr;
  void *reg;
  if (get_addr(env, argv[0], &addr) != 0 || space_arg(env, argc, 1, argv[1], &reg) != 0)
    return NULL;
#if defined(__linux__)
  if (reg != NULL) {
    if (addr > UINT32_MAX) return sab_napi_number(env, 0);
    return sab_napi_number(env, sab_space_waiters(((sab_napi_reg_t *)reg)->sp, (uint32_t)addr));
  }
#endif
  return sab_napi_number(env, sab_waiters(addr));
}
/* bucketOf(address) -> the index in `counts` of the waiter counter of the
 * bucket of that address: the lot's own hash (sab_bucket_of), so that JS
 * never restates it. lib/lot.js memoizes it per address. */
static napi_value bucket_of(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  uintptr_t addr;
  if (get_addr(env, argv[0], &addr) != 0) return NULL;
  return sab_napi_number(env, (double)sab_bucket_of(addr) * SAB_COUNT_STRIDE);
}

/* base(ta) -> the address of byte 0 of ta's buffer. */
static napi_value base_of(napi_env env, napi_callback_info info) {
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
  return sab_napi_number(env, (double)((uintptr_t)data - offset));
}

#if defined(__linux__)

/* ---- a shared space's cells (space.h): the same calls, by offset ---- */

/* spaceBucket(handle, off) -> the index, in an Int32Array over the space's
 * public part, of the waiter counter of the bucket of the cell at `off`.
 * The space's buckets are the top info.bucket_bits bits of the in-process
 * lot's Fibonacci product (sab_bucket_of, SAB_BUCKET_BITS of them) of the
 * same word index, so the hash is the core's, stated once (a core with
 * more space buckets than lot buckets would break that: refused here). */
static napi_value space_bucket(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  sab_napi_reg_t *reg = sab_napi_space_unwrap(env, argv[0]);
  uint32_t off;
  if (reg == NULL || sab_napi_get_u32(env, argv[1], &off) != 0) return NULL;
  if (reg->info.bucket_bits == 0 || reg->info.bucket_bits > SAB_BUCKET_BITS) {
    sab_napi_throw(env, SAB_ERR_NAPI, "spaceBucket: the space has more buckets than the lot");
    return NULL;
  }
  uint32_t b = sab_bucket_of((uintptr_t)off) >> (SAB_BUCKET_BITS - reg->info.bucket_bits);
  return sab_napi_number(env, (double)((reg->info.counts_off - reg->info.pub_off) / 4 +
                                       b * (reg->info.count_stride / 4)));
}

static int space_register(napi_env env, napi_value exports) {
  static const sab_napi_fn_t fns[] = {
      {"spaceBucket", space_bucket},
  };
  return sab_napi_add_functions(env, exports, fns, sizeof fns / sizeof fns[0]);
}

#endif /* __linux__ */

int sab_napi_wait_register(napi_env env, napi_value exports) {
  static const sab_napi_fn_t fns[] = {
      {"wait", wait_sync},     {"waitAsync", wait_async}, {"cancel", cancel_wait},
      {"notify", notify_addr}, {"waiters", waiters_on},   {"base", base_of},
      {"bucketOf", bucket_of},
  };
  if (sab_napi_add_functions(env, exports, fns, sizeof fns / sizeof fns[0]) != 0) return -1;
#if defined(__linux__)
  if (space_register(env, exports) != 0) return -1; /* a space's cells by offset */
#endif
  return 0;
}
