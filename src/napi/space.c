/*
 * The binding of shared spaces (src/core/space*.c, lifeline.c): open, close,
 * the directory, owners, the waker of async waits, and the parker of a
 * space's records. The calls on a space's cells, Semas and RateLimits are
 * in wait.c, sema.c and rate.c, beside their in-process twins (space.h).
 *
 * A registration ("reg") is one JS thread's use of one space: its owner id
 * (a slot of the space, whose lifeline this thread holds), its JS buffer
 * over the public part, and its async waits. lib/space.js makes one per
 * thread and space name; it is handed to JS as a tagged external.
 *
 * Async waits ride on the in-process lot. A space waiter's record lives in
 * the space, where a notifier in any process can reach it, but a promise
 * must be settled on its own thread's loop, which only this process can
 * wake. So each async wait also parks an in-process waitAsync on a private
 * "proxy" cell (lib/space.js), with the timeout, abort and loop-ref handling
 * every waitAsync has; a waker thread per registration sleeps on the
 * registration's doorbell in the space, and when a notifier rings it, stores
 * 1 into the proxy of each record that left the queue and notifies the
 * proxy. However the proxy settles (woken, timed out, aborted), JS then
 * calls spaceSettle, which decides under the space's bucket lock: a record
 * that a notify took is "ok" whatever the proxy said, so counts and results
 * agree across processes as they do within one.
 *
 * Blocking waits park on their record's futex through the binding's one
 * park loop (park.c), in timed slices, looking for their thread's
 * termination between slices as the in-process waits do. A process
 * killed with SIGKILL runs no teardown: the space's death watcher
 * (space_watch.c, started with the first registration of this process)
 * reaps the space when it exits, and waiters that watch owners also reap
 * every WATCH_NS, for deaths the watcher cannot see (a reused pid, a kernel
 * without pidfds).
 *
 * Threads: a reg's pending list and `stop` are guarded by reg->mu and read
 * by its waker thread; everything else belongs to the registering thread.
 * Lock order: reg->mu, then a bucket lock of the space, then (in the waker)
 * a bucket lock of the in-process lot.
 */
#define _GNU_SOURCE
#include "env.h"
#include "park.h"
#include "register.h"
#include "space.h"
#include "results.h"
#include "values.h"
#include "sabsync.h"
#include "sabsync_space.h"

#if defined(__linux__)

#include <dlfcn.h>
#include <errno.h>
#include "glibc_old.h"
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WATCH_NS (200ull * 1000000ull) /* lifeline probes while watching owners */
/* The bound of one reap by the waker: deliveries wait for it, and so does
 * a close (which joins the waker), however many deaths a co-tenant forged. */
#define WAKER_REAP_NS (20ull * 1000000ull)
/* The bound of a whole close (or a thread's teardown): every bookkeeping
 * lock it needs, for any number of pending waits, within it together. */
#define CLOSE_NS (500ull * 1000000ull)

static int set_num(napi_env env, napi_value obj, const char *name, double v) {
  napi_value n;
  SAB_CALL(env, napi_create_double(env, v, &n), -1);
  SAB_CALL(env, napi_set_named_property(env, obj, name, n), -1);
  return 0;
}

static const napi_type_tag space_tag = {0x2c9b5e7d41f6a803ull, 0x93e1c47a5b08d26full};

sab_napi_reg_t *sab_napi_space_unwrap(napi_env env, napi_value v) {
  sab_napi_reg_t *reg = sab_napi_unwrap(env, v, &space_tag, "a shared space's handle");
  if (reg != NULL && reg->closed) {
    sab_napi_throw(env, SAB_ERR_SHARED_CLOSED, "the shared space was closed");
    return NULL;
  }
  return reg;
}

/* ---- the waker thread ---- */

static void ring_proxy(sab_napi_pending_t *p) {
  __atomic_store_n(p->proxy, 1, __ATOMIC_SEQ_CST);
  sab_notify((uintptr_t)p->proxy, 1);
  p->delivered = 1;
}

static void *waker_main(void *arg) {
  sab_napi_reg_t *reg = arg;
  uint32_t *bell = sab_space_doorbell(reg->sp, reg->id);
  uint64_t last_reap = sab_now();
  for (;;) {
    uint32_t seen = __atomic_load_n(bell, __ATOMIC_SEQ_CST);
    uint32_t epoch = sab_space_epoch(reg->sp);
    int watching = 0;
    pthread_mutex_lock(&reg->mu);
    if (reg->stop) {
      pthread_mutex_unlock(&reg->mu);
      return NULL;
    }
    for (sab_napi_pending_t *p = reg->pending; p != NULL; p = p->next) {
      if (p->delivered) continue;
      int s = sab_space_peek(reg->sp, reg->id, p->rec, p->off);
      /* Left the queue, or watches owners and a death happened since it
       * looked: its JS looks again (spaceSettle decides which). */
      if (s != SAB_PENDING || (p->watch != 0 && p->epoch != epoch)) {
        ring_proxy(p);
      } else if (p->watch != 0 || (p->flags & SAB_SPACE_SEMA)) {
        watching = 1; /* a semaphore's waiter waits for holders that may die */
      }
    }
    reg->idle = !watching;
    pthread_mutex_unlock(&reg->mu);
    uint64_t now = sab_now();
    if (watching && now - last_reap >= WATCH_NS) {
      last_reap = now;
      sab_space_deadline(now + WAKER_REAP_NS);
      int deaths = sab_space_reap(reg->sp);
      sab_space_deadline(UINT64_MAX);
      if (deaths > 0) continue;
    }
    sab_space_doorbell_wait(reg->sp, reg->id, seen, watching ? last_reap + WATCH_NS : UINT64_MAX);
  }
}

static int waker_start(napi_env env, sab_napi_reg_t *reg) {
  if (reg->waker_started) return 0;
  if (pthread_create(&reg->waker, NULL, waker_main, reg) != 0) {
    sab_napi_throw(env, SAB_ERR_SHARED_SYSTEM, "could not start a thread for async waits");
    return -1;
  }
  reg->waker_started = 1;
  return 0;
}

/* Wake the waker: it looks at its pending waits again. */
void sab_napi_space_ring(sab_napi_reg_t *reg) { sab_space_doorbell_ring(reg->sp, reg->id); }

static void waker_stop(sab_napi_reg_t *reg) {
  if (!reg->waker_started) return;
  pthread_mutex_lock(&reg->mu);
  reg->stop = 1;
  pthread_mutex_unlock(&reg->mu);
  sab_napi_space_ring(reg);
  pthread_join(reg->waker, NULL);
  reg->waker_started = 0;
  reg->stop = 0;
}

/* ---- closing ---- */

/* A wait whose JS will never look at it again (its thread ends, or its
 * space is closed): take it out of the space; a wake it was counted for is
 * handed to the next waiter, a slot it was handed goes back. At a close
 * (`ring`), its proxy is rung too: its JS looks, finds the space closed
 * and rejects with ERR_SABSYNC_SHARED_CLOSED, instead of waiting for its
 * timeout (or for ever). */
static void drop_pending(sab_napi_reg_t *reg, sab_napi_pending_t *p, int ring) {
  if (ring) ring_proxy(p);
  uint32_t token = SAB_SEMA_NO_TOKEN;
  int r = sab_space_settle(reg->sp, reg->id, p->rec, p->off, SAB_CANCELLED, &token);
  if (r == SAB_OK && (p->flags & SAB_SPACE_SEMA)) {
    sab_space_sema_give_back(reg->sp, reg->id, p->off, token);
  } else if (r == SAB_OK) {
    sab_space_notify(reg->sp, p->off, 1);
  }
  if (p->keep != NULL) napi_delete_reference(reg->env, p->keep);
  free(p);
}

static void env_cleanup(void *arg);

/* Release everything of a registration, on its thread. The whole close
 * has one deadline (CLOSE_NS): whatever the space's memory says (locks
 * held by a stopped process or a co-tenant, forged deaths to bury), and
 * however many waits are pending, every bookkeeping lock it needs is
 * tried within it, and tried once after it; a record it could not take
 * out of a queue then belongs to a dead owner (the id ends below), which
 * every walk of that queue drops. */
static void reg_close(sab_napi_reg_t *reg, int in_cleanup) {
  if (reg->closed) return;
  reg->closed = 1;
  uint64_t old = sab_space_deadline(sab_now() + CLOSE_NS);
  waker_stop(reg);
  while (reg->pending != NULL) {
    sab_napi_pending_t *p = reg->pending;
    reg->pending = p->next;
    drop_pending(reg, p, !in_cleanup);
  }
  if (!in_cleanup) {
    napi_value ab;
    if (reg->buffer != NULL && napi_get_reference_value(reg->env, reg->buffer, &ab) == napi_ok &&
        ab != NULL) {
      napi_detach_arraybuffer(reg->env, ab); /* not detachable: stays (a SharedArrayBuffer) */
    }
    napi_remove_env_cleanup_hook(reg->env, env_cleanup, reg);
  }
  if (reg->buffer != NULL) napi_delete_reference(reg->env, reg->buffer);
  reg->buffer = NULL;
  sab_space_watch_stop(reg->sp);
  sab_space_unregister(reg->sp, reg->id);
  sab_space_deadline(old);
  sab_space_close(reg->sp);
}

static void env_cleanup(void *arg) {
  sab_napi_reg_t *reg = arg;
  reg_close(reg, 1);
  if (reg->orphaned) {
    pthread_mutex_destroy(&reg->mu);
    free(reg);
  }
}

static void handle_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)hint;
  sab_napi_reg_t *reg = data;
  /* Nothing in JS reaches the space through this handle any more. */
  if (!reg->closed) reg_close(reg, 0);
  pthread_mutex_destroy(&reg->mu);
  free(reg);
}

/* ---- the JS buffer ---- */

static void buffer_finalize(napi_env env, void *data, void *hint) {
  (void)env;
  (void)data;
  sab_space_close(hint);
}

static void buffer_finalize_noenv(void *data, void *hint) {
  (void)data;
  sab_space_close(hint);
}

typedef napi_status (*create_external_sab_t)(napi_env, void *, size_t, void (*)(void *, void *),
                                             void *, napi_value *);

/* A SharedArrayBuffer over the public part where this Node can make one
 * (node_api_create_external_sharedarraybuffer, looked up at run time: it
 * is experimental and missing before Node 24.16 / 26.1), else an external
 * ArrayBuffer (Atomics' read-modify-write operations work on it). The
 * buffer holds a reference to the mapping until it is collected. */
static int make_buffer(napi_env env, sab_napi_reg_t *reg, napi_value *out, bool *shared) {
  static create_external_sab_t create_sab;
  static int looked;
  void *data = reg->info.base + reg->info.pub_off;
  size_t bytes = reg->info.size - reg->info.pub_off;
  if (!__atomic_load_n(&looked, __ATOMIC_ACQUIRE)) {
    void *sym = dlsym(RTLD_DEFAULT, "node_api_create_external_sharedarraybuffer");
    memcpy(&create_sab, &sym, sizeof sym);
    __atomic_store_n(&looked, 1, __ATOMIC_RELEASE);
  }
  sab_space_ref(reg->sp);
  if (create_sab != NULL &&
      create_sab(env, data, bytes, buffer_finalize_noenv, reg->sp, out) == napi_ok) {
    *shared = true;
    return 0;
  }
  if (napi_create_external_arraybuffer(env, data, bytes, buffer_finalize, reg->sp, out) !=
      napi_ok) {
    sab_space_close(reg->sp);
    sab_napi_throw_last(env, "napi_create_external_arraybuffer");
    return -1;
  }
  *shared = false;
  return 0;
}

/* spaceOpen(name, size, mode) -> { handle, buffer, shared, id, created, size,
 * pubOff, heapOff, epochOff, countsOff, countStride, bucketBits } */
static napi_value space_open(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 3, NULL);
  char name[SAB_SPACE_NAME_MAX + 2];
  size_t len = 0;
  uint32_t size, mode;
  SAB_CALL(env, napi_get_value_string_utf8(env, argv[0], name, sizeof name, &len), NULL);
  if (len > SAB_SPACE_NAME_MAX || strlen(name) != len) {
    sab_napi_throw_core(env, SAB_E_SPACE_NAME, "openShared");
    return NULL;
  }
  if (sab_napi_get_u32(env, argv[1], &size) != 0 || sab_napi_get_u32(env, argv[2], &mode) != 0)
    return NULL;
  sab_napi_reg_t *reg = calloc(1, sizeof *reg);
  if (reg == NULL) {
    sab_napi_throw(env, SAB_ERR_NOMEM, "sabsync: out of memory");
    return NULL;
  }
  int created = 0;
  int r = sab_space_open(name, size, mode, &reg->sp, &created);
  if (r != 0) {
    char what[SAB_SPACE_NAME_MAX + 64];
    snprintf(what, sizeof what, "openShared: /dev/shm/sabsync.%s", name);
    free(reg);
    sab_napi_throw_core(env, r, what);
    return NULL;
  }
  r = sab_space_register(reg->sp, &reg->id);
  if (r != 0) {
    sab_space_close(reg->sp);
    free(reg);
    char what[SAB_SPACE_NAME_MAX + 64];
    snprintf(what, sizeof what, "openShared: /dev/shm/sabsync.%s (no free thread slot)", name);
    sab_napi_throw_core(env, r, what);
    return NULL;
  }
  sab_space_info(reg->sp, &reg->info);
  reg->env = env;
  pthread_mutex_init(&reg->mu, NULL);
  /* Without the watcher, deaths are still found by the waiters' reaps. */
  (void)sab_space_watch_start(reg->sp);

  napi_value result, handle, buffer;
  bool shared = false;
  if (make_buffer(env, reg, &buffer, &shared) != 0) goto fail;
  if (napi_create_reference(env, buffer, 0, &reg->buffer) != napi_ok ||
      napi_create_external(env, reg, handle_finalize, NULL, &handle) != napi_ok) {
    sab_napi_throw_last(env, "openShared");
    goto fail;
  }
  /* From here the handle's finalizer owns reg. */
  if (sab_napi_tag(env, handle, &space_tag) != 0 ||
      napi_add_env_cleanup_hook(env, env_cleanup, reg) != napi_ok) {
    sab_napi_throw_last(env, "openShared");
    reg_close(reg, 1);
    return NULL;
  }
  napi_value flag;
  SAB_CALL(env, napi_create_object(env, &result), NULL);
  SAB_CALL(env, napi_set_named_property(env, result, "handle", handle), NULL);
  SAB_CALL(env, napi_set_named_property(env, result, "buffer", buffer), NULL);
  SAB_CALL(env, napi_get_boolean(env, shared, &flag), NULL);
  SAB_CALL(env, napi_set_named_property(env, result, "shared", flag), NULL);
  SAB_CALL(env, napi_get_boolean(env, created != 0, &flag), NULL);
  SAB_CALL(env, napi_set_named_property(env, result, "created", flag), NULL);
  if (set_num(env, result, "id", reg->id) != 0 || set_num(env, result, "size", reg->info.size) ||
      set_num(env, result, "pubOff", reg->info.pub_off) != 0 ||
      set_num(env, result, "heapOff", reg->info.heap_off) != 0 ||
      set_num(env, result, "epochOff", reg->info.epoch_off) != 0 ||
      set_num(env, result, "countsOff", reg->info.counts_off) != 0 ||
      set_num(env, result, "countStride", reg->info.count_stride) != 0 ||
      set_num(env, result, "bucketBits", reg->info.bucket_bits) != 0) {
    return NULL;
  }
  return result;
fail:
  if (reg->buffer != NULL) napi_delete_reference(env, reg->buffer);
  sab_space_watch_stop(reg->sp);
  sab_space_unregister(reg->sp, reg->id);
  sab_space_close(reg->sp);
  pthread_mutex_destroy(&reg->mu);
  free(reg);
  return NULL;
}

/* spaceClose(handle) */
static napi_value space_close(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_napi_reg_t *reg = sab_napi_space_unwrap(env, argv[0]);
  if (reg != NULL) reg_close(reg, 0);
  return NULL;
}

/* spaceUnlink(name) -> true, or false if there was no such space */
static napi_value space_unlink(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  char name[SAB_SPACE_NAME_MAX + 2];
  size_t len = 0;
  napi_value result;
  SAB_CALL(env, napi_get_value_string_utf8(env, argv[0], name, sizeof name, &len), NULL);
  int r =
      len > SAB_SPACE_NAME_MAX || strlen(name) != len ? SAB_E_SPACE_NAME : sab_space_unlink(name);
  if (r != 0 && !(r == SAB_E_SPACE_SYS && errno == ENOENT)) {
    sab_napi_throw_core(env, r, "unlink");
    return NULL;
  }
  SAB_CALL(env, napi_get_boolean(env, r == 0, &result), NULL);
  return result;
}

/* spaceLookup(handle, key, kind, bytes, p0, p1, p2, p3) -> SPACE_ATTACH
 * or SPACE_CREATE (the caller initialises it, then publishes), with the
 * object's offset in out[0]. */
static napi_value space_lookup(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 8, NULL);
  sab_napi_reg_t *reg = sab_napi_space_unwrap(env, argv[0]);
  char key[SAB_SPACE_KEY_MAX + 2];
  size_t len = 0;
  uint32_t kind, bytes, params[SAB_SPACE_NPARAMS], off = 0;
  if (reg == NULL) return NULL;
  SAB_CALL(env, napi_get_value_string_utf8(env, argv[1], key, sizeof key, &len), NULL);
  if (sab_napi_get_u32(env, argv[2], &kind) != 0 || sab_napi_get_u32(env, argv[3], &bytes) != 0)
    return NULL;
  for (int i = 0; i < SAB_SPACE_NPARAMS; i++) {
    if (sab_napi_get_u32(env, argv[4 + i], &params[i]) != 0) return NULL;
  }
  int r = len > SAB_SPACE_KEY_MAX || strlen(key) != len
              ? SAB_E_SPACE_KEY
              : sab_space_lookup(reg->sp, reg->id, key, len, kind, params, bytes, &off);
  if (r != SAB_SPACE_ATTACH && r != SAB_SPACE_CREATE) {
    sab_napi_throw_core(env, r, key);
    return NULL;
  }
  return sab_napi_result1(env, r, off);
}

/* spaceEntry(handle, key) -> SPACE_ATTACH with kind, bytes, p0, p1, p2, p3
 * in out[0..5], or SPACE_CREATE: the key names nothing now. */
static napi_value space_entry(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  sab_napi_reg_t *reg = sab_napi_space_unwrap(env, argv[0]);
  char key[SAB_SPACE_KEY_MAX + 2];
  size_t len = 0;
  sab_space_entry_t e;
  if (reg == NULL) return NULL;
  SAB_CALL(env, napi_get_value_string_utf8(env, argv[1], key, sizeof key, &len), NULL);
  int r = len > SAB_SPACE_KEY_MAX || strlen(key) != len
              ? SAB_E_SPACE_KEY
              : sab_space_entry(reg->sp, reg->id, key, len, &e);
  if (r < 0) {
    sab_napi_throw_core(env, r, key);
    return NULL;
  }
  if (r == 0) return sab_napi_number(env, SAB_SPACE_CREATE);
  double *out = sab_napi_out(env);
  if (out == NULL) return NULL;
  out[0] = e.kind;
  out[1] = e.bytes;
  for (int i = 0; i < SAB_SPACE_NPARAMS && 2 + i < SAB_NAPI_OUT; i++) out[2 + i] = e.params[i];
  return sab_napi_number(env, SAB_SPACE_ATTACH);
}

/* spacePublish(handle, off) / spaceAbandon(handle): end a creation. */
static napi_value space_publish(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  sab_napi_reg_t *reg = sab_napi_space_unwrap(env, argv[0]);
  uint32_t off;
  if (reg == NULL || sab_napi_get_u32(env, argv[1], &off) != 0) return NULL;
  sab_space_publish(reg->sp, off);
  return NULL;
}

static napi_value space_abandon(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_napi_reg_t *reg = sab_napi_space_unwrap(env, argv[0]);
  if (reg != NULL) sab_space_abandon(reg->sp);
  return NULL;
}

/* spaceAlive(handle, id) -> boolean (probes the owner's lifeline). JS asks
 * it in the middle of timed calls (a tryLock, a lock's slow path): a death
 * it finds is buried within PROBE_BURY_NS, and what that could not reach
 * is left to the waiters' and the watcher's reaps (the death is marked, and
 * the epoch they compare has moved: lifeline.c O2). */
#define PROBE_BURY_NS (10ull * 1000000ull)
static napi_value space_alive(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 2, NULL);
  sab_napi_reg_t *reg = sab_napi_space_unwrap(env, argv[0]);
  uint32_t id;
  napi_value r;
  if (reg == NULL || sab_napi_get_u32(env, argv[1], &id) != 0) return NULL;
  uint64_t old = sab_space_deadline(sab_now() + PROBE_BURY_NS);
  bool alive = id == reg->id || sab_space_alive(reg->sp, id);
  sab_space_deadline(old);
  SAB_CALL(env, napi_get_boolean(env, alive, &r), NULL);
  return r;
}

/* spaceReap(handle) -> deaths found */
static napi_value space_reap(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_napi_reg_t *reg = sab_napi_space_unwrap(env, argv[0]);
  return reg != NULL ? sab_napi_number(env, sab_space_reap(reg->sp)) : NULL;
}

/* (handle, off, size) of a cell; the offset is checked by the core. */
sab_env_t *sab_napi_space_env(napi_env env) {
  sab_env_t *e = sab_napi_env_get(env);
  bool pending = false;
  if (e == NULL && napi_is_exception_pending(env, &pending) == napi_ok && !pending) {
    sab_napi_throw(env, SAB_ERR_NAPI, "sabsync: no per-thread state");
  }
  return e;
}

/* ---- what wait.c and sema.c need of a registration (space.h) ---- */

/* Slack past a call's deadline for a bookkeeping lock: a holder preempted
 * at that moment, so that settling a record at its deadline rarely fails
 * to take it out of its queue. What a timed call can overshoot by. */
#define LOCK_SLACK_NS (10ull * 1000000ull)
void sab_napi_space_lock_deadline(uint64_t deadline) {
  uint64_t bound = sab_now() + SAB_SLOCK_BOUND_NS;
  sab_space_deadline(deadline < bound - LOCK_SLACK_NS ? deadline + LOCK_SLACK_NS : bound);
}

int sab_napi_space_busy_again(sab_env_t *e, uint64_t deadline) {
  if (sab_now() >= deadline) return 0;
  if (sab_napi_env_terminating(e)) return -1;
  sab_napi_space_lock_deadline(deadline);
  return 1;
}

napi_value sab_napi_space_blocking(napi_env env, napi_callback_info info, napi_callback in) {
  uint64_t old = sab_space_deadline(UINT64_MAX);
  napi_value r = in(env, info);
  sab_space_deadline(old);
  return r;
}

/* A record that watches owners (watch != 0, or any Sema's: its holders'
 * slots come back when found dead) reaps the space every WATCH_NS, for
 * deaths the watcher cannot see; a plain wait whose epoch then moved ends
 * with SAB_OWNER_DEAD (the caller looks again). */
static int sp_park(sab_napi_parker_t *self, uint64_t until) {
  sab_napi_space_parker_t *p = (sab_napi_space_parker_t *)self;
  int r = sab_space_park(p->reg->sp, p->rec, until);
  if (r == SAB_PENDING) return r;
  return sab_space_settle(p->reg->sp, p->reg->id, p->rec, p->off, SAB_TIMED_OUT, p->token);
}

static int sp_leave(sab_napi_parker_t *self, int why) {
  sab_napi_space_parker_t *p = (sab_napi_space_parker_t *)self;
  return sab_space_settle(p->reg->sp, p->reg->id, p->rec, p->off, why, p->token);
}

static int sp_between(sab_napi_parker_t *self) {
  sab_napi_space_parker_t *p = (sab_napi_space_parker_t *)self;
  if (!p->reaps || sab_now() - p->last_reap < WATCH_NS) return SAB_PENDING;
  p->last_reap = sab_now();
  sab_space_reap(p->reg->sp);
  if (p->watch == 0 || sab_space_epoch(p->reg->sp) == p->epoch) return SAB_PENDING;
  /* An owner died since the caller looked: it looks again. */
  return sp_leave(self, SAB_CANCELLED) == SAB_OK ? SAB_OK : SAB_OWNER_DEAD;
}

void sab_napi_space_parker_init(sab_napi_space_parker_t *p, sab_napi_reg_t *reg, uint32_t rec,
                                uint32_t off, uint32_t watch, uint32_t epoch, uint32_t *token) {
  p->base.park = sp_park;
  p->base.leave = sp_leave;
  p->base.between = sp_between;
  p->reg = reg;
  p->rec = rec;
  p->off = off;
  p->watch = watch;
  p->epoch = epoch;
  p->reaps = watch != 0 || token != NULL;
  p->last_reap = sab_now();
  p->token = token;
}

/* A pending entry for an async wait whose wake goes through `proxy` (an
 * Int32Array of one element over a SharedArrayBuffer, holding 0). NULL
 * with an exception pending. */
sab_napi_pending_t *sab_napi_space_pending_new(napi_env env, sab_napi_reg_t *reg,
                                               napi_value proxy) {
  napi_typedarray_type type;
  size_t length = 0, boff;
  void *data = NULL;
  napi_value ab;
  bool is_ta = false, is_ab = true;
  SAB_CALL(env, napi_is_typedarray(env, proxy, &is_ta), NULL);
  if (is_ta) {
    SAB_CALL(env, napi_get_typedarray_info(env, proxy, &type, &length, &data, &ab, &boff), NULL);
    /* Node 20 has no napi_is_sharedarraybuffer; a typed array's buffer that
     * is no ArrayBuffer is a SharedArrayBuffer, which cannot be detached,
     * so `data` stays valid while p->keep holds it. */
    SAB_CALL(env, napi_is_arraybuffer(env, ab, &is_ab), NULL);
  }
  if (!is_ta || type != napi_int32_array || length < 1 || data == NULL || is_ab) {
    napi_throw_type_error(env, NULL, "proxy must be an Int32Array over a SharedArrayBuffer");
    return NULL;
  }
  sab_napi_pending_t *p = calloc(1, sizeof *p);
  if (p == NULL) {
    sab_napi_throw(env, SAB_ERR_NOMEM, "sabsync: out of memory");
    return NULL;
  }
  if (napi_create_reference(env, ab, 1, &p->keep) != napi_ok || waker_start(env, reg) != 0) {
    if (p->keep != NULL) napi_delete_reference(env, p->keep);
    free(p);
    return NULL;
  }
  p->proxy = data;
  return p;
}

void sab_napi_space_pending_free(sab_napi_reg_t *reg, sab_napi_pending_t *p) {
  napi_delete_reference(reg->env, p->keep);
  free(p);
}

/* Under reg->mu: list a queued record (see waker_main). Answers whether the
 * waker must be rung after unlocking: it sleeps without a deadline, and
 * this record needs lifeline probes while it waits. */
int sab_napi_space_pending_add(sab_napi_reg_t *reg, sab_napi_pending_t *p, uint32_t rec) {
  p->rec = rec;
  p->next = reg->pending;
  reg->pending = p;
  int wake = reg->idle && (p->watch != 0 || (p->flags & SAB_SPACE_SEMA));
  if (wake) reg->idle = 0;
  return wake;
}

/* The pending entry of `rec`, unlisted; NULL with an exception pending. */
sab_napi_pending_t *sab_napi_space_pending_take(napi_env env, sab_napi_reg_t *reg, uint32_t rec) {
  sab_napi_pending_t *p = NULL;
  pthread_mutex_lock(&reg->mu);
  for (sab_napi_pending_t **pp = &reg->pending; *pp != NULL; pp = &(*pp)->next) {
    if ((*pp)->rec == rec) {
      p = *pp;
      *pp = p->next;
      break;
    }
  }
  pthread_mutex_unlock(&reg->mu);
  if (p == NULL) sab_napi_throw(env, SAB_ERR_NAPI, "no such pending wait");
  return p;
}

int sab_napi_space_settle(napi_env env, napi_callback_info info, uint32_t *token, int *result) {
  SAB_ARGS(env, info, 3, -1);
  sab_napi_reg_t *reg = sab_napi_space_unwrap(env, argv[0]);
  uint32_t rec, why;
  if (reg == NULL || sab_napi_get_u32(env, argv[1], &rec) != 0 ||
      sab_napi_get_u32(env, argv[2], &why) != 0) {
    return -1;
  }
  sab_napi_pending_t *p = sab_napi_space_pending_take(env, reg, rec);
  if (p == NULL) return -1;
  *result = sab_space_settle(reg->sp, reg->id, rec, p->off,
                             why == SAB_TIMED_OUT ? SAB_TIMED_OUT : SAB_CANCELLED, token);
  sab_napi_space_pending_free(reg, p);
  return 0;
}

/* spaceRetire(handle, key, flags, keepOff) -> how many entries matched,
 * with how many of them were reclaimed now in out[0]. */
static napi_value space_retire(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 4, NULL);
  sab_napi_reg_t *reg = sab_napi_space_unwrap(env, argv[0]);
  char key[SAB_SPACE_KEY_MAX + 2];
  size_t len = 0;
  uint32_t flags, keep, freed = 0;
  if (reg == NULL) return NULL;
  SAB_CALL(env, napi_get_value_string_utf8(env, argv[1], key, sizeof key, &len), NULL);
  if (sab_napi_get_u32(env, argv[2], &flags) != 0 || sab_napi_get_u32(env, argv[3], &keep) != 0)
    return NULL;
  int r = len > SAB_SPACE_KEY_MAX || strlen(key) != len
              ? SAB_E_SPACE_KEY
              : sab_space_retire(reg->sp, reg->id, key, len, flags, keep, &freed);
  if (r < 0) {
    sab_napi_throw_core(env, r, key);
    return NULL;
  }
  return sab_napi_result1(env, r, freed);
}

/* spaceUsage(handle) -> objects, with objects_max, retired, heap_used,
 * heap_bytes in out[0..3]. */
static napi_value space_usage(napi_env env, napi_callback_info info) {
  SAB_ARGS(env, info, 1, NULL);
  sab_napi_reg_t *reg = sab_napi_space_unwrap(env, argv[0]);
  sab_space_usage_t u;
  if (reg == NULL) return NULL;
  sab_space_usage(reg->sp, &u);
  double *out = sab_napi_out(env);
  if (out == NULL) return NULL;
  out[0] = u.objects_max;
  out[1] = u.retired;
  out[2] = u.heap_used;
  out[3] = u.heap_bytes;
  return sab_napi_number(env, u.objects);
}

static const sab_napi_fn_t fns[] = {
    {"spaceOpen", space_open},       {"spaceClose", space_close}, {"spaceUnlink", space_unlink},
    {"spaceLookup", space_lookup},   {"spaceEntry", space_entry}, {"spacePublish", space_publish},
    {"spaceAbandon", space_abandon}, {"spaceAlive", space_alive}, {"spaceReap", space_reap},
    {"spaceRetire", space_retire},   {"spaceUsage", space_usage},
};

#else /* !__linux__ */

#include <stddef.h>

/* No shared spaces here: openShared says so, never a per-process stand-in. */
static napi_value unsupported(napi_env env, napi_callback_info info) {
  (void)info;
  sab_napi_throw(env, SAB_ERR_UNSUPPORTED,
                 "openShared: shared spaces between processes need Linux");
  return NULL;
}

static const sab_napi_fn_t fns[] = {{"spaceOpen", unsupported}, {"spaceUnlink", unsupported}};

#endif /* __linux__ */

/* The calls on a space's cells, Semas and RateLimits are registered by
 * wait.c, sema.c and rate.c, beside their in-process twins. */
int sab_napi_space_register(napi_env env, napi_value exports) {
  return sab_napi_add_functions(env, exports, fns, sizeof fns / sizeof fns[0]);
}
