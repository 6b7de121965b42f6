/*
 * Async waiters: delivered on the env's own loop, their deadlines on one
 * uv_timer_t.
 *
 * Threads. A notify on any thread moves a record to NOTIFIED and calls
 * async_wake, which appends it to the env's delivery queue (linked by
 * w.next, free once the record left the lot) under env->mu and sends
 * env->async. Everything else here runs on the env's thread. uv_async_send
 * coalesces, so the async callback drains the whole queue each time.
 *
 * Memory. A record lives in its env's pool of its kind (pool.h) from
 * sab_napi_async_new until it settles; the address it waits on holds one
 * count of the env's keep table (keep.h) meanwhile. The notifier reads
 * only the record's w (and its pool's owner, the env) and never frees it.
 *
 * Teardown (sab_napi_async_teardown, from the env's cleanup hook): set
 * `closed` under mu, so no notifier sends to the async handle again; then
 * cancel every live record. One that a notify already took (cancel answers
 * SAB_OK) was counted as woken but will never run JS here: its wake is
 * handed on to the next waiter of its address (a hooked record's hook
 * hands it on its own way), once it has reached the delivery queue (the
 * notifier may still be between its unlock and its append, so we count
 * those records and wait on env->cv until as many have arrived). Then the
 * references, the pools and the handles go.
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

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* A JS handle: ((serial << 2 | kind) << 24) | pool id, below 2^53. */
#define HANDLE_ID_BITS 24
#define SERIAL_MASK    ((1u << 27) - 1)

static int kind_of(const sab_async_t *a) { return a->w.user8 & SAB_ASYNC_KIND_MASK; }
static sab_env_t *env_of(const sab_async_t *a) { return sab_pool_owner(&a->w); }
static sab_async_full_t *full_of(sab_async_t *a) {
  return kind_of(a) != SAB_ASYNC_PLAIN ? (sab_async_full_t *)a : NULL;
}

static sab_async_hooked_t *hooked_of(sab_async_t *a) {
  return kind_of(a) == SAB_ASYNC_HOOKED ? (sab_async_hooked_t *)a : NULL;
}

/* Take a record out of its memory's queue for `why`: SAB_OK when a wake
 * took it first (its delivery is on its way), else `why` (async.h). */
static int cancel_of(sab_async_t *a, int why) {
  sab_async_hooked_t *h = hooked_of(a);
  if (h != NULL && h->hooks->cancel != NULL) return h->hooks->cancel(a, why);
  return sab_wait_cancel(&a->w, why);
}

/* Where the record's promise's deferred is (async.h). */
static napi_deferred deferred_of(sab_async_t *a) {
  sab_async_hooked_t *h = hooked_of(a);
  return h != NULL ? h->deferred : (napi_deferred)(uintptr_t)a->w.ctx;
}

static void set_deferred(sab_async_t *a, napi_deferred d) {
  sab_async_hooked_t *h = hooked_of(a);
  if (h != NULL)
    h->deferred = d;
  else
    a->w.ctx = d;
}

/* ---- deadlines: the env's heap (heap.h) of its records' heap_index ---- */

static int heap_push(sab_env_t *e, sab_async_full_t *f, uint64_t at) {
  return sab_heap_push(&e->heap, &f->heap_index, at);
}

static void heap_remove(sab_env_t *e, sab_async_full_t *f) {
  sab_heap_remove(&e->heap, &f->heap_index);
}

/* The record of a heap entry: the container of its heap_index. */
static sab_async_full_t *heap_record(const sab_heap_entry_t *d) {
  return (sab_async_full_t *)((char *)d->index - offsetof(sab_async_full_t, heap_index));
}

static void timer_cb(uv_timer_t *t);
static void prepare_cb(uv_prepare_t *h);

/* Arm the timer for the earliest deadline. uv timers count whole ms of
 * loop time, so round up; timer_cb re-arms if it fires early anyway. */
static void timer_arm(sab_env_t *e) {
  const sab_heap_entry_t *min = sab_heap_min(&e->heap);
  if (min == NULL) {
    uv_timer_stop(&e->timer);
    return;
  }
  uint64_t now = sab_now(), d = min->at;
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
 * waiter of its address, or as its hooks say (a Sema's: its slot back).
 * The record's address is still kept, so the memory is there. */
static void hand_on(sab_async_t *a) {
  sab_async_hooked_t *h = hooked_of(a);
  if (h != NULL)
    h->hooks->hand_on(a);
  else
    sab_notify(a->w.addr, 1);
}

/* ---- records ---- */

static void async_free(sab_env_t *e, sab_async_t *a) {
  sab_async_full_t *f = full_of(a);
  if (f != NULL) heap_remove(e, f);
  sab_async_hooked_t *h = hooked_of(a);
  if (h != NULL) {
    h->hooks->done(a);
    if (h->abort_reason != NULL)
      sab_napi_note_failure(napi_delete_reference(e->env, h->abort_reason));
    h->abort_reason = NULL;
  }
  sab_napi_unkeep(e->env, &e->keep, a->w.addr);
  sab_waiter_destroy(&a->w);
  sab_pool_free(&a->w);
}

static void untrack(sab_env_t *e, sab_async_t *a) {
  if (--e->npending == 0 && !e->closed) uv_prepare_stop(&e->prepare);
  sab_async_full_t *f = full_of(a);
  if (f != NULL) heap_remove(e, f);
  if (a->w.user8 & SAB_ASYNC_KEEPS_LOOP) {
    a->w.user8 &= (uint8_t)~SAB_ASYNC_KEEPS_LOOP;
    e->nref--;
    loop_ref_update(e);
  }
}

void sab_napi_async_track(sab_env_t *e, sab_async_t *a) {
  if (e->npending++ == 0) uv_prepare_start(&e->prepare, prepare_cb);
  if (a->w.user8 & SAB_ASYNC_KEEPS_LOOP) {
    e->nref++;
    loop_ref_update(e);
  }
  sab_async_full_t *f = full_of(a);
  if (f != NULL && f->heap_index == 0) timer_arm(e);
}

/* Settle a record that left the lot with `result` (SAB_OK or
 * SAB_TIMED_OUT): resolve its promise, free it. Runs inside a handle scope
 * and a callback scope. */
static void async_wake(sab_waiter_t *w);

/* A hooked record woken with nothing to deliver: it asks again (its
 * hooks' retry), on its env's loop, with the same record; past its
 * deadline without queuing. Answers SAB_PENDING (queued again: the record
 * stays pending), or the result to settle with. */
static int retry(sab_env_t *e, sab_async_hooked_t *h) {
  sab_async_t *a = &h->full.a;
  int timed_out = h->deadline != UINT64_MAX && sab_now() >= h->deadline;
  sab_waiter_init_async(&a->w, async_wake); /* user8/user16 stay (sabsync.h) */
  return h->hooks->retry(e, a, timed_out ? NULL : &a->w);
}

/* Settle a record that left the lot with `result` (SAB_OK or
 * SAB_TIMED_OUT): resolve its promise, free it; a hooked record woken with
 * nothing to deliver asks again first. Runs inside a handle scope and a
 * callback scope. */
static void settle(sab_env_t *e, sab_async_t *a, int result) {
  napi_value v;
  napi_status st;
  sab_async_hooked_t *h = hooked_of(a);
  if (result == SAB_OK && h != NULL && h->hooks->again != NULL && h->hooks->again(a) &&
      !e->closed) {
    if (h->abort_reason != NULL) {
      /* Aborted while woken to try again: pass the wake on, reject. */
      napi_value reason;
      hand_on(a);
      untrack(e, a);
      st = napi_get_reference_value(e->env, h->abort_reason, &reason);
      if (st == napi_ok) st = napi_reject_deferred(e->env, h->deferred, reason);
      if (st != napi_ok) loop_failure(e, st);
      async_free(e, a);
      return;
    }
    /* Off the lot and off the delivery queue: it can be queued again as
     * it is. */
    result = retry(e, h);
    if (result == SAB_PENDING) {
      /* The timer may have taken it off the heap when the wake won. */
      if (h->deadline != UINT64_MAX && h->full.heap_index == UINT32_MAX) {
        if (heap_push(e, &h->full, h->deadline) != 0)
          h->deadline = UINT64_MAX;
        else if (h->full.heap_index == 0)
          timer_arm(e);
      }
      return;
    }
  }
  untrack(e, a);
  if (result == SAB_NAPI_CLOSED) {
    /* Its memory was closed while it waited (space.c): nothing to hand
     * on, and the promise rejects. */
    st = sab_napi_error(e->env, SAB_ERR_SHARED_CLOSED,
                        "the shared space was closed while this call waited", &v);
    if (st == napi_ok) st = napi_reject_deferred(e->env, deferred_of(a), v);
    loop_failure(e, st);
    async_free(e, a);
    return;
  }
  if (h != NULL && h->hooks->value != NULL) {
    st = napi_create_double(e->env, h->hooks->value(a, result), &v);
  } else {
    st = napi_create_string_utf8(e->env, sab_napi_result_name(result), NAPI_AUTO_LENGTH, &v);
  }
  if (st == napi_ok) st = napi_resolve_deferred(e->env, deferred_of(a), v);
  if (st != napi_ok) {
    if (result == SAB_OK) hand_on(a);
    loop_failure(e, st);
  }
  async_free(e, a);
}

void sab_napi_async_deliver(sab_async_t *a) { async_wake(&a->w); }

static void async_wake(sab_waiter_t *w) {
  sab_async_t *a = (sab_async_t *)w;
  sab_env_t *e = env_of(a);
  uv_mutex_lock(&e->mu);
  w->next = NULL; /* the lot is done with it (sabsync.h) */
  /* qhead is also read without the lock, by prepare_cb: store atomically. */
  if (e->qtail != NULL)
    e->qtail->w.next = w;
  else
    __atomic_store_n(&e->qhead, a, __ATOMIC_RELEASE);
  e->qtail = a;
  if (!e->closed)
    uv_async_send(&e->async);
  else
    uv_cond_broadcast(&e->cv);
  uv_mutex_unlock(&e->mu);
}

static int not_a_handle(napi_env env) {
  napi_throw_type_error(env, NULL, "handle must be a waitAsync handle");
  return -1;
}

int sab_napi_async_cancel(napi_env env, sab_env_t *e, napi_value handle, napi_value reason) {
  napi_valuetype t;
  double d;
  SAB_CALL(env, napi_typeof(env, handle, &t), -1);
  if (t != napi_number) return not_a_handle(env);
  SAB_CALL(env, napi_get_value_double(env, handle, &d), -1);
  if (!(d >= 0 && d < 9007199254740992.0) || d != floor(d)) return not_a_handle(env);
  uint64_t h = (uint64_t)d;
  uint32_t id = (uint32_t)(h & (SAB_POOL_MAX_ID - 1));
  int kind = (int)((h >> HANDLE_ID_BITS) & SAB_ASYNC_KIND_MASK);
  uint32_t serial = (uint32_t)(h >> (HANDLE_ID_BITS + 2));
  if (kind != SAB_ASYNC_FULL && kind != SAB_ASYNC_HOOKED) return not_a_handle(env);
  /* A handle whose record settled names a free slot, or another record
   * (another serial): nothing to cancel. */
  sab_async_full_t *f = (sab_async_full_t *)sab_pool_find(&e->pools[kind], id);
  if (f == NULL || f->serial != serial) return 0;
  sab_async_t *a = &f->a;
  int c = cancel_of(a, SAB_CANCELLED);
  sab_async_hooked_t *hk = hooked_of(a);
  if (c == SAB_OK && hk != NULL && hk->hooks->again != NULL && hk->hooks->again(a)) {
    /* Woken to ask again, its delivery on the way (what it was handed was
     * written under the bucket lock that the cancel took after): it will
     * reject with this reason instead of asking again. */
    if (hk->abort_reason != NULL) return 0;
    SAB_CALL(env, napi_create_reference(env, reason, 1, &hk->abort_reason), -1);
    return 1;
  }
  if (c != SAB_CANCELLED) return 0;
  untrack(e, a);
  napi_status st = napi_reject_deferred(env, deferred_of(a), reason);
  async_free(e, a);
  if (st != napi_ok) {
    sab_napi_throw_last(env, "napi_reject_deferred");
    return -1;
  }
  return 1;
}

sab_async_t *sab_napi_async_new(napi_env env, sab_env_t *e, const sab_async_hooks_t *hooks,
                                napi_value buffer, uintptr_t key, uint32_t flags, double ms,
                                const char *what, napi_value *out) {
  napi_value promise, handle, pair;
  uint64_t deadline = sab_napi_deadline(ms);
  int kind = hooks != NULL                                          ? SAB_ASYNC_HOOKED
             : deadline != UINT64_MAX || (flags & SAB_ASYNC_HANDLE) ? SAB_ASYNC_FULL
                                                                    : SAB_ASYNC_PLAIN;
  sab_async_t *a = (sab_async_t *)sab_pool_alloc(&e->pools[kind]);
  if (a == NULL) {
    sab_napi_throw(env, SAB_ERR_NOMEM, "sabsync: out of memory");
    return NULL;
  }
  sab_waiter_init_async(&a->w, async_wake);
  a->w.addr = key; /* what the enqueue sets too: the keep table's key */
  a->w.user8 = (uint8_t)(kind | ((flags & SAB_ASYNC_REF) ? SAB_ASYNC_KEEPS_LOOP : 0));
  sab_async_full_t *f = full_of(a);
  if (f != NULL) {
    f->heap_index = UINT32_MAX;
    f->serial = e->serial++ & SERIAL_MASK;
  }
  sab_async_hooked_t *h = hooked_of(a);
  if (h != NULL) {
    h->hooks = hooks;
    h->deadline = deadline;
    h->abort_reason = NULL;
    /* The caller's bytes start as zeros: `done` may see them before the
     * caller wrote them (a record discarded below). */
    memset(h->ext, 0, sizeof h->ext);
  }
  /* Everything that can fail happens before the record can be queued. */
  if (sab_napi_keep(env, &e->keep, key, buffer, what) != 0) {
    sab_pool_free(&a->w);
    return NULL;
  }
  napi_deferred deferred;
  if (napi_create_promise(env, &deferred, &promise) != napi_ok) {
    sab_napi_throw_last(env, what);
    sab_napi_unkeep(env, &e->keep, key);
    sab_pool_free(&a->w);
    return NULL;
  }
  set_deferred(a, deferred);
  if (f != NULL && deadline != UINT64_MAX && heap_push(e, f, deadline) != 0) {
    sab_napi_throw(env, SAB_ERR_NOMEM, "sabsync: out of memory");
    sab_napi_async_discard(e, a);
    return NULL;
  }
  if (!(flags & SAB_ASYNC_HANDLE)) {
    *out = promise;
    return a;
  }
  uint64_t id =
      ((uint64_t)(f->serial << 2 | (uint32_t)kind) << HANDLE_ID_BITS) | sab_pool_id(&a->w);
  if (napi_create_double(env, (double)id, &handle) != napi_ok ||
      napi_create_array_with_length(env, 2, &pair) != napi_ok ||
      napi_set_element(env, pair, 0, promise) != napi_ok ||
      napi_set_element(env, pair, 1, handle) != napi_ok) {
    sab_napi_throw_last(env, what);
    sab_napi_async_discard(e, a);
    return NULL;
  }
  *out = pair;
  return a;
}

void sab_napi_async_discard(sab_env_t *e, sab_async_t *a) {
  napi_value undef;
  napi_status st = napi_get_undefined(e->env, &undef);
  if (st == napi_ok) st = napi_resolve_deferred(e->env, deferred_of(a), undef);
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

/* The delivery queue, taken whole (mu held). */
static sab_async_t *take_queue(sab_env_t *e) {
  sab_async_t *a = e->qhead;
  __atomic_store_n(&e->qhead, NULL, __ATOMIC_RELAXED);
  e->qtail = NULL;
  return a;
}

static void deliver(sab_env_t *e) {
  uv_mutex_lock(&e->mu);
  sab_async_t *a = take_queue(e);
  uv_mutex_unlock(&e->mu);
  if (a == NULL) return;
  scopes_t s;
  scopes_open(e, &s);
  while (a != NULL) {
    sab_async_t *next = (sab_async_t *)a->w.next;
    sab_async_hooked_t *h = hooked_of(a);
    settle(e, a, h != NULL && h->hooks->arrived != NULL ? h->hooks->arrived(a) : SAB_OK);
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
  for (const sab_heap_entry_t *min; (min = sab_heap_min(&e->heap)) != NULL && min->at <= now;) {
    sab_async_full_t *f = heap_record(min);
    heap_remove(e, f);
    if (cancel_of(&f->a, SAB_TIMED_OUT) != SAB_TIMED_OUT) {
      continue; /* a notify won: the record is on its way to async_cb */
    }
    if (!opened) {
      scopes_open(e, &s);
      opened = 1;
    }
    settle(e, &f->a, SAB_TIMED_OUT);
  }
  if (opened) scopes_close(e, &s);
  timer_arm(e);
}

/* ---- the env's handles and pools ---- */

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
  sab_pool_init(&e->pools[SAB_ASYNC_PLAIN], sizeof(sab_async_t), e);
  sab_pool_init(&e->pools[SAB_ASYNC_FULL], sizeof(sab_async_full_t), e);
  sab_pool_init(&e->pools[SAB_ASYNC_HOOKED], sizeof(sab_async_hooked_t), e);
  return 0;
}

/* Teardown: cancel a live record, or count it as owed to the delivery
 * queue when a notify took it first. */
static void cancel_or_count(sab_waiter_t *w, void *arg) {
  if (cancel_of((sab_async_t *)w, SAB_CANCELLED) == SAB_OK) ++*(uint32_t *)arg;
}

void sab_napi_async_teardown(sab_env_t *e, uv_close_cb closed) {
  uint32_t owed = 0;
  uv_mutex_lock(&e->mu);
  e->closed = 1;
  uv_mutex_unlock(&e->mu);

  for (int k = 0; k < 3; k++) sab_pool_each(&e->pools[k], cancel_or_count, &owed);
  /* Each record a notify took reaches the delivery queue once: hand its
   * wake on. (The promises can no longer settle; their deferreds die with
   * the env.) */
  uv_mutex_lock(&e->mu);
  while (owed > 0) {
    while (e->qhead == NULL) uv_cond_wait(&e->cv, &e->mu);
    sab_async_t *a = take_queue(e);
    uv_mutex_unlock(&e->mu);
    for (; a != NULL; a = (sab_async_t *)a->w.next) {
      owed--;
      hand_on(a);
    }
    uv_mutex_lock(&e->mu);
  }
  uv_mutex_unlock(&e->mu);
  /* Every record is out of the lot and no notifier holds one: the memory
   * they waited on may go, and the records with it. */
  sab_napi_keep_free(e->env, &e->keep);
  for (int k = 0; k < 3; k++) sab_pool_destroy(&e->pools[k]);
  sab_heap_free(&e->heap);
  e->npending = e->nref = 0;

  uv_timer_stop(&e->timer);
  uv_prepare_stop(&e->prepare);
  uv_close((uv_handle_t *)&e->async, closed);
  uv_close((uv_handle_t *)&e->timer, closed);
  uv_close((uv_handle_t *)&e->prepare, closed);
}
