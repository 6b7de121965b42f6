/*
 * Per-env state: async waiters delivered on the env's own loop, their
 * deadlines on one uv_timer_t, and teardown.
 *
 * Threads. A notify on any thread moves a record to NOTIFIED and calls
 * sab_napi_async_wake, which appends it to the env's delivery queue under
 * env->mu and sends env->async. Everything else here runs on the env's
 * thread. uv_async_send coalesces, so the async callback drains the whole
 * queue each time.
 *
 * Teardown (an async cleanup hook): set `closed` under mu, so no notifier
 * sends to the async handle again; then settle every unsettled record. One
 * still queued in the lot is cancelled. One that a notify already took was
 * counted as woken but will never run JS here: its wake is handed on to the
 * next waiter of its address (a token semaphore's record gives its slot
 * back instead: a->unconsumed), once it has reached the delivery queue (the
 * notifier may still be between its unlock and its append, so we wait on
 * env->cv for that). Finally the handles close and the state is freed.
 */
#include "env.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sab_napi_throw_last(napi_env env, const char *call) {
  bool pending = false;
  if (napi_is_exception_pending(env, &pending) == napi_ok && pending) return;
  const napi_extended_error_info *info = NULL;
  const char *msg = NULL;
  if (napi_get_last_error_info(env, &info) == napi_ok && info != NULL) msg = info->error_message;
  char buf[256];
  snprintf(buf, sizeof buf, "sabsync: %s failed: %s", call, msg != NULL ? msg : "unknown error");
  napi_throw_error(env, "ERR_SABSYNC_NAPI", buf);
}

/* ---- tagged externals ---- */

/* Random 128-bit values, fixed: a tag must mean the same in every copy and
 * version of the addon that could meet the external. */
const napi_type_tag sab_napi_tag_async = {0x8d1f3c6a2b5e4f07ull, 0xa93c51e2d4b76f18ull};
const napi_type_tag sab_napi_tag_sema_view = {0x47c2e9b1f05a3d86ull, 0x1e6b8f4ac27d905bull};

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

/* ---- the deadline heap (a binary min-heap on deadline) ---- */

static void heap_swap(sab_env_t *e, size_t i, size_t j) {
  sab_async_t *t = e->heap[i];
  e->heap[i] = e->heap[j];
  e->heap[j] = t;
  e->heap[i]->heap_index = i;
  e->heap[j]->heap_index = j;
}

static void heap_up(sab_env_t *e, size_t i) {
  while (i > 0) {
    size_t p = (i - 1) / 2;
    if (e->heap[p]->deadline <= e->heap[i]->deadline) break;
    heap_swap(e, i, p);
    i = p;
  }
}

static void heap_down(sab_env_t *e, size_t i) {
  for (;;) {
    size_t l = 2 * i + 1, r = l + 1, m = i;
    if (l < e->heap_len && e->heap[l]->deadline < e->heap[m]->deadline) m = l;
    if (r < e->heap_len && e->heap[r]->deadline < e->heap[m]->deadline) m = r;
    if (m == i) break;
    heap_swap(e, i, m);
    i = m;
  }
}

static int heap_push(sab_env_t *e, sab_async_t *a) {
  if (e->heap_len == e->heap_cap) {
    size_t cap = e->heap_cap != 0 ? e->heap_cap * 2 : 64;
    sab_async_t **h = realloc(e->heap, cap * sizeof *h);
    if (h == NULL) return -1;
    e->heap = h;
    e->heap_cap = cap;
  }
  a->heap_index = e->heap_len;
  e->heap[e->heap_len++] = a;
  heap_up(e, a->heap_index);
  return 0;
}

static void heap_remove(sab_env_t *e, sab_async_t *a) {
  size_t i = a->heap_index;
  if (i == SIZE_MAX) return;
  a->heap_index = SIZE_MAX;
  e->heap_len--;
  if (i == e->heap_len) return;
  e->heap[i] = e->heap[e->heap_len];
  e->heap[i]->heap_index = i;
  heap_down(e, i);
  heap_up(e, i);
}

static void timer_cb(uv_timer_t *t);
static void prepare_cb(uv_prepare_t *h);

/* Arm the timer for the earliest deadline. uv timers count whole ms of
 * loop time, so round up; timer_cb re-arms if it fires early anyway. */
static void timer_arm(sab_env_t *e) {
  if (e->heap_len == 0) {
    uv_timer_stop(&e->timer);
    return;
  }
  uint64_t now = sab_now(), d = e->heap[0]->deadline;
  uint64_t ms = d > now ? (d - now + 999999) / 1000000 : 0;
  uv_update_time(e->loop);
  uv_timer_start(&e->timer, timer_cb, ms, 0);
}

/* ---- loop liveness: the async handle is ref'd while a ref'd wait is
 * pending; the timer never keeps the loop alive on its own. ---- */

static void loop_ref_update(sab_env_t *e) {
  if (e->closed) return;
  if (e->nref > 0)
    uv_ref((uv_handle_t *)&e->async);
  else
    uv_unref((uv_handle_t *)&e->async);
}

/* ---- records ---- */

void sab_napi_async_free(sab_env_t *e, sab_async_t *a) {
  if (a->memory != NULL) napi_delete_reference(e->env, a->memory);
  a->memory = NULL;
  a->settled = 1;
  sab_waiter_destroy(&a->w);
  if (!a->js_holds) free(a);
}

static void untrack(sab_env_t *e, sab_async_t *a) {
  if (a->pprev != NULL)
    a->pprev->pnext = a->pnext;
  else
    e->pending = a->pnext;
  if (a->pnext != NULL) a->pnext->pprev = a->pprev;
  a->pnext = a->pprev = NULL;
  if (e->pending == NULL && !e->closed) uv_prepare_stop(&e->prepare);
  heap_remove(e, a);
  if (a->keeps_loop) {
    a->keeps_loop = 0;
    e->nref--;
    loop_ref_update(e);
  }
}

void sab_napi_async_track(sab_env_t *e, sab_async_t *a) {
  if (e->pending == NULL) uv_prepare_start(&e->prepare, prepare_cb);
  a->pprev = NULL;
  a->pnext = e->pending;
  if (e->pending != NULL) e->pending->pprev = a;
  e->pending = a;
  if (a->keeps_loop) {
    e->nref++;
    loop_ref_update(e);
  }
  if (a->deadline != UINT64_MAX) {
    if (heap_push(e, a) != 0) {
      /* Out of memory for the heap: the wait then has no timeout. */
      a->deadline = UINT64_MAX;
    } else if (a->heap_index == 0) {
      timer_arm(e);
    }
  }
}

/* Settle a record that left the lot: resolve its promise, free it. Runs
 * inside a handle scope and a callback scope. */
static void settle(sab_env_t *e, sab_async_t *a, const char *result) {
  napi_value v;
  napi_status st;
  untrack(e, a);
  if (a->yields_token) {
    double token = result[0] != 'o'                  ? -1
                   : a->w.token == SAB_SEMA_NO_TOKEN ? -2
                                                     : (double)a->w.token;
    st = napi_create_double(e->env, token, &v);
  } else {
    st = napi_create_string_utf8(e->env, result, NAPI_AUTO_LENGTH, &v);
  }
  if (st == napi_ok) napi_resolve_deferred(e->env, a->deferred, v);
  sab_napi_async_free(e, a);
}

void sab_napi_async_wake(sab_waiter_t *w) {
  sab_async_t *a = (sab_async_t *)w;
  sab_env_t *e = a->env;
  uv_mutex_lock(&e->mu);
  a->qnext = NULL;
  /* qhead is also read without the lock, by prepare_cb: store atomically. */
  if (e->qtail != NULL)
    e->qtail->qnext = a;
  else
    __atomic_store_n(&e->qhead, a, __ATOMIC_RELEASE);
  e->qtail = a;
  a->queued = 1;
  if (!e->closed)
    uv_async_send(&e->async);
  else
    uv_cond_broadcast(&e->cv);
  uv_mutex_unlock(&e->mu);
}

int sab_napi_async_cancel(sab_env_t *e, sab_async_t *a, napi_value reason) {
  if (a->settled) return 0;
  if (sab_wait_cancel(&a->w, SAB_CANCELLED) != SAB_CANCELLED) return 0;
  untrack(e, a);
  napi_reject_deferred(e->env, a->deferred, reason);
  sab_napi_async_free(e, a);
  return 1;
}

void sab_napi_async_release_handle(sab_async_t *a) {
  a->js_holds = 0;
  if (a->settled) free(a);
}

uint64_t sab_napi_deadline(double ms) {
  if (!(ms < 1e13)) return UINT64_MAX; /* ~317 years: forever */
  if (ms <= 0) return sab_now();
  return sab_now() + (uint64_t)ceil(ms * 1e6);
}

static void handle_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  sab_napi_async_release_handle(data);
}

int sab_napi_async_prepare(napi_env env, sab_env_t *e, sab_async_t *a, napi_value buffer,
                           uint32_t flags, double ms, const char *what, napi_value *out) {
  napi_value promise, handle, pair;
  sab_waiter_init_async(&a->w, sab_napi_async_wake);
  a->env = e;
  a->heap_index = SIZE_MAX;
  a->keeps_loop = (flags & SAB_ASYNC_REF) != 0;
  a->deadline = sab_napi_deadline(ms);
  /* Everything that can fail happens before the record can be queued. */
  if (napi_create_reference(env, buffer, 1, &a->memory) != napi_ok ||
      napi_create_promise(env, &a->deferred, &promise) != napi_ok) {
    sab_napi_throw_last(env, what);
    sab_napi_async_free(e, a);
    return -1;
  }
  if (!(flags & SAB_ASYNC_HANDLE)) {
    *out = promise;
    return 0;
  }
  if (napi_create_external(env, a, handle_finalize, NULL, &handle) != napi_ok) {
    sab_napi_throw_last(env, what);
    sab_napi_async_discard(e, a);
    return -1;
  }
  /* From here the handle's finalizer frees the record. */
  a->js_holds = 1;
  if (napi_type_tag_object(env, handle, &sab_napi_tag_async) != napi_ok ||
      napi_create_array_with_length(env, 2, &pair) != napi_ok ||
      napi_set_element(env, pair, 0, promise) != napi_ok ||
      napi_set_element(env, pair, 1, handle) != napi_ok) {
    sab_napi_throw_last(env, what);
    sab_napi_async_discard(e, a);
    return -1;
  }
  *out = pair;
  return 0;
}

void sab_napi_async_discard(sab_env_t *e, sab_async_t *a) {
  napi_value undef;
  if (napi_get_undefined(e->env, &undef) == napi_ok)
    napi_resolve_deferred(e->env, a->deferred, undef);
  sab_napi_async_free(e, a);
}

/* ---- loop callbacks ---- */

/* Open the scopes in which promise resolution runs microtasks. */
typedef struct {
  napi_handle_scope hs;
  napi_callback_scope cs;
  int ok;
} scopes_t;

static void scopes_open(sab_env_t *e, scopes_t *s) {
  napi_value resource;
  s->ok = 0;
  if (napi_open_handle_scope(e->env, &s->hs) != napi_ok) return;
  if (napi_get_reference_value(e->env, e->resource, &resource) != napi_ok ||
      napi_open_callback_scope(e->env, resource, e->actx, &s->cs) != napi_ok) {
    napi_close_handle_scope(e->env, s->hs);
    return;
  }
  s->ok = 1;
}

static void scopes_close(sab_env_t *e, scopes_t *s) {
  if (!s->ok) return;
  napi_close_callback_scope(e->env, s->cs);
  napi_close_handle_scope(e->env, s->hs);
}

static void deliver(sab_env_t *e) {
  uv_mutex_lock(&e->mu);
  sab_async_t *a = e->qhead;
  __atomic_store_n(&e->qhead, NULL, __ATOMIC_RELAXED);
  e->qtail = NULL;
  uv_mutex_unlock(&e->mu);
  if (a == NULL) return;
  scopes_t s;
  scopes_open(e, &s);
  while (a != NULL) {
    sab_async_t *next = a->qnext;
    settle(e, a, "ok");
    a = next;
  }
  scopes_close(e, &s);
}

static void async_cb(uv_async_t *h) { deliver(h->data); }

/*
 * Before the loop goes to sleep with async waits pending, watch the
 * delivery queue for a few microseconds, as a blocking waiter spins before
 * it parks: a wake that comes within that time is delivered without the
 * loop sleeping and being woken through the async handle (an eventfd write
 * and a cross-CPU wake, ~20-40 us on a VM). Only when the loop would block:
 * with other work ready, uv_backend_timeout is 0 and nothing is spent.
 */
static void prepare_cb(uv_prepare_t *h) {
  sab_env_t *e = h->data;
  if (uv_backend_timeout(e->loop) == 0 || !sab_spin_allowed()) return;
  uint64_t until = sab_now() + SAB_LOOP_SPIN_NS;
  for (unsigned i = 1;; i++) {
    if (__atomic_load_n(&e->qhead, __ATOMIC_ACQUIRE) != NULL) {
      deliver(e);
      return;
    }
    if ((i & 31) == 0 && sab_now() >= until) return;
    sab_cpu_relax();
  }
}

static void timer_cb(uv_timer_t *t) {
  sab_env_t *e = t->data;
  scopes_t s;
  int opened = 0;
  uint64_t now = sab_now();
  while (e->heap_len > 0 && e->heap[0]->deadline <= now) {
    sab_async_t *a = e->heap[0];
    heap_remove(e, a);
    if (sab_wait_cancel(&a->w, SAB_TIMED_OUT) != SAB_TIMED_OUT) {
      continue; /* a notify won: the record is on its way to async_cb */
    }
    if (!opened) {
      scopes_open(e, &s);
      opened = 1;
    }
    settle(e, a, "timed-out");
  }
  if (opened) scopes_close(e, &s);
  timer_arm(e);
}

/* ---- teardown ---- */

static void handle_closed(uv_handle_t *h) {
  sab_env_t *e = h->data;
  if (--e->open_handles > 0) return;
  napi_remove_async_cleanup_hook(e->hook);
  uv_cond_destroy(&e->cv);
  uv_mutex_destroy(&e->mu);
  free(e->heap);
  free(e);
}

static void env_teardown(napi_async_cleanup_hook_handle handle, void *arg) {
  sab_env_t *e = arg;
  e->hook = handle;
  uv_mutex_lock(&e->mu);
  e->closed = 1;
  uv_mutex_unlock(&e->mu);

  while (e->pending != NULL) {
    sab_async_t *a = e->pending;
    untrack(e, a);
    if (sab_wait_cancel(&a->w, SAB_CANCELLED) == SAB_OK) {
      /* Counted as woken by a notify but never delivered: hand the wake
       * on, once the notifier has finished with the record. */
      uv_mutex_lock(&e->mu);
      while (!a->queued) uv_cond_wait(&e->cv, &e->mu);
      uv_mutex_unlock(&e->mu);
      if (a->unconsumed != NULL)
        a->unconsumed(a);
      else
        sab_notify(a->w.addr, 1);
    }
    /* The promise can no longer settle; its deferred dies with the env. */
    sab_napi_async_free(e, a);
  }
  /* This thread holds nothing from now on: wake whoever waits on a word
   * that names it, so that they take over (robust locks). */
  sab_owner_died(e->id);
  if (e->noop != NULL) napi_delete_reference(e->env, e->noop);
  if (e->resource != NULL) napi_delete_reference(e->env, e->resource);
  if (e->actx != NULL) napi_async_destroy(e->env, e->actx);
  uv_timer_stop(&e->timer);
  uv_prepare_stop(&e->prepare);
  uv_close((uv_handle_t *)&e->async, handle_closed);
  uv_close((uv_handle_t *)&e->timer, handle_closed);
  uv_close((uv_handle_t *)&e->prepare, handle_closed);
}

/* ---- creation ---- */

static napi_value noop(napi_env env, napi_callback_info info) {
  (void)env;
  (void)info;
  return NULL;
}

sab_env_t *sab_napi_env_get(napi_env env) {
  void *data = NULL;
  if (napi_get_instance_data(env, &data) != napi_ok) return NULL;
  return data;
}

int sab_napi_env_terminating(sab_env_t *e) {
  napi_value fn, recv, result;
  if (napi_get_reference_value(e->env, e->noop, &fn) != napi_ok || fn == NULL) return 1;
  if (napi_get_undefined(e->env, &recv) != napi_ok) return 1;
  return napi_call_function(e->env, recv, fn, 0, NULL, &result) != napi_ok;
}

sab_env_t *sab_napi_env_create(napi_env env) {
  sab_env_t *e = calloc(1, sizeof *e);
  napi_value fn, resource, name;
  if (e == NULL) {
    napi_throw_error(env, "ERR_SABSYNC_NOMEM", "sabsync: out of memory");
    return NULL;
  }
  e->env = env;
  e->id = sab_owner_new();
  SAB_CALL(env, napi_get_uv_event_loop(env, &e->loop), (free(e), NULL));
  SAB_CALL(env, napi_create_function(env, "noop", NAPI_AUTO_LENGTH, noop, NULL, &fn),
           (free(e), NULL));
  SAB_CALL(env, napi_create_reference(env, fn, 1, &e->noop), (free(e), NULL));
  SAB_CALL(env, napi_create_object(env, &resource), (free(e), NULL));
  SAB_CALL(env, napi_create_reference(env, resource, 1, &e->resource), (free(e), NULL));
  SAB_CALL(env, napi_create_string_utf8(env, "sabsync:waitAsync", NAPI_AUTO_LENGTH, &name),
           (free(e), NULL));
  SAB_CALL(env, napi_async_init(env, resource, name, &e->actx), (free(e), NULL));
  if (uv_mutex_init(&e->mu) != 0 || uv_cond_init(&e->cv) != 0 ||
      uv_async_init(e->loop, &e->async, async_cb) != 0 || uv_timer_init(e->loop, &e->timer) != 0 ||
      uv_prepare_init(e->loop, &e->prepare) != 0) {
    napi_throw_error(env, "ERR_SABSYNC_UV", "sabsync: could not set up libuv handles");
    return NULL; /* leaks a little on an impossible path */
  }
  e->async.data = e;
  e->timer.data = e;
  e->prepare.data = e;
  e->open_handles = 3;
  uv_unref((uv_handle_t *)&e->async);
  uv_unref((uv_handle_t *)&e->timer);
  uv_unref((uv_handle_t *)&e->prepare);
  SAB_CALL(env, napi_set_instance_data(env, e, NULL, NULL), NULL);
  SAB_CALL(env, napi_add_async_cleanup_hook(env, env_teardown, e, NULL), NULL);
  return e;
}
