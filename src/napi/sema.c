/*
 * The binding of the token semaphore: JS values to core calls
 * (src/core/sema.c, and a shared space's src/core/space_sema.c), nothing
 * more. Each operation is one function for both memories: a Sema of this
 * process's memory, or of a shared space's (its calls pass the space's
 * handle last), whose queue records are the space's (space.h); only the
 * leaves that touch a record or the pool differ.
 *
 * lib/sema.js validates what users pass. The memory is trusted for nothing:
 * a Sema's view (base, nr) is made once from its Int32Array by
 * sab_sema_open, which checks the header against the array's size, and the
 * calls that run often take that view (a tagged external) instead of the
 * array; each call re-checks that the header still matches (sab_sema_check).
 * A broken state throws ERR_SABSYNC_BAD_MEMORY. The caller's owner id is
 * its env's.
 */
#include "async.h"
#include "park.h"
#include "register.h"
#include "results.h"
#include "space.h"
#include "values.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void bad_memory(napi_env env) {
  sab_napi_throw(env, SAB_ERR_BAD_MEMORY, "sabsync: this memory does not hold a Sema");
}

static napi_value corrupt(napi_env env) {
  sab_napi_throw(env, SAB_ERR_BAD_MEMORY, "sabsync: the Sema's shared state is corrupt");
  return NULL;
}

/*
 * A Sema's checked view, made once per JS Sema (semaView) and passed instead
 * of its Int32Array by the calls that run often, which then skip the typed
 * array lookups and the header checks (most of a call's cost). The JS Sema
 * keeps both the view and the Int32Array, so the memory outlives every call
 * that is given the view.
 */
static void view_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  free(data);
}

/* A Sema from its view or its Int32Array (`buffer` wanted: the array). */
static int get_sema(napi_env env, napi_value v, sab_sema_t *s, napi_value *buffer) {
  void *data;
  size_t bytes;
  if (buffer == NULL) {
    napi_valuetype t;
    SAB_CALL(env, napi_typeof(env, v, &t), -1);
    if (t == napi_external) {
      const sab_sema_t *view =
          sab_napi_unwrap(env, v, &sab_napi_tag_sema_view, "a Sema view or an Int32Array");
      if (view == NULL) return -1;
      /* What sab_sema_open checks that can change: the header words (the
       * memory may have been overwritten, or made a Sema anew). */
      if (sab_sema_check(view) != 0) {
        bad_memory(env);
        return -1;
      }
      *s = *view;
      return 0;
    }
  }
  if (sab_napi_int32_memory(env, v, "memory", &data, &bytes, buffer) != 0) return -1;
  if (sab_sema_open(s, data, bytes) != 0) {
    bad_memory(env);
    return -1;
  }
  return 0;
}

/* semaBytes(nr) -> bytes, 0 when nr is out of range */
static napi_value sema_bytes(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  uint32_t nr;
  SAB_CALL(env, napi_get_value_uint32(env, argv[0], &nr), NULL);
  return sab_napi_number(env, (double)sab_sema_bytes(nr));
}

/* semaInit(i32, nr) */
static napi_value sema_init(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  void *data;
  size_t bytes;
  uint32_t nr;
  sab_sema_t s;
  if (sab_napi_int32_memory(env, argv[0], "memory", &data, &bytes, NULL) != 0) return NULL;
  SAB_CALL(env, napi_get_value_uint32(env, argv[1], &nr), NULL);
  if (sab_sema_init(&s, data, bytes, nr) != 0) {
    napi_throw_range_error(env, NULL, "nr does not fit the memory");
    return NULL;
  }
  return NULL;
}

/* The fairness bound of a view (sema.c F1-F4) from JS's milliseconds:
 * 0 for a strict hand-off (RateLimit's turn), else a waiter queued that
 * long is handed tokens directly; undefined: SAB_SEMA_FAIR_NS. 0, or -1
 * with a TypeError pending. */
static int fair_ns_of(napi_env env, napi_value v, const char *what, uint64_t *ns) {
  double ms;
  napi_valuetype t;
  SAB_CALL(env, napi_typeof(env, v, &t), -1);
  if (t == napi_undefined) {
    *ns = SAB_SEMA_FAIR_NS;
    return 0;
  }
  if (napi_get_value_double(env, v, &ms) != napi_ok || !(ms >= 0 && ms <= 3.6e6)) {
    char msg[96];
    snprintf(msg, sizeof msg, "%s: fairMs must be a number of ms from 0 to 3600000", what);
    napi_throw_type_error(env, NULL, msg);
    return -1;
  }
  *ns = (uint64_t)(ms * 1e6);
  return 0;
}

/* semaView(i32, fairMs?) -> the Sema's view (throws ERR_SABSYNC_BAD_MEMORY),
 * with that fairness bound (fair_ns_of). */
static napi_value sema_view(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  sab_sema_t s;
  napi_value view;
  if (get_sema(env, argv[0], &s, NULL) != 0) return NULL;
  if (fair_ns_of(env, argv[1], "semaView", &s.fair_ns) != 0) return NULL;
  sab_sema_t *v = malloc(sizeof *v);
  if (v == NULL) {
    sab_napi_throw(env, SAB_ERR_NOMEM, "sabsync: out of memory");
    return NULL;
  }
  *v = s;
  if (napi_create_external(env, v, view_finalize, NULL, &view) != napi_ok) {
    sab_napi_throw_last(env, "semaView");
    free(v);
    return NULL;
  }
  /* On failure the external's finalizer frees v. */
  if (sab_napi_tag(env, view, &sab_napi_tag_sema_view) != 0) return NULL;
  return view;
}

/*
 * A Sema of either memory: this process's (its checked view), or a shared
 * space's (its registration and its offset in the space; the space's core
 * checks the offset and trusts nothing of the memory).
 */
typedef struct {
  sab_sema_t s;
#if defined(__linux__)
  sab_napi_reg_t *reg; /* NULL: this process's memory */
  uint32_t off;
#endif
} sema_ref_t;

#if defined(__linux__)
#define IN_SPACE(ref) ((ref)->reg != NULL)
#else
#define IN_SPACE(ref) ((void)(ref), 0)
#endif

/* A Sema from its view or Int32Array `v` (`buffer` wanted: the array's),
 * in the space `space` when argument `at` was passed and is not
 * undefined: then `v` is its offset, or its Int32Array (over the space's
 * buffer). 0, or -1 with an exception pending. */
static int get_ref(napi_env env, napi_value v, size_t argc, size_t at, napi_value space,
                   sema_ref_t *ref, napi_value *buffer) {
  napi_valuetype t = napi_undefined;
  memset(ref, 0, sizeof *ref);
  if (argc > at) SAB_CALL(env, napi_typeof(env, space, &t), -1);
#if defined(__linux__)
  if (t != napi_undefined) {
    void *data;
    size_t bytes;
    if ((ref->reg = sab_napi_space_unwrap(env, space)) == NULL) return -1;
    if (buffer == NULL) return sab_napi_get_u32(env, v, &ref->off);
    if (sab_napi_int32_memory(env, v, "memory", &data, &bytes, buffer) != 0) return -1;
    return sab_napi_space_off(env, ref->reg, data, &ref->off);
  }
#else
  if (t != napi_undefined) {
    napi_throw_type_error(env, NULL, "space must be undefined: shared spaces need Linux");
    return -1;
  }
#endif
  return get_sema(env, v, &ref->s, buffer);
}

/* A call that met `r` on a Sema: thrown where it is an error (a broken
 * state; in a space, no free record, or a bookkeeping lock a live holder
 * kept), naming `what`. Answers whether it threw. */
static int sema_failed(napi_env env, const sema_ref_t *ref, int r, const char *what) {
  (void)what;
  if (!IN_SPACE(ref)) {
    if (r == SAB_E_CORRUPT) corrupt(env);
    return r == SAB_E_CORRUPT;
  }
#if defined(__linux__)
  if (r != SAB_E_CORRUPT && r != SAB_E_SPACE_FULL && r != SAB_E_SPACE_BUSY) return 0;
  sab_napi_throw_core(env, r, what);
#endif
  return 1;
}

#if defined(__linux__)
/* How long a try waits for a space's bookkeeping lock: a live holder
 * keeps one for microseconds unless it is preempted or stopped, and a try
 * answers at once. */
#define TRY_LOCK_NS (10ull * 1000000ull)
#endif

/* semaTry(view or i32 | off[, space]) -> OK with the token in out[0], or
 * TIMED_OUT when none is free (or others wait). */
static napi_value sema_try(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  sab_env_t *e;
  sema_ref_t ref;
  uint32_t token = SAB_SEMA_NO_TOKEN;
  int r;
  if ((e = sab_napi_env_get(env)) == NULL || get_ref(env, argv[0], argc, 1, argv[1], &ref, NULL))
    return NULL;
#if defined(__linux__)
  if (IN_SPACE(&ref)) {
    uint64_t old = sab_space_deadline(sab_now() + TRY_LOCK_NS);
    r = sab_space_sema_acquire(ref.reg->sp, ref.reg->id, ref.off, 0, &token, NULL);
    sab_space_deadline(old);
    /* SAB_E_SPACE_BUSY: a live holder keeps the lock; a try answers none. */
    if (r == SAB_E_SPACE_BUSY) r = SAB_TIMED_OUT;
  } else
#endif
    r = sab_sema_try(&ref.s, e->id, &token);
  if (sema_failed(env, &ref, r, "Sema")) return NULL;
  return sab_napi_token_result(env, r == SAB_OK, token);
}

/*
 * One ask of a blocking acquire, queued (`queue`) or not: parks until its
 * record is handed a slot or woken, or `deadline`. Answers SAB_OK with
 * *token a slot, or SAB_SEMA_NO_TOKEN (woken to try again, as a release
 * that left the slot to running threads does, or a bookkeeping lock a live
 * holder kept: ask again); SAB_TIMED_OUT; a code to throw; or
 * SAB_NAPI_TERMINATED, the thread torn down, with a slot it was handed
 * given back, a wake to try again passed on, and an exception pending.
 */
static int ask_once(sab_env_t *e, const sema_ref_t *ref, sab_sema_ask_t *ask, int queue,
                    uint64_t deadline, uint32_t *token) {
  int r, woken = 0;
  *token = SAB_SEMA_NO_TOKEN;
  (void)ref;
#if defined(__linux__)
  if (IN_SPACE(ref)) {
    sab_napi_reg_t *reg = ref->reg;
    uint32_t rec;
    r = sab_space_sema_acquire(reg->sp, reg->id, ref->off, 0, token, queue ? &rec : NULL);
    if (r == SAB_E_SPACE_BUSY) {
      int again = sab_napi_space_busy_again(e, deadline);
      return again < 0 ? SAB_NAPI_TERMINATED : again == 0 ? SAB_TIMED_OUT : SAB_OK;
    }
    if (r != SAB_PENDING) return r;
    sab_napi_space_parker_t p;
    sab_napi_space_parker_init(&p, reg, rec, ref->off, 0, 0, token);
    r = sab_napi_park_on(e, &p.base, deadline, &woken);
    if (r == SAB_NAPI_TERMINATED && woken)
      sab_space_sema_give_back(reg->sp, reg->id, ref->off, *token);
    return r;
  }
#endif
  sab_waiter_t w;
  sab_waiter_init_blocking(&w);
  r = sab_sema_ask(ask, e->id, queue ? &w : NULL, token); /* SAB_OK sets token */
  if (r == SAB_PENDING) {
    r = sab_napi_park(e, &w, deadline, &woken);
    *token = w.token;
  }
  sab_waiter_destroy(&w);
  if (r == SAB_NAPI_TERMINATED && woken) sab_sema_give_back(ask, e->id, *token);
  return r;
}

/*
 * semaAcquire(view or i32 | off, timeoutMs[, space]) -> OK with the token
 * in out[0], or TIMED_OUT. Parks with the binding's one park loop: a thread
 * torn down meanwhile leaves the queue, gives back a slot handed over to
 * it, and returns with the exception pending. A space's waiters probe its
 * holders' lifelines meanwhile (a holder killed with SIGKILL gives its
 * slot back when found).
 */
static napi_value sema_acquire(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 3, NULL);
  sab_env_t *e;
  sema_ref_t ref;
  double ms;
  uint32_t token = SAB_SEMA_NO_TOKEN;
  if ((e = sab_napi_env_get(env)) == NULL || get_ref(env, argv[0], argc, 2, argv[2], &ref, NULL))
    return NULL;
  SAB_CALL(env, napi_get_value_double(env, argv[1], &ms), NULL);
  uint64_t deadline = sab_napi_deadline(ms);
  sab_sema_ask_t ask; /* its since: when this call first asked (sema.c F2) */
  sab_sema_ask_init(&ask, &ref.s);
#if defined(__linux__)
  uint64_t old = sab_space_deadline(UINT64_MAX);
  if (IN_SPACE(&ref)) sab_napi_space_lock_deadline(deadline);
#endif
  int r;
  for (;;) {
    r = ask_once(e, &ref, &ask, 1, deadline, &token);
    /* Woken without a slot (to try again; the park has looked for
     * termination after the wake): ask again in the same place, and once
     * more even past the deadline (F4). */
    if (r != SAB_OK || token != SAB_SEMA_NO_TOKEN) break;
    if (sab_now() >= deadline) {
      r = ask_once(e, &ref, &ask, 0, deadline, &token);
      break;
    }
  }
#if defined(__linux__)
  sab_space_deadline(old);
#endif
  if (r == SAB_NAPI_TERMINATED || sema_failed(env, &ref, r, "Sema acquire")) return NULL;
  if (r != SAB_OK || token == SAB_SEMA_NO_TOKEN) return sab_napi_number(env, SAB_TIMED_OUT);
#if defined(__linux__)
  if (IN_SPACE(&ref) && sab_napi_env_terminating(e)) {
    /* Taken as the thread is torn down: JS would never see it, and the
     * space's owner id outlives this thread only until its close. */
    sab_space_sema_give_back(ref.reg->sp, ref.reg->id, ref.off, token);
    return NULL;
  }
#endif
  return sab_napi_token_result(env, 1, token);
}

/*
 * An async acquire's record (async.h, hooked). In this process's memory:
 * its ask, in the record's own bytes (w.ctx points there while queued).
 * Woken without a slot, to try again (F2), it asks again on its env's loop
 * in the place its first ask gave it (the ask's `since`); past its
 * deadline once without queuing (F4). A slot it was handed and will never
 * deliver goes back. In a space: the space's record (space.h), which asks
 * again the same way through the space's Sema.
 */
_Static_assert(sizeof(sab_sema_ask_t) <= SAB_ASYNC_EXT_BYTES, "a Sema's ask fits a hooked record");

static sab_sema_ask_t *ask_of(const sab_async_t *a) {
  return (sab_sema_ask_t *)sab_async_ext((sab_async_t *)a);
}

static int acquire_again(const sab_async_t *a) { return a->w.token == SAB_SEMA_NO_TOKEN; }

static int acquire_retry(sab_env_t *e, sab_async_t *a, sab_waiter_t *w) {
  uint32_t token = SAB_SEMA_NO_TOKEN;
  int r = sab_sema_ask(ask_of(a), e->id, w, &token);
  if (r == SAB_PENDING) return r;
  /* SAB_SEMA_NO_TOKEN on a broken state: the JS acquire asks anew and
   * throws. */
  a->w.token = r == SAB_OK ? token : SAB_SEMA_NO_TOKEN;
  return r == SAB_TIMED_OUT ? SAB_TIMED_OUT : SAB_OK;
}

static void acquire_hand_on(sab_async_t *a) {
  sab_sema_give_back(ask_of(a), a->w.owner, a->w.token);
}

/* Woken to try again and settled otherwise (its env closed, an abort):
 * its ask leaves the Sema's list of retries (F5), and the wake goes on. */
static void acquire_done(sab_async_t *a) { sab_sema_ask_done(ask_of(a)); }

/* The promise's value: a token, or why there is none. */
static double token_value(int result, uint32_t token) {
  return result != SAB_OK             ? SAB_NAPI_SEMA_TIMED_OUT
         : token == SAB_SEMA_NO_TOKEN ? SAB_NAPI_SEMA_NO_TOKEN
                                      : (double)token;
}

static double acquire_value(const sab_async_t *a, int result) {
  return token_value(result, a->w.token);
}

static const sab_async_hooks_t acquire_hooks = {
    NULL, NULL, acquire_again, acquire_retry, acquire_hand_on, acquire_done, acquire_value};

#if defined(__linux__)
static int space_acquire_again(const sab_async_t *a) {
  const sab_napi_space_async_t *sx = sab_napi_space_async_of(a);
  return sx->reg != NULL && sx->token == SAB_SEMA_NO_TOKEN;
}

/* Queue a space's acquire record `a` (its bytes begun, the registration
 * locked: sab_napi_space_async_begin), or take a slot at once: as
 * sab_space_sema_acquire, and unlocked. */
static int space_ask(sab_async_t *a, uint32_t *token) {
  sab_napi_space_async_t *sx = sab_napi_space_async_of(a);
  sab_napi_reg_t *reg = sx->reg;
  uint32_t rec = 0;
  int r = sab_space_sema_acquire(reg->sp, reg->id, sx->off, SAB_SPACE_ASYNC, token, &rec);
  sab_napi_space_async_end(a, r, rec);
  return r;
}

static int space_acquire_retry(sab_env_t *e, sab_async_t *a, sab_waiter_t *w) {
  (void)e;
  sab_napi_space_async_t *sx = sab_napi_space_async_of(a);
  sab_napi_reg_t *reg = sx->reg;
  uint32_t token = SAB_SEMA_NO_TOKEN;
  uint64_t old = sab_napi_space_async_bound(a);
  int r;
  if (w == NULL) {
    /* Past its deadline: one more try, without queuing (F4). */
    r = sab_space_sema_acquire(reg->sp, reg->id, sx->off, 0, &token, NULL);
  } else {
    pthread_mutex_lock(&reg->mu);
    r = space_ask(a, &token);
  }
  sab_space_deadline(old);
  if (r == SAB_PENDING) return r;
  /* Anything else than a slot (no slot past the deadline: timed out; no
   * free record, a kept lock, a broken state): the JS acquire asks anew,
   * and throws what there is to throw. */
  sx->token = r == SAB_OK ? token : SAB_SEMA_NO_TOKEN;
  return r == SAB_OK || w != NULL ? SAB_OK : SAB_TIMED_OUT;
}

static double space_acquire_value(const sab_async_t *a, int result) {
  return token_value(result, sab_napi_space_async_of(a)->token);
}

static const sab_async_hooks_t space_acquire_hooks = {
    sab_napi_space_async_cancel, sab_napi_space_async_arrived, space_acquire_again,
    space_acquire_retry,         sab_napi_space_async_hand_on, sab_napi_space_async_done,
    space_acquire_value};
#endif

/* Ask for a slot with the new record `a`: SAB_PENDING (queued), SAB_OK
 * with *token, or another answer of the memory's acquire. */
static int ask_async(napi_env env, sab_env_t *e, sab_async_t *a, const sema_ref_t *ref,
                     uint64_t deadline, uint32_t *token) {
#if defined(__linux__)
  if (IN_SPACE(ref)) {
    uint64_t old = sab_space_deadline(UINT64_MAX);
    sab_napi_space_lock_deadline(deadline);
    int r = sab_napi_space_async_begin(env, ref->reg, a, ref->off, 0, 0, 1) != 0
                ? SAB_NAPI_TERMINATED
                : space_ask(a, token);
    sab_space_deadline(old);
    return r;
  }
#endif
  (void)env;
  (void)deadline;
  sab_sema_ask_init(ask_of(a), &ref->s); /* w.ctx points here while queued */
  return sab_sema_ask(ask_of(a), e->id, &a->w, token);
}

/*
 * semaAcquireAsync(i32, timeoutMs, flags, fairMs?[, space]) -> a token (a
 * slot was free), or the promise, or [promise, handle] with
 * SAB_ASYNC_HANDLE; SAB_ASYNC_REF: keep the loop alive. fairMs: as
 * semaView's. timeoutMs > 0 (JS tries first for 0). A record woken to try
 * again asks again on the loop (async.c retry). The promise resolves with
 * the token, SAB_NAPI_SEMA_TIMED_OUT, or SAB_NAPI_SEMA_NO_TOKEN (woken
 * without one: acquire again); a space's rejects with
 * ERR_SABSYNC_SHARED_CLOSED when the space is closed meanwhile. Answers
 * SAB_NAPI_SEMA_TIMED_OUT at once when a live holder kept a space's
 * bookkeeping lock past the timeout.
 */
static napi_value sema_acquire_async(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 5, NULL);
  sab_env_t *e;
  double ms;
  uint32_t flags, token = SAB_SEMA_NO_TOKEN;
  napi_value buffer, result;
  sema_ref_t ref;
  if ((e = sab_napi_env_get(env)) == NULL) return NULL;
  SAB_CALL(env, napi_get_value_double(env, argv[1], &ms), NULL);
  SAB_CALL(env, napi_get_value_uint32(env, argv[2], &flags), NULL);
  if (get_ref(env, argv[0], argc, 4, argv[4], &ref, &buffer) != 0) return NULL;
  const sab_async_hooks_t *hooks = &acquire_hooks;
  /* Queued, a record's key is the Sema's (sabsync.h). */
  uintptr_t key = (uintptr_t)ref.s.base + SAB_SEMA_KEY_OFFSET;
#if defined(__linux__)
  if (IN_SPACE(&ref)) {
    hooks = &space_acquire_hooks;
    key = (uintptr_t)ref.reg->info.base + ref.off;
  }
#endif
  if (!IN_SPACE(&ref) && fair_ns_of(env, argv[3], "semaAcquireAsync", &ref.s.fair_ns) != 0)
    return NULL;
  uint64_t deadline = sab_napi_deadline(ms);
  sab_async_t *a =
      sab_napi_async_new(env, e, hooks, buffer, key, flags, ms, "semaAcquireAsync", &result);
  if (a == NULL) return NULL;
  int r = ask_async(env, e, a, &ref, deadline, &token);
  if (r == SAB_PENDING) {
    sab_napi_async_track(e, a);
    return result;
  }
  /* Not queued: the promise is never handed out. */
  sab_napi_async_discard(e, a);
  if (r == SAB_NAPI_TERMINATED) return NULL;
#if defined(__linux__)
  /* A live holder kept a space's bookkeeping lock past the timeout. */
  if (r == SAB_E_SPACE_BUSY && sab_now() >= deadline)
    return sab_napi_number(env, SAB_NAPI_SEMA_TIMED_OUT);
#endif
  if (sema_failed(env, &ref, r, "Sema acquire")) return NULL;
  return sab_napi_number(env, token);
}

/*
 * semaRelease(view or i32 | off, slot[, space]) -> OK with the info bits
 * (SAB_SEMA_HANDED_SELF, SAB_SEMA_POOLED) in out[0] and the slot in
 * out[1], or BAD_TOKEN: not a slot this thread holds. slot -1: the one
 * this thread got most recently.
 */
static napi_value sema_release(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 3, NULL);
  sab_env_t *e;
  sema_ref_t ref;
  int64_t slot;
  uint32_t bits = 0;
  int r;
  if ((e = sab_napi_env_get(env)) == NULL || get_ref(env, argv[0], argc, 2, argv[2], &ref, NULL))
    return NULL;
  SAB_CALL(env, napi_get_value_int64(env, argv[1], &slot), NULL);
#if defined(__linux__)
  if (IN_SPACE(&ref))
    r = sab_space_sema_release(ref.reg->sp, ref.reg->id, ref.off, slot < 0 ? -1 : slot, &bits);
  else
#endif
    r = sab_sema_release(&ref.s, e->id, slot < 0 ? -1 : slot, &bits);
  if (sema_failed(env, &ref, r, "Sema release")) return NULL;
  return sab_napi_release_result(env, r, bits);
}

/* semaWaiting(view or i32 | off[, space]) -> queued waiters of every
 * thread (every process of a space) */
static napi_value sema_waiting(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  sema_ref_t ref;
  if (get_ref(env, argv[0], argc, 1, argv[1], &ref, NULL) != 0) return NULL;
#if defined(__linux__)
  if (IN_SPACE(&ref)) return sab_napi_number(env, sab_space_sema_waiting(ref.reg->sp, ref.off));
#endif
  return sab_napi_number(env, sab_sema_waiting(&ref.s));
}

/* semaAvailable(view or i32 | off[, space]) -> slots in the pool, after
 * reclaiming dead holders' */
static napi_value sema_available(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  sema_ref_t ref;
  int r;
  if (get_ref(env, argv[0], argc, 1, argv[1], &ref, NULL) != 0) return NULL;
#if defined(__linux__)
  if (IN_SPACE(&ref))
    r = sab_space_sema_available(ref.reg->sp, ref.off);
  else
#endif
    r = sab_sema_available(&ref.s);
  if (r < 0) {
    if (!sema_failed(env, &ref, r, "Sema")) sema_failed(env, &ref, SAB_E_CORRUPT, "Sema");
    return NULL;
  }
  return sab_napi_number(env, r);
}

/* semaKick(view) -> slots that came back from dead holders. lib/sema.js
 * calls it after a give-back of its own (the fast path) that found the
 * waiters' counter raised: free slots go to the oldest waiters (sema.c K2). */
static napi_value sema_kick(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_sema_t s;
  if (get_sema(env, argv[0], &s, NULL) != 0) return NULL;
  return sab_napi_number(env, sab_sema_kick(&s));
}

int sab_napi_sema_register(napi_env env, napi_value exports) {
  static const sab_napi_fn_t fns[] = {
      {"semaBytes", sema_bytes},         {"semaInit", sema_init},
      {"semaView", sema_view},           {"semaTry", sema_try},
      {"semaAcquire", sema_acquire},     {"semaAcquireAsync", sema_acquire_async},
      {"semaRelease", sema_release},     {"semaWaiting", sema_waiting},
      {"semaAvailable", sema_available}, {"semaKick", sema_kick},
  };
  return sab_napi_add_functions(env, exports, fns, sizeof fns / sizeof fns[0]);
}
