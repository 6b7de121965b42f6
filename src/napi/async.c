/*
 * Async waiters: delivered on the env's own loop, their deadlines on one
 * uv_timer_t.
 *
 * Threads. A notify on any thread moves a record to NOTIFIED and calls
 * sab_napi_async_wake, which appends it to the env's delivery queue under
 * env->mu and sends env->async. Everything else here runs on the env's
 * thread. uv_async_send coalesces, so the async callback drains the whole
 * queue each time.
 *
 * Teardown (sab_napi_async_teardown, from the env's cleanup hook): set
 * `closed` under mu, so no notifier sends to the async handle again; then
 * settle every unsettled record. One still queued in the lot is cancelled.
 * One that a notify already took was counted as woken but will never run
 * JS here: its wake is handed on to the next waiter of its address (a token
 * semaphore's record gives its slot back instead: a->unconsumed), once it
 * has reached the delivery queue (the notifier may still be between its
 * unlock and its append, so we wait on env->cv for that). Finally the
 * handles close.
 *
 * Loop callbacks have no JS caller to throw to. Their napi calls fail
 * when the env is being torn down (a worker terminated while wakes were on
 * their way): a record woken then cannot settle, so its wake is handed on
 * as at teardown. Any other failure is counted (sab_napi_note_failure); in
 * both cases the record is freed, so nothing leaks and nothing is touched
 * twice.
 */
#include "async.h"
#include "values.h"

#include <stdlib.h>

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

/* A napi call of a loop callback failed: expected while the env is torn
 * down, a fault otherwise. */
static void loop_failure(sab_env_t *e, napi_status st) {
  if (st != napi_ok && !sab_napi_env_terminating(e)) sab_napi_note_failure(st);
}

/* A wake this record was counted for but will never deliver: to the next
 * waiter of its address, or (a token semaphore) its slot back. */
static void hand_on(sab_async_t *a) {
  if (a->unconsumed != NULL)
    a->unconsumed(a);
  else
    sab_notify(a->w.addr, 1);
}

/* ---- records ---- */

static void async_free(sab_env_t *e, sab_async_t *a) {
  if (a->memory != NULL) sab_napi_note_failure(napi_delete_reference(e->env, a->memory));
  a->memory = NULL;
  if (a->abort_reason != NULL)
    sab_napi_note_failure(napi_delete_reference(e->env, a->abort_reason));
  a->abort_reason = NULL;
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

/* Settle a record that left the lot with `result` (SAB_OK or
 * SAB_TIMED_OUT): resolve its promise, free it. Runs inside a handle scope
 * and a callback scope. */
static void settle(sab_env_t *e, sab_async_t *a, int result) {
  napi_value v;
  napi_status st;
  if (result == SAB_OK && a->retry != NULL && a->w.token == SAB_SEMA_NO_TOKEN && !e->closed) {
    if (a->abort_reason != NULL) {
      /* Aborted while woken to try again: pass the wake on, reject. */
      napi_value reason;
      hand_on(a);
      untrack(e, a);
      st = napi_get_reference_value(e->env, a->abort_reason, &reason);
      if (st == napi_ok) st = napi_reject_deferred(e->env, a->deferred, reason);
      if (st != napi_ok) loop_failure(e, st);
      async_free(e, a);
      return;
    }
    /* Woken to try again: the record is off the lot and off the delivery
     * queue, so it can be queued again as it is. */
    result = a->retry(a, a->deadline != UINT64_MAX && sab_now() >= a->deadline);
    if (result == SAB_PENDING) {
      uv_mutex_lock(&e->mu);
      a->queued = 0;
      uv_mutex_unlock(&e->mu);
      /* The timer may have taken it off the heap when the wake won. */
      if (a->deadline != UINT64_MAX && a->heap_index == SIZE_MAX) {
        if (heap_push(e, a) != 0)
          a->deadline = UINT64_MAX;
        else if (a->heap_index == 0)
          timer_arm(e);
      }
      return;
    }
  }
  untrack(e, a);
  if (a->yields_token) {
    double token = result != SAB_OK                  ? SAB_NAPI_SEMA_TIMED_OUT
                   : a->w.token == SAB_SEMA_NO_TOKEN ? SAB_NAPI_SEMA_NO_TOKEN
                                                     : (double)a->w.token;
    st = napi_create_double(e->env, token, &v);
  } else {
    st = napi_create_string_utf8(e->env, sab_napi_result_name(result), NAPI_AUTO_LENGTH, &v);
  }
  if (st == napi_ok) st = napi_resolve_deferred(e->env, a->deferred, v);
  if (st != napi_ok) {
    if (result == SAB_OK) hand_on(a);
    loop_failure(e, st);
  }
  async_free(e, a);
}

static void async_wake(sab_waiter_t *w) {
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
  int c = sab_wait_cancel(&a->w, SAB_CANCELLED);
  if (c == SAB_OK && a->retry != NULL && a->w.token == SAB_SEMA_NO_TOKEN &&
      a->abort_reason == NULL) {
    /* Woken to try again, its delivery on the way (the token was written
     * under the bucket lock that the cancel took after): its retry will
     * reject with this reason instead of asking again. */
    if (napi_create_reference(e->env, reason, 1, &a->abort_reason) != napi_ok) {
      sab_napi_throw_last(e->env, "napi_create_reference");
      return -1;
    }
    return 1;
  }
  if (c != SAB_CANCELLED) return 0;
  untrack(e, a);
  napi_status st = napi_reject_deferred(e->env, a->deferred, reason);
  async_free(e, a);
  if (st != napi_ok) {
    sab_napi_throw_last(e->env, "napi_reject_deferred");
    return -1;
  }
  return 1;
}

/* A JS handle to the record was collected. */
static void handle_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  sab_async_t *a = data;
  a->js_holds = 0;
  if (a->settled) free(a);
}

int sab_napi_async_prepare(napi_env env, sab_env_t *e, sab_async_t *a, napi_value buffer,
                           uint32_t flags, double ms, const char *what, napi_value *out) {
  napi_value promise, handle, pair;
  sab_waiter_init_async(&a->w, async_wake);
  a->env = e;
  a->heap_index = SIZE_MAX;
  a->keeps_loop = (flags & SAB_ASYNC_REF) != 0;
  a->deadline = sab_napi_deadline(ms);
  /* Everything that can fail happens before the record can be queued. */
  if (napi_create_reference(env, buffer, 1, &a->memory) != napi_ok ||
      napi_create_promise(env, &a->deferred, &promise) != napi_ok) {
    sab_napi_throw_last(env, what);
    async_free(e, a);
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
  napi_status st = napi_get_undefined(e->env, &undef);
  if (st == napi_ok) st = napi_resolve_deferred(e->env, a->deferred, undef);
  sab_napi_note_failure(st);
  async_free(e, a);
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
  napi_status st;
  s->ok = 0;
  st = napi_open_handle_scope(e->env, &s->hs);
  if (st != napi_ok) {
    loop_failure(e, st);
    return;
  }
  st = napi_get_reference_value(e->env, e->resource, &resource);
  if (st == napi_ok) st = napi_open_callback_scope(e->env, resource, e->actx, &s->cs);
  if (st != napi_ok) {
    loop_failure(e, st);
    loop_failure(e, napi_close_handle_scope(e->env, s->hs));
    return;
  }
  s->ok = 1;
}

static void scopes_close(sab_env_t *e, scopes_t *s) {
  if (!s->ok) return;
  loop_failure(e, napi_close_callback_scope(e->env, s->cs));
  loop_failure(e, napi_close_handle_scope(e->env, s->hs));
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
    settle(e, a, SAB_OK);
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
    settle(e, a, SAB_TIMED_OUT);
  }
  if (opened) scopes_close(e, &s);
  timer_arm(e);
}

/* ---- the env's handles ---- */

int sab_napi_async_open(sab_env_t *e) {
  /* uv_timer_init and uv_prepare_init cannot fail; uv_async_init can (it
   * may need a file descriptor), so it goes first, with nothing to undo. */
  int r = uv_async_init(e->loop, &e->async, async_cb);
  if (r != 0) return r;
  if (uv_timer_init(e->loop, &e->timer) != 0 || uv_prepare_init(e->loop, &e->prepare) != 0) abort();
  e->async.data = e;
  e->timer.data = e;
  e->prepare.data = e;
  e->open_handles = SAB_NAPI_ASYNC_HANDLES;
  uv_unref((uv_handle_t *)&e->async);
  uv_unref((uv_handle_t *)&e->timer);
  uv_unref((uv_handle_t *)&e->prepare);
  return 0;
}

void sab_napi_async_teardown(sab_env_t *e, uv_close_cb closed) {
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
      hand_on(a);
    }
    /* The promise can no longer settle; its deferred dies with the env. */
    async_free(e, a);
  }
  uv_timer_stop(&e->timer);
  uv_prepare_stop(&e->prepare);
  uv_close((uv_handle_t *)&e->async, closed);
  uv_close((uv_handle_t *)&e->timer, closed);
  uv_close((uv_handle_t *)&e->prepare, closed);
}
