/*
 * The binding of lock waits on this process's memory (sabsync_inspect.h),
 * which lib/inside.js reads to find deadlocks among the threads:
 *
 *   lockWaitEnter(view, kind) -> handle  a Mutex's or an RWLock's wait of
 *                                       this thread has lasted (50 ms,
 *                                       lib/waiting.js) and parks again
 *   lockWaitLeave(handle)               it ended
 *   lockWaits() -> [[waiter, kind, address, [holders], more], ...]
 *                                       every thread's, threads named by
 *                                       their worker_threads.threadId (-1:
 *                                       ended), address: the view's, the
 *                                       same in every thread
 *
 * An entry keeps the view's memory alive (keep.h) while it is linked: the
 * list reads its cells from any thread. A thread's entries are its env's
 * (e->waits), indexed by handle - 1; its teardown unlinks what is left (a
 * worker terminated mid-wait ends without its JS leaving).
 */
#include "lockwaits.h"

#include "register.h"
#include "sabsync_inspect.h"
#include "values.h"

#include <stdlib.h>

typedef struct {
  sab_lockwait_t w;
  uintptr_t key; /* its keep entry */
} entry_t;

/* lockWaitEnter(view: Int32Array, kind: 1 | 2) -> handle (>= 1). */
static napi_value enter(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  sab_env_t *e = sab_napi_env_get(env);
  if (e == NULL) return NULL;
  void *data;
  size_t bytes;
  napi_value buffer;
  uint32_t kind;
  if (sab_napi_int32_memory(env, argv[0], "view", &data, &bytes, &buffer) != 0 ||
      sab_napi_get_u32(env, argv[1], &kind) != 0) {
    return NULL;
  }
  if (kind != SAB_LOCKWAIT_MUTEX && kind != SAB_LOCKWAIT_RWLOCK) {
    napi_throw_range_error(env, NULL, "lockWaitEnter: \"kind\" must be 1 (Mutex) or 2 (RWLock)");
    return NULL;
  }
  uint32_t i = 0;
  while (i < e->nwaits && e->waits[i] != NULL) i++;
  if (i == e->nwaits) {
    uint32_t cap = e->nwaits == 0 ? 8 : e->nwaits * 2;
    void **grown = realloc(e->waits, cap * sizeof *grown);
    if (grown == NULL) {
      sab_napi_throw(env, SAB_ERR_NOMEM, "sabsync: out of memory");
      return NULL;
    }
    for (uint32_t j = e->nwaits; j < cap; j++) grown[j] = NULL;
    e->waits = grown;
    e->nwaits = cap;
  }
  entry_t *en = calloc(1, sizeof *en);
  if (en == NULL) {
    sab_napi_throw(env, SAB_ERR_NOMEM, "sabsync: out of memory");
    return NULL;
  }
  en->key = (uintptr_t)data;
  if (sab_napi_keep(env, &e->keep, en->key, buffer, "lockWaitEnter") != 0) {
    free(en);
    return NULL;
  }
  en->w.cells = data;
  en->w.ncells = bytes / 4;
  en->w.kind = (int)kind;
  en->w.waiter = e->id;
  e->waits[i] = en;
  sab_lockwaits_enter(&en->w);
  return sab_napi_number(env, i + 1);
}

static void drop(sab_env_t *e, uint32_t i) {
  entry_t *en = e->waits[i];
  e->waits[i] = NULL;
  sab_lockwaits_leave(&en->w);
  sab_napi_unkeep(e->env, &e->keep, en->key);
  free(en);
}

/* lockWaitLeave(handle): a handle lockWaitEnter gave this thread. */
static napi_value leave(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_env_t *e = sab_napi_env_get(env);
  uint32_t h;
  if (e == NULL || sab_napi_get_u32(env, argv[0], &h) != 0) return NULL;
  if (h == 0 || h > e->nwaits || e->waits[h - 1] == NULL) {
    napi_throw_range_error(env, NULL, "lockWaitLeave: \"handle\" names no wait of this thread");
    return NULL;
  }
  drop(e, h - 1);
  return NULL;
}

void sab_napi_lockwaits_leave(sab_env_t *e) {
  for (uint32_t i = 0; i < e->nwaits; i++) {
    if (e->waits[i] != NULL) drop(e, i);
  }
  free(e->waits);
  e->waits = NULL;
  e->nwaits = 0;
}

typedef struct {
  uint32_t waiter, kind, n, more;
  uintptr_t address;
  uint32_t holders[SAB_LOCKWAIT_HOLDERS];
} seen_t;

typedef struct {
  seen_t *all;
  size_t n, cap;
  int failed;
} seen_list_t;

static void collect(void *u, const sab_lockwait_t *w, const uint32_t *holders, size_t n, int more) {
  seen_list_t *l = u;
  if (l->failed) return;
  if (l->n == l->cap) {
    size_t cap = l->cap == 0 ? 16 : l->cap * 2;
    seen_t *grown = realloc(l->all, cap * sizeof *grown);
    if (grown == NULL) {
      l->failed = 1;
      return;
    }
    l->all = grown;
    l->cap = cap;
  }
  seen_t *s = &l->all[l->n++];
  s->waiter = w->waiter;
  s->kind = (uint32_t)w->kind;
  s->address = (uintptr_t)w->cells;
  s->n = (uint32_t)n;
  s->more = (uint32_t)more;
  for (size_t i = 0; i < n; i++) s->holders[i] = holders[i];
}

/* An owner id as its JS thread id, or -1 (ended, or never told). */
static napi_value thread_of(napi_env env, uint32_t id) {
  uint32_t tid;
  return sab_napi_number(env, sab_owner_thread(id, &tid) ? (double)tid : -1);
}

static napi_value one(napi_env env, const seen_t *s) {
  napi_value row, holders, more;
  SAB_CALL(env, napi_create_array_with_length(env, 5, &row), NULL);
  SAB_CALL(env, napi_create_array_with_length(env, s->n, &holders), NULL);
  SAB_CALL(env, napi_get_boolean(env, s->more != 0, &more), NULL);
  napi_value cells[5] = {thread_of(env, s->waiter), sab_napi_number(env, s->kind),
                         sab_napi_number(env, (double)s->address), holders, more};
  for (uint32_t i = 0; i < 5; i++) {
    if (cells[i] == NULL) return NULL;
    SAB_CALL(env, napi_set_element(env, row, i, cells[i]), NULL);
  }
  for (uint32_t i = 0; i < s->n; i++) {
    napi_value t = thread_of(env, s->holders[i]);
    if (t == NULL) return NULL;
    SAB_CALL(env, napi_set_element(env, holders, i, t), NULL);
  }
  return row;
}

/* lockWaits() -> every linked wait, as the module's comment says. */
static napi_value waits(napi_env env, napi_callback_info info) {
  (void)info;
  seen_list_t l = {0};
  sab_lockwaits_each(collect, &l);
  if (l.failed) {
    free(l.all);
    sab_napi_throw(env, SAB_ERR_NOMEM, "sabsync: out of memory");
    return NULL;
  }
  napi_value arr = NULL;
  if (napi_create_array_with_length(env, l.n, &arr) != napi_ok) {
    sab_napi_throw_last(env, "napi_create_array_with_length");
    arr = NULL;
  }
  for (size_t i = 0; arr != NULL && i < l.n; i++) {
    napi_value row = one(env, &l.all[i]);
    if (row == NULL) {
      arr = NULL;
    } else if (napi_set_element(env, arr, (uint32_t)i, row) != napi_ok) {
      sab_napi_throw_last(env, "napi_set_element");
      arr = NULL;
    }
  }
  free(l.all);
  return arr;
}

static const sab_napi_fn_t fns[] = {
    {"lockWaitEnter", enter},
    {"lockWaitLeave", leave},
    {"lockWaits", waits},
};

int sab_napi_lockwaits_register(napi_env env, napi_value exports) {
  return sab_napi_add_functions(env, exports, fns, sizeof fns / sizeof fns[0]);
}
