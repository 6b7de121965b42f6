/*
 * The binding of the token semaphore: JS values to core calls
 * (src/core/sema.c), nothing more.
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

/* semaTry(view or i32) -> OK with the token in out[0], or TIMED_OUT when
 * none is free (or others wait). */
static napi_value sema_try(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_env_t *e;
  sab_sema_t s;
  uint32_t token;
  if ((e = sab_napi_env_get(env)) == NULL || get_sema(env, argv[0], &s, NULL) != 0) return NULL;
  int r = sab_sema_try(&s, e->id, &token);
  if (r == SAB_E_CORRUPT) return corrupt(env);
  return sab_napi_token_result(env, r == SAB_OK, token);
}

/*
 * semaAcquire(view or i32, timeoutMs) -> OK with the token in out[0], or
 * TIMED_OUT. Parks
 * with sab_napi_park: a thread torn down meanwhile leaves the queue, gives
 * back a slot handed over to it, and returns with the exception pending.
 */
static napi_value sema_acquire(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  sab_env_t *e;
  sab_sema_t s;
  double ms;
  uint32_t token = SAB_SEMA_NO_TOKEN;
  if ((e = sab_napi_env_get(env)) == NULL || get_sema(env, argv[0], &s, NULL) != 0) return NULL;
  SAB_CALL(env, napi_get_value_double(env, argv[1], &ms), NULL);
  uint64_t deadline = sab_napi_deadline(ms);
  sab_sema_ask_t ask; /* its since: when this call first asked (sema.c F2) */
  sab_sema_ask_init(&ask, &s);
  int r;
  for (;;) {
    sab_waiter_t w;
    int woken = 0;
    sab_waiter_init_blocking(&w);
    r = sab_sema_ask(&ask, e->id, &w, &token); /* SAB_OK sets token */
    if (r == SAB_PENDING) {
      r = sab_napi_park(e, &w, deadline, &woken);
      token = w.token;
    }
    sab_waiter_destroy(&w);
    if (r == SAB_NAPI_TERMINATED) {
      /* A slot handed over goes back; a wake to try again is passed on. */
      if (woken) sab_sema_give_back(&ask, e->id, token);
      return NULL;
    }
    /* Woken without a slot (to try again, as a release that left the slot
     * to running threads does, or by a raw notify on the waiters' key;
     * sab_napi_park has looked for termination after the wake): ask again
     * in the same place, and once more even past the deadline (F4). */
    if (r != SAB_OK || token != SAB_SEMA_NO_TOKEN) break;
    if (sab_now() >= deadline) {
      r = sab_sema_ask(&ask, e->id, NULL, &token);
      break;
    }
  }
  if (r == SAB_E_CORRUPT) return corrupt(env);
  return sab_napi_token_result(env, r == SAB_OK, token);
}

/*
 * An async acquire's record (async.h, hooked): its ask, in the record's
 * own bytes (w.ctx points there while queued). Woken without a slot, to
 * try again (F2), it asks again on its env's loop in the place its first
 * ask gave it (the ask's `since`); past its deadline once without queuing
 * (F4). A slot it was handed and will never deliver goes back.
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

static double acquire_value(const sab_async_t *a, int result) {
  return result != SAB_OK                  ? SAB_NAPI_SEMA_TIMED_OUT
         : a->w.token == SAB_SEMA_NO_TOKEN ? SAB_NAPI_SEMA_NO_TOKEN
                                           : (double)a->w.token;
}

static const sab_async_hooks_t acquire_hooks = {acquire_again, acquire_retry, acquire_hand_on,
                                                acquire_done, acquire_value};

/*
 * semaAcquireAsync(i32, timeoutMs, flags, fairMs?) -> a token (a slot was
 * free), or the promise, or [promise, handle] with SAB_ASYNC_HANDLE;
 * SAB_ASYNC_REF: keep the loop alive. fairMs: as semaView's. timeoutMs > 0
 * (JS tries first for 0). A record woken to try again asks again on the
 * loop (async.c, sema_retry). The promise
 * resolves with the token, SAB_NAPI_SEMA_TIMED_OUT, or
 * SAB_NAPI_SEMA_NO_TOKEN (woken without one: acquire again).
 */
static napi_value sema_acquire_async(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 4, NULL);
  sab_env_t *e;
  double ms;
  uint32_t flags, token;
  napi_value buffer, result;
  if ((e = sab_napi_env_get(env)) == NULL) return NULL;
  SAB_CALL(env, napi_get_value_double(env, argv[1], &ms), NULL);
  SAB_CALL(env, napi_get_value_uint32(env, argv[2], &flags), NULL);
  sab_sema_t s;
  if (get_sema(env, argv[0], &s, &buffer) != 0) return NULL;
  if (fair_ns_of(env, argv[3], "semaAcquireAsync", &s.fair_ns) != 0) return NULL;
  /* Queued, the record's key is the Sema's (sabsync.h); a token it cannot
   * deliver goes back (acquire_hand_on). */
  sab_async_t *a =
      sab_napi_async_new(env, e, &acquire_hooks, buffer, (uintptr_t)s.base + SAB_SEMA_KEY_OFFSET,
                         flags, ms, "semaAcquireAsync", &result);
  if (a == NULL) return NULL;
  sab_sema_ask_init(ask_of(a), &s); /* w.ctx points here while queued */
  int r = sab_sema_ask(ask_of(a), e->id, &a->w, &token);
  if (r != SAB_PENDING) {
    /* Not queued: the promise is never handed out. */
    sab_napi_async_discard(e, a);
    if (r == SAB_E_CORRUPT) return corrupt(env);
    return sab_napi_number(env, token);
  }
  sab_napi_async_track(e, a);
  return result;
}

/*
 * semaRelease(view or i32, slot) -> OK with the info bits
 * (SAB_SEMA_HANDED_SELF, SAB_SEMA_POOLED) in out[0] and the slot in out[1],
 * or BAD_TOKEN: not a slot this thread holds. slot -1: the one this thread
 * got most recently.
 */
static napi_value sema_release(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  sab_env_t *e;
  sab_sema_t s;
  int64_t slot;
  uint32_t bits = 0;
  if ((e = sab_napi_env_get(env)) == NULL || get_sema(env, argv[0], &s, NULL) != 0) return NULL;
  SAB_CALL(env, napi_get_value_int64(env, argv[1], &slot), NULL);
  int r = sab_sema_release(&s, e->id, slot < 0 ? -1 : slot, &bits);
  if (r == SAB_E_CORRUPT) return corrupt(env);
  return sab_napi_release_result(env, r, bits);
}

/* semaWaiting(view or i32) -> queued waiters of every thread */
static napi_value sema_waiting(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_sema_t s;
  if (get_sema(env, argv[0], &s, NULL) != 0) return NULL;
  return sab_napi_number(env, sab_sema_waiting(&s));
}

/* semaAvailable(view or i32) -> slots in the pool, after reclaiming dead holders' */
static napi_value sema_available(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_sema_t s;
  if (get_sema(env, argv[0], &s, NULL) != 0) return NULL;
  int r = sab_sema_available(&s);
  if (r < 0) return corrupt(env);
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

#if defined(__linux__)

/* ---- a Sema in a shared space (src/core/space_sema.c, space.h) ---- */

static napi_value sema_corrupt(napi_env env) {
  sab_napi_throw_core(env, SAB_E_CORRUPT, "Sema");
  return NULL;
}

/* (handle, off) of a Sema in a space. */
static sab_napi_reg_t *sema_args(napi_env env, napi_value h, napi_value voff, uint32_t *off) {
  sab_napi_reg_t *reg = sab_napi_space_unwrap(env, h);
  if (reg == NULL || sab_napi_get_u32(env, voff, off) != 0) return NULL;
  return reg;
}

/* How long a try waits for a bookkeeping lock: a live holder keeps one
 * for microseconds unless it is preempted or stopped, and a try answers
 * at once. */
#define TRY_LOCK_NS (10ull * 1000000ull)

/* spaceSemaTry(handle, off) -> OK with the token in out[0], or TIMED_OUT
 * when none is free (or others wait) */
static napi_value space_sema_try(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  uint32_t off, token;
  sab_napi_reg_t *reg = sema_args(env, argv[0], argv[1], &off);
  if (reg == NULL) return NULL;
  uint64_t old = sab_space_deadline(sab_now() + TRY_LOCK_NS);
  int r = sab_space_sema_acquire(reg->sp, reg->id, off, 0, &token, NULL);
  sab_space_deadline(old);
  if (r == SAB_E_CORRUPT) return sema_corrupt(env);
  /* SAB_E_SPACE_BUSY: a live holder keeps the lock; a try answers none. */
  return sab_napi_token_result(env, r == SAB_OK, token);
}

/* spaceSemaAcquire(handle, off, timeoutMs) -> OK with the token in out[0],
 * or TIMED_OUT. Blocks
 * in slices as spaceWait does, probing lifelines meanwhile (a holder killed
 * with SIGKILL gives its slot back when found). */
static napi_value space_sema_acquire_in(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 3, NULL);
  uint32_t off, token = SAB_SEMA_NO_TOKEN, rec;
  double ms;
  sab_napi_reg_t *reg = sema_args(env, argv[0], argv[1], &off);
  sab_env_t *e = reg != NULL ? sab_napi_space_env(env) : NULL;
  if (e == NULL || sab_napi_get_double(env, argv[2], &ms) != 0) return NULL;
  uint64_t deadline = sab_napi_deadline(ms);
  sab_napi_space_lock_deadline(deadline);
  int r, again;
  for (;;) {
    r = sab_space_sema_acquire(reg->sp, reg->id, off, 0, &token, &rec);
    if (r == SAB_E_SPACE_BUSY) {
      if ((again = sab_napi_space_busy_again(e, deadline)) < 0) return NULL;
      if (again == 0) break; /* its timeout's answer */
      continue;
    }
    if (r == SAB_PENDING) {
      sab_napi_space_parker_t p;
      int woken = 0;
      sab_napi_space_parker_init(&p, reg, rec, off, 0, 0, &token);
      r = sab_napi_park_on(e, &p.base, deadline, &woken);
      if (r == SAB_NAPI_TERMINATED) {
        /* A slot handed over goes back; a wake to try again is passed on
         * (F4). */
        if (woken) sab_space_sema_give_back(reg->sp, reg->id, off, token);
        return NULL;
      }
    }
    /* Woken without a slot, to try again (F2; the park has looked for
     * termination after the wake): ask again. */
    if (r != SAB_OK || token != SAB_SEMA_NO_TOKEN) break;
  }
  if (r == SAB_E_CORRUPT) return sema_corrupt(env);
  if (r == SAB_E_SPACE_FULL) {
    sab_napi_throw_core(env, r, "Sema acquire");
    return NULL;
  }
  if (r != SAB_OK) return sab_napi_number(env, SAB_TIMED_OUT);
  if (sab_napi_env_terminating(e)) {
    /* Taken as the thread is torn down: JS would never see it. */
    sab_space_sema_give_back(reg->sp, reg->id, off, token);
    return NULL;
  }
  return sab_napi_token_result(env, 1, token);
}

static napi_value space_sema_acquire(napi_env env, napi_callback_info info) {
  return sab_napi_space_blocking(env, info, space_sema_acquire_in);
}

/* spaceSemaAcquireAsync(handle, off, proxy, timeoutMs) -> OK with a token
 * in out[0] (one was free), PENDING with the record in out[0]: queued, its
 * slot delivered through `proxy` (as spaceWaitAsync), then taken with
 * spaceSemaSettle; or TIMED_OUT: a live holder kept the bookkeeping lock
 * past the call's timeout. */
static napi_value space_sema_acquire_async_in(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 4, NULL);
  uint32_t off, token, rec;
  double ms;
  sab_napi_reg_t *reg = sema_args(env, argv[0], argv[1], &off);
  if (reg == NULL || sab_napi_get_double(env, argv[3], &ms) != 0) return NULL;
  uint64_t deadline = sab_napi_deadline(ms);
  sab_napi_space_lock_deadline(deadline);
  sab_napi_pending_t *p = sab_napi_space_pending_new(env, reg, argv[2]);
  if (p == NULL) return NULL;
  p->off = off;
  p->flags = SAB_SPACE_SEMA;
  pthread_mutex_lock(&reg->mu);
  int r = sab_space_sema_acquire(reg->sp, reg->id, off, SAB_SPACE_ASYNC, &token, &rec);
  int wake = r == SAB_PENDING && sab_napi_space_pending_add(reg, p, rec);
  pthread_mutex_unlock(&reg->mu);
  if (wake) sab_napi_space_ring(reg);
  if (r == SAB_PENDING) return sab_napi_result1(env, SAB_PENDING, rec);
  sab_napi_space_pending_free(reg, p);
  if (r == SAB_E_CORRUPT) return sema_corrupt(env);
  if (r == SAB_E_SPACE_BUSY && sab_now() >= deadline) return sab_napi_number(env, SAB_TIMED_OUT);
  if (r != SAB_OK) { /* SAB_E_SPACE_FULL, SAB_E_SPACE_BUSY */
    sab_napi_throw_core(env, r, "Sema acquire");
    return NULL;
  }
  return sab_napi_result1(env, SAB_OK, token);
}

static napi_value space_sema_acquire_async(napi_env env, napi_callback_info info) {
  return sab_napi_space_blocking(env, info, space_sema_acquire_async_in);
}

/* spaceSemaSettle(handle, rec, why) -> OK with the token the record was
 * handed in out[0], TIMED_OUT (it left the queue by its deadline or an
 * abort), or SEMA_NO_TOKEN (woken without a slot: acquire again). */
static napi_value space_sema_settle(napi_env env, napi_callback_info info) {
  uint32_t token = SAB_SEMA_NO_TOKEN;
  int r;
  if (sab_napi_space_settle(env, info, &token, &r) != 0) return NULL;
  if (r != SAB_OK) return sab_napi_number(env, SAB_TIMED_OUT);
  if (token == SAB_SEMA_NO_TOKEN) return sab_napi_number(env, SAB_NAPI_SEMA_NO_TOKEN);
  return sab_napi_result1(env, SAB_OK, token);
}

/* spaceSemaPassWake(handle, off): an async acquire woken to try again
 * (spaceSemaSettle answered SEMA_NO_TOKEN) that will not, because it was
 * aborted, passes its wake on to the next waiter (F4). */
static napi_value space_sema_pass_wake(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  uint32_t off;
  sab_napi_reg_t *reg = sema_args(env, argv[0], argv[1], &off);
  if (reg == NULL) return NULL;
  sab_space_sema_give_back(reg->sp, reg->id, off, SAB_SEMA_NO_TOKEN);
  return NULL;
}

/* spaceSemaRelease(handle, off, slot) -> as semaRelease: OK with the info
 * bits in out[0] and the slot in out[1], or BAD_TOKEN (not a slot this
 * thread holds); slot -1: the one it got most recently. */
static napi_value space_sema_release(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 3, NULL);
  uint32_t off, bits = 0;
  int64_t slot;
  sab_napi_reg_t *reg = sema_args(env, argv[0], argv[1], &off);
  if (reg == NULL) return NULL;
  SAB_CALL(env, napi_get_value_int64(env, argv[2], &slot), NULL);
  int r = sab_space_sema_release(reg->sp, reg->id, off, slot < 0 ? -1 : slot, &bits);
  if (r == SAB_E_CORRUPT) return sema_corrupt(env);
  if (r == SAB_E_SPACE_BUSY) {
    sab_napi_throw_core(env, r, "Sema release");
    return NULL;
  }
  return sab_napi_release_result(env, r, bits);
}

/* spaceSemaWaiting(handle, off) -> queued acquires, every process */
static napi_value space_sema_waiting(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  uint32_t off;
  sab_napi_reg_t *reg = sema_args(env, argv[0], argv[1], &off);
  return reg != NULL ? sab_napi_number(env, sab_space_sema_waiting(reg->sp, off)) : NULL;
}

/* spaceSemaAvailable(handle, off) -> pooled slots, after reclaiming the dead's */
static napi_value space_sema_available(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  uint32_t off;
  sab_napi_reg_t *reg = sema_args(env, argv[0], argv[1], &off);
  if (reg == NULL) return NULL;
  int r = sab_space_sema_available(reg->sp, off);
  if (r == SAB_E_SPACE_BUSY) {
    sab_napi_throw_core(env, r, "Sema");
    return NULL;
  }
  return r < 0 ? sema_corrupt(env) : sab_napi_number(env, r);
}

static int space_register(napi_env env, napi_value exports) {
  static const sab_napi_fn_t fns[] = {
      {"spaceSemaTry", space_sema_try},
      {"spaceSemaAcquire", space_sema_acquire},
      {"spaceSemaAcquireAsync", space_sema_acquire_async},
      {"spaceSemaSettle", space_sema_settle},
      {"spaceSemaPassWake", space_sema_pass_wake},
      {"spaceSemaRelease", space_sema_release},
      {"spaceSemaWaiting", space_sema_waiting},
      {"spaceSemaAvailable", space_sema_available},
  };
  return sab_napi_add_functions(env, exports, fns, sizeof fns / sizeof fns[0]);
}

#endif /* __linux__ */

int sab_napi_sema_register(napi_env env, napi_value exports) {
  static const sab_napi_fn_t fns[] = {
      {"semaBytes", sema_bytes},         {"semaInit", sema_init},
      {"semaView", sema_view},           {"semaTry", sema_try},
      {"semaAcquire", sema_acquire},     {"semaAcquireAsync", sema_acquire_async},
      {"semaRelease", sema_release},     {"semaWaiting", sema_waiting},
      {"semaAvailable", sema_available}, {"semaKick", sema_kick},
  };
  if (sab_napi_add_functions(env, exports, fns, sizeof fns / sizeof fns[0]) != 0) return -1;
#if defined(__linux__)
  if (space_register(env, exports) != 0) return -1; /* a space's twins */
#endif
  return 0;
}
