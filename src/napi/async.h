/*
 * Async waiters: records queued in the lot whose wake is delivered on their
 * env's own loop (a uv_async_t), with deadlines on one uv_timer_t per env.
 * Shared by waitAsync (wait.c) and, through hooks, the semaphore's acquire
 * (sema.c).
 *
 * A pending waitAsync costs its promise, its napi_deferred and its record,
 * and little else: records come from the env's pools (pool.h), three kinds
 * of them, each no bigger than it must be (a plain wait's record is its
 * sab_waiter_t alone, 64 bytes on 64-bit Linux); the memory they wait on
 * is kept alive by one reference per address (keep.h); a JS handle (for an
 * abort) is a number, not an object.
 */
#ifndef SAB_NAPI_ASYNC_H
#define SAB_NAPI_ASYNC_H

#include "env.h"
#include "results.h"

/* The kinds of record, one pool each. */
enum {
  SAB_ASYNC_PLAIN = 0, /* a waitAsync without deadline or handle */
  SAB_ASYNC_FULL = 1,  /* a waitAsync with a deadline or a handle */
  SAB_ASYNC_HOOKED = 2 /* a record whose caller supplies hooks (a Sema's acquire, sema.c) */
};

/*
 * An async waiter. Owned by its env's thread while queued in the lot; from
 * NOTIFIED until its wake callback has queued it for delivery, by the
 * notifier (see sab_wake_cb). Its env is its pool's owner. In w.user8: its
 * kind (SAB_ASYNC_KIND_MASK) and flags; w.user16 is the pool's. Once
 * NOTIFIED, w.next links the env's delivery queue (guarded by env->mu).
 * A wait's promise's deferred is in w.ctx, which the lot leaves to records
 * without a death hook (sabsync.h); a hooked record's ctx is its caller's,
 * and it keeps its deferred in its own field.
 */
struct sab_async_s {
  sab_waiter_t w; /* first: the core hands us &w */
};
#define SAB_ASYNC_KIND_MASK  3
#define SAB_ASYNC_KEEPS_LOOP 4 /* counted in env->nref */

/* A record with a deadline or a JS handle (SAB_ASYNC_FULL, and every
 * hooked one). */
typedef struct {
  sab_async_t a;
  uint32_t heap_index; /* in the deadline heap, or UINT32_MAX */
  uint32_t serial;     /* names it in its JS handle, with its pool id */
} sab_async_full_t;

/*
 * What a hooked record's caller adds to a wait: async.c calls these and
 * knows nothing else of what the record is for, nor of the memory it waits
 * in. A record of the in-process lot leaves `cancel` and `arrived` NULL; a
 * record of another memory (a shared space's, space.c) is not in the lot,
 * and says through them how it leaves its queue and how it ended. A hooked
 * record may be woken with nothing to deliver, to ask again (a Sema's wake
 * to try again, sema.c F2): `again` says so, and async.c then has it ask on
 * the env's loop (`retry`), with the same record and deadline, or rejects
 * it if an abort came meanwhile (after `hand_on`, which passes that wake
 * on).
 */
typedef struct {
  /* Take the record out of its queue for `why` (SAB_TIMED_OUT or
   * SAB_CANCELLED), on the env's thread: SAB_OK when a wake took it first
   * (its delivery is then on its way to the env's queue, as the lot's
   * sab_wait_cancel answers), else `why`. NULL: the lot's. */
  int (*cancel)(sab_async_t *a, int why);
  /* A record that came through the delivery queue: how it ended (SAB_OK,
   * SAB_TIMED_OUT, or SAB_NAPI_CLOSED: its memory went away meanwhile). NULL:
   * SAB_OK (the lot delivers only notified records). */
  int (*arrived)(sab_async_t *a);
  /* Woken by a notify (result SAB_OK) with nothing to deliver: ask again
   * (NULL: never). */
  int (*again)(const sab_async_t *a);
  /* Ask again with a->w (ready to queue), or without queuing (NULL) past
   * the deadline: SAB_PENDING (queued again), or the result to settle with
   * (SAB_OK or SAB_TIMED_OUT). */
  int (*retry)(sab_env_t *e, sab_async_t *a, sab_waiter_t *w);
  /* A wake the record was counted for and will never deliver (its env is
   * torn down, its promise could not settle, an abort after the wake). */
  void (*hand_on)(sab_async_t *a);
  /* The record is about to be freed, however it settled. */
  void (*done)(sab_async_t *a);
  /* The promise's value when it settles with `result` (NULL: the result's
   * name, as a waitAsync's: "ok", "timed-out"). */
  double (*value)(const sab_async_t *a, int result);
} sab_async_hooks_t;

/* arrived's answer for a record whose memory was closed while it waited:
 * its promise rejects with ERR_SABSYNC_SHARED_CLOSED. */
#define SAB_NAPI_CLOSED (-1000)

/* The bytes a hooked record keeps for its caller (sab_async_ext). */
#define SAB_ASYNC_EXT_BYTES 64

typedef struct {
  sab_async_full_t full;
  const sab_async_hooks_t *hooks;
  napi_deferred deferred;
  uint64_t deadline; /* sab_now() scale, UINT64_MAX: none */
  /* An abort that came while the record was woken to ask again (off the
   * lot, its delivery on the way): it rejects with it instead of asking.
   * Env thread only. */
  napi_ref abort_reason;
  _Alignas(8) unsigned char ext[SAB_ASYNC_EXT_BYTES];
} sab_async_hooked_t;

/* The caller's bytes of a hooked record. */
static inline void *sab_async_ext(sab_async_t *a) { return ((sab_async_hooked_t *)a)->ext; }

/* flags of the async calls (waitAsync, semaAcquireAsync) */
#define SAB_ASYNC_REF    1 /* the pending wait keeps the loop alive */
#define SAB_ASYNC_HANDLE 2 /* answer [promise, handle], for cancel() */

/*
 * A record ready to queue on `key` (the address it will be queued on; the
 * core's enqueue sets w.addr to the same): hooked with `hooks`, or, NULL,
 * a wait's (SAB_ASYNC_PLAIN or SAB_ASYNC_FULL, chosen from `flags` and
 * `ms`), from the env's pool of its kind, with
 * its wake callback, `buffer` kept alive, a promise, a deadline `ms` from
 * now, and in *out the promise, or [promise, handle] with SAB_ASYNC_HANDLE.
 * NULL with an exception pending (naming `what`) and nothing left over.
 */
sab_async_t *sab_napi_async_new(napi_env env, sab_env_t *e, const sab_async_hooks_t *hooks,
                                napi_value buffer, uintptr_t key, uint32_t flags, double ms,
                                const char *what, napi_value *out);
/* A new record that the lot did not queue (the call answered at once):
 * settle its unseen promise and free it. */
void sab_napi_async_discard(sab_env_t *e, sab_async_t *a);
/* Register a queued async record. */
void sab_napi_async_track(sab_env_t *e, sab_async_t *a);
/* Hand a record that left its queue to its env's delivery queue (from any
 * thread): what the lot's notify does for its records, for a memory that
 * decides elsewhere (a space's waker, space.c). Once per record and wake. */
void sab_napi_async_deliver(sab_async_t *a);
/* cancel(handle, reason) from JS: answers 1 if the record the handle names
 * was still queued (it is then rejected with `reason`), 0 if it had
 * already settled or been woken; -1 with an exception pending if `handle`
 * is no waitAsync handle. */
int sab_napi_async_cancel(napi_env env, sab_env_t *e, napi_value handle, napi_value reason);

/* The env's loop handles and pools: open at creation (0, or a libuv error
 * with nothing left open), and at teardown settle every record, then close
 * them (`closed` runs once per handle; there are SAB_NAPI_ASYNC_HANDLES). */
#define SAB_NAPI_ASYNC_HANDLES 3
int sab_napi_async_open(sab_env_t *e);
void sab_napi_async_teardown(sab_env_t *e, uv_close_cb closed);

#endif /* SAB_NAPI_ASYNC_H */
