/*
 * The binding of seeing inside (include/sabsync_inspect.h): which thread an
 * owner id is, and a space's parties and objects as plain JS values. None
 * of it is on a lock's path: lib/ asks only when a person (Mutex.holder,
 * space.inspect(), the `sabsync` command) or a diagnostics subscriber does.
 */
#include "register.h"
#include "sabsync_inspect.h"
#include "values.h"

#include <stdlib.h>

/* ownerThreadSet(id, threadId): this thread's owner id is that JS thread. */
static napi_value owner_thread_set(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  uint32_t id, tid;
  if (sab_napi_get_u32(env, argv[0], &id) != 0 || sab_napi_get_u32(env, argv[1], &tid) != 0) {
    return NULL;
  }
  (void)sab_owner_thread_set(id, tid); /* no memory: the thread stays unknown */
  return NULL;
}

/* ownerThread(id) -> the JS thread id of a live owner, or -1. */
static napi_value owner_thread(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  uint32_t id, tid;
  if (sab_napi_get_u32(env, argv[0], &id) != 0) return NULL;
  return sab_napi_number(env, sab_owner_thread(id, &tid) ? (double)tid : -1);
}

#if defined(__linux__)

#include "space.h"

static int set_value(napi_env env, napi_value obj, const char *name, napi_value v) {
  SAB_CALL(env, napi_set_named_property(env, obj, name, v), -1);
  return 0;
}

static int set_u32(napi_env env, napi_value obj, const char *name, uint32_t v) {
  napi_value n = sab_napi_number(env, v);
  return n == NULL ? -1 : set_value(env, obj, name, n);
}

/* { id, pid, threadId, bookkeeping } (pid, threadId: null when unknown),
 * or NULL with an exception pending. */
static napi_value party_value(napi_env env, const sab_space_party_t *p) {
  napi_value obj, nul;
  SAB_CALL(env, napi_create_object(env, &obj), NULL);
  SAB_CALL(env, napi_get_null(env, &nul), NULL);
  if (set_u32(env, obj, "id", p->id) != 0) return NULL;
  napi_value pid = p->pid != 0 ? sab_napi_number(env, p->pid) : nul;
  napi_value tid = p->has_thread ? sab_napi_number(env, p->thread_id) : nul;
  napi_value bk;
  if (pid == NULL || tid == NULL || set_value(env, obj, "pid", pid) != 0 ||
      set_value(env, obj, "threadId", tid) != 0 ||
      napi_get_boolean(env, p->bookkeeping, &bk) != napi_ok ||
      set_value(env, obj, "bookkeeping", bk) != 0) {
    return NULL;
  }
  return obj;
}

/* spaceThreadSet(handle, threadId): this thread's slot names its thread. */
static napi_value space_thread_set(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  sab_napi_reg_t *reg = sab_napi_space_unwrap(env, argv[0]);
  uint32_t tid;
  if (reg == NULL || sab_napi_get_u32(env, argv[1], &tid) != 0) return NULL;
  sab_space_thread_set(reg->sp, reg->id, tid);
  return NULL;
}

/* spaceParty(handle, id) -> { id, pid, threadId } of a live owner, or null. */
static napi_value space_party(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  sab_napi_reg_t *reg = sab_napi_space_unwrap(env, argv[0]);
  uint32_t id;
  napi_value r;
  if (reg == NULL || sab_napi_get_u32(env, argv[1], &id) != 0) return NULL;
  sab_space_party_t p;
  if (sab_space_party(reg->sp, id, &p)) return party_value(env, &p);
  SAB_CALL(env, napi_get_null(env, &r), NULL);
  return r;
}

/* spaceParties(handle) -> [{ id, pid, threadId }] of every live owner. */
static napi_value space_parties(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_napi_reg_t *reg = sab_napi_space_unwrap(env, argv[0]);
  if (reg == NULL) return NULL;
  sab_space_party_t *ps = malloc(reg->info.nslots * sizeof *ps);
  if (ps == NULL) {
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  uint32_t n = sab_space_parties(reg->sp, ps, reg->info.nslots);
  napi_value arr = NULL, v;
  if (napi_create_array_with_length(env, n, &arr) != napi_ok) arr = NULL;
  for (uint32_t i = 0; arr != NULL && i < n; i++) {
    v = party_value(env, &ps[i]);
    if (v == NULL || napi_set_element(env, arr, i, v) != napi_ok) arr = NULL;
  }
  free(ps);
  return arr;
}

static napi_value object_value(napi_env env, const sab_space_object_t *o) {
  napi_value obj, params, ids, key, v;
  SAB_CALL(env, napi_create_object(env, &obj), NULL);
  if (set_u32(env, obj, "index", o->index) != 0 || set_u32(env, obj, "state", o->state) != 0 ||
      set_u32(env, obj, "kind", o->kind) != 0 || set_u32(env, obj, "off", o->off) != 0 ||
      set_u32(env, obj, "bytes", o->bytes) != 0 || set_u32(env, obj, "bad", o->bad) != 0 ||
      set_u32(env, obj, "waiting", o->waiting) != 0) {
    return NULL;
  }
  SAB_CALL(env, napi_create_array_with_length(env, SAB_SPACE_NPARAMS, &params), NULL);
  for (uint32_t k = 0; k < SAB_SPACE_NPARAMS; k++) {
    if ((v = sab_napi_number(env, o->params[k])) == NULL) return NULL;
    SAB_CALL(env, napi_set_element(env, params, k, v), NULL);
  }
  SAB_CALL(env, napi_create_array_with_length(env, o->nwaiter_ids, &ids), NULL);
  for (uint32_t k = 0; k < o->nwaiter_ids; k++) {
    if ((v = sab_napi_number(env, o->waiter_ids[k])) == NULL) return NULL;
    SAB_CALL(env, napi_set_element(env, ids, k, v), NULL);
  }
  if (o->bad & SAB_INSPECT_BAD_KEY) {
    SAB_CALL(env, napi_get_null(env, &key), NULL);
  } else {
    /* Invalid UTF-8 (a scribbled key) becomes U+FFFD: a key to show. */
    SAB_CALL(env, napi_create_string_utf8(env, o->key, o->keylen, &key), NULL);
  }
  if (set_value(env, obj, "params", params) != 0 || set_value(env, obj, "waiterIds", ids) != 0 ||
      set_value(env, obj, "key", key) != 0) {
    return NULL;
  }
  return obj;
}

/* spaceObjects(handle) -> { summary fields..., objects: [...] } */
static napi_value space_objects(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_napi_reg_t *reg = sab_napi_space_unwrap(env, argv[0]);
  if (reg == NULL) return NULL;
  enum { MAX = 4096 }; /* more than a directory holds (NDIR) */
  sab_space_object_t *os = malloc(MAX * sizeof *os);
  if (os == NULL) {
    napi_throw_error(env, NULL, "out of memory");
    return NULL;
  }
  sab_space_summary_t sum;
  uint32_t n = sab_space_objects(reg->sp, os, MAX, &sum);
  napi_value res = NULL, arr, v;
  if (napi_create_object(env, &res) != napi_ok ||
      napi_create_array_with_length(env, n, &arr) != napi_ok ||
      set_u32(env, res, "size", sum.size) != 0 || set_u32(env, res, "heapOff", sum.heap_off) != 0 ||
      set_u32(env, res, "heapBytes", sum.heap_bytes) != 0 ||
      set_u32(env, res, "heapUsed", sum.heap_used) != 0 ||
      set_u32(env, res, "dirCount", sum.dir_count) != 0 ||
      set_u32(env, res, "epoch", sum.epoch) != 0 ||
      set_u32(env, res, "recordsUsed", sum.records_used) != 0 ||
      set_u32(env, res, "queuedElsewhere", sum.queued_elsewhere) != 0 ||
      set_value(env, res, "objects", arr) != 0) {
    res = NULL;
  }
  for (uint32_t i = 0; res != NULL && i < n; i++) {
    v = object_value(env, &os[i]);
    if (v == NULL || napi_set_element(env, arr, i, v) != napi_ok) res = NULL;
  }
  free(os);
  return res;
}

static const sab_napi_fn_t fns[] = {
    {"ownerThreadSet", owner_thread_set}, {"ownerThread", owner_thread},
    {"spaceThreadSet", space_thread_set}, {"spaceParty", space_party},
    {"spaceParties", space_parties},      {"spaceObjects", space_objects},
};

#else /* !__linux__: no spaces (src/napi/space.c says so at openShared) */

static const sab_napi_fn_t fns[] = {
    {"ownerThreadSet", owner_thread_set},
    {"ownerThread", owner_thread},
};

#endif

int sab_napi_inside_register(napi_env env, napi_value exports) {
  return sab_napi_add_functions(env, exports, fns, sizeof fns / sizeof fns[0]);
}
