/*
 * The binding of shared spaces (src/core/space*.c, lifeline.c): open, close,
 * the directory, owners, the waker of async waits, and the parker and the
 * async hooks of a space's records. The calls on a space's cells, Semas
 * and RateLimits are wait.c's, sema.c's and rate.c's (space.h).
 *
 * A registration ("reg") is one JS thread's use of one space: its owner id
 * (a slot of the space, whose lifeline this thread holds), its JS buffer
 * over the public part, and its async waits. lib/space.js makes one per
 * thread and space name; it is handed to JS as a tagged external.
 *
 * Async waits are hooked records of async.c (async.h): their promise,
 * deadline, abort and delivery on their thread's loop are every async
 * record's. A space waiter's queue entry lives in the space, where a
 * notifier in any process can reach it, but a promise must be settled on
 * its own thread's loop, which only this process can wake. So a waker
 * thread per registration sleeps on the registration's doorbell in the
 * space; when a notifier rings it, it decides, under the space's bucket
 * lock (sab_space_settle), how each record that left its queue ended, and
 * hands the record to its env's delivery queue, as the lot's notify does
 * for its own. A deadline or an abort, on the env's thread, decides under
 * the same lock: a record that a notify took is "ok" whatever else raced
 * with it, so counts and results agree across processes as within one.
 * Each record is decided once, under the registration's lock (`queued`
 * says it is still the waker's to look at), and delivered once.
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
 * Threads: a reg's records list and `stop` are guarded by reg->mu and read
 * by its waker thread; everything else belongs to the registering thread.
 * Lock order: reg->mu, then a bucket lock of the space, then (in the waker)
 * a bucket lock of the in-process lot.
 */
#define _GNU_SOURCE
#include "async.h"
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

static sab_async_t *record_of(sab_napi_space_async_t *sx) {
  return (sab_async_t *)((char *)sx - offsetof(sab_async_hooked_t, ext));
}

sab_napi_space_async_t *sab_napi_space_async_of(const sab_async_t *a) {
  return sab_async_ext((sab_async_t *)a);
}

/* How a record that left its queue ended, from sab_space_settle's answer
 * `r` (for `why`): SAB_OK (a wake: a Sema's slot in token; or an owner
 * died since a watching wait looked, which then looks again), else
 * SAB_TIMED_OUT or `why`. A Sema's record that left without a wake asks
 * again (SAB_OK without a slot), unless its own caller took it out. */
static int outcome(sab_napi_space_async_t *sx, int r, int why) {
  if (r == SAB_OK || r == why) return r;
  if (r == SAB_CANCELLED && sx->sema) {
    sx->token = SAB_SEMA_NO_TOKEN;
    return SAB_OK;
  }
  return r == SAB_CANCELLED && sx->watch != 0 ? SAB_OK : SAB_TIMED_OUT;
}

/* Under reg->mu: decide a queued record for `why`: it is the waker's no
 * longer, and its caller delivers it, or settles it at once. Answers its
 * outcome. */
static int decide(sab_napi_reg_t *reg, sab_napi_space_async_t *sx, int why) {
  uint32_t token = SAB_SEMA_NO_TOKEN;
  int r = sab_space_settle(reg->sp, reg->id, sx->rec, sx->off, why, &token);
  sx->queued = 0;
  sx->token = token;
  sx->result = outcome(sx, r, why);
  return sx->result;
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
    /* One bound for the pass, whatever the memory says (see reg_close). */
    sab_space_deadline(sab_now() + WAKER_REAP_NS);
    for (sab_napi_space_async_t *sx = reg->records; sx != NULL; sx = sx->next) {
      if (!sx->queued) continue;
      int s = sab_space_peek(reg->sp, reg->id, sx->rec, sx->off);
      /* Left the queue, or watches owners and a death happened since it
       * looked: decided now (a wait whose owner died looks again). */
      if (s != SAB_PENDING || (sx->watch != 0 && sx->epoch != epoch)) {
        (void)decide(reg, sx, SAB_CANCELLED);
        sab_napi_async_deliver(record_of(sx));
      } else if (sx->watch != 0 || sx->sema) {
        watching = 1; /* a semaphore's waiter waits for holders that may die */
      }
    }
    sab_space_deadline(UINT64_MAX);
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

/* An async record whose space is closed (or whose thread ends): taken out
 * of the space; a wake it was counted for, or a slot it was handed, goes
 * on to the next waiter now, while the space is open. Its promise then
 * rejects with ERR_SABSYNC_SHARED_CLOSED (arrived: SAB_NAPI_CLOSED), and
 * its hooks never touch the registration again. */
static void drop_record(sab_napi_reg_t *reg, sab_napi_space_async_t *sx) {
  /* Not queued: decided already, and on its way to the delivery queue. */
  if (sx->queued) {
    (void)decide(reg, sx, SAB_CANCELLED);
    sab_napi_async_deliver(record_of(sx));
  }
  int woken = sx->result == SAB_OK;
  if (woken && sx->sema) {
    sab_space_sema_give_back(reg->sp, reg->id, sx->off, sx->token);
  } else if (woken) {
    sab_space_notify(reg->sp, sx->off, 1);
  }
  sx->result = SAB_NAPI_CLOSED;
  sx->reg = NULL;
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
  pthread_mutex_lock(&reg->mu);
  for (sab_napi_space_async_t *sx = reg->records; sx != NULL; sx = sx->next) drop_record(reg, sx);
  reg->records = NULL;
  pthread_mutex_unlock(&reg->mu);
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

/* The thread ends. Node runs cleanup hooks in the reverse order of their
 * registration: this one, added at the open, runs before the env's own
 * teardown (added when the addon was loaded on this thread, binding.c), so
 * the registration's async records are dropped here while their pool and
 * their loop still exist (async.c then finds them closed). */
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

int sab_napi_space_off(napi_env env, const sab_napi_reg_t *reg, const void *data, uint32_t *off) {
  uintptr_t base = (uintptr_t)reg->info.base, at = (uintptr_t)data;
  if (at < base || at - base >= reg->info.size) {
    napi_throw_range_error(env, NULL, "the typed array is not over the space's buffer");
    return -1;
  }
  *off = (uint32_t)(at - base);
  return 0;
}

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

/* ---- async records (space.h): the memory's hooks ---- */

int sab_napi_space_async_begin(napi_env env, sab_napi_reg_t *reg, sab_async_t *a, uint32_t off,
                               uint32_t watch, uint32_t epoch, int sema) {
  sab_napi_space_async_t *sx = sab_napi_space_async_of(a);
  if (waker_start(env, reg) != 0) return -1;
  memset(sx, 0, sizeof *sx);
  sx->reg = reg;
  sx->off = off;
  sx->watch = watch;
  sx->epoch = epoch;
  sx->sema = sema != 0;
  sx->result = SAB_TIMED_OUT;
  pthread_mutex_lock(&reg->mu);
  sx->next = reg->records;
  if (reg->records != NULL) reg->records->prev = sx;
  reg->records = sx;
  return 0;
}

/* Under reg->mu (begin, or a retry's relock): list a queued record with
 * the waker, and unlock. */
void sab_napi_space_async_end(sab_async_t *a, int r, uint32_t rec) {
  sab_napi_space_async_t *sx = sab_napi_space_async_of(a);
  sab_napi_reg_t *reg = sx->reg;
  int wake = 0;
  if (r == SAB_PENDING) {
    sx->rec = rec;
    sx->queued = 1;
    /* The waker sleeps without a deadline, and this record needs lifeline
     * probes while it waits. */
    wake = reg->idle && (sx->watch != 0 || sx->sema);
    if (wake) reg->idle = 0;
  }
  pthread_mutex_unlock(&reg->mu);
  if (wake) sab_napi_space_ring(reg);
}

uint64_t sab_napi_space_async_bound(const sab_async_t *a) {
  uint64_t old = sab_space_deadline(UINT64_MAX);
  sab_napi_space_lock_deadline(((const sab_async_hooked_t *)a)->deadline);
  return old;
}

int sab_napi_space_async_cancel(sab_async_t *a, int why) {
  sab_napi_space_async_t *sx = sab_napi_space_async_of(a);
  sab_napi_reg_t *reg = sx->reg;
  /* Closed, or decided by the waker: on its way to the delivery queue. */
  if (reg == NULL) return SAB_OK;
  pthread_mutex_lock(&reg->mu);
  int r = SAB_OK;
  if (sx->queued) {
    uint64_t old = sab_napi_space_async_bound(a);
    r = decide(reg, sx, why);
    sab_space_deadline(old);
    if (r == SAB_OK) sab_napi_async_deliver(a);
  }
  pthread_mutex_unlock(&reg->mu);
  return r == SAB_OK ? SAB_OK : why;
}

int sab_napi_space_async_arrived(sab_async_t *a) {
  int r = sab_napi_space_async_of(a)->result;
  return r == SAB_OK || r == SAB_NAPI_CLOSED ? r : SAB_TIMED_OUT;
}

void sab_napi_space_async_hand_on(sab_async_t *a) {
  sab_napi_space_async_t *sx = sab_napi_space_async_of(a);
  sab_napi_reg_t *reg = sx->reg;
  if (reg == NULL || sx->result != SAB_OK) return; /* closed: handed on then */
  uint64_t old = sab_napi_space_async_bound(a);
  if (sx->sema) {
    sab_space_sema_give_back(reg->sp, reg->id, sx->off, sx->token);
  } else {
    sab_space_notify(reg->sp, sx->off, 1);
  }
  sab_space_deadline(old);
}

void sab_napi_space_async_done(sab_async_t *a) {
  sab_napi_space_async_t *sx = sab_napi_space_async_of(a);
  sab_napi_reg_t *reg = sx->reg;
  if (reg == NULL) return; /* its space closed: reg_close unlisted it */
  pthread_mutex_lock(&reg->mu);
  if (sx->prev != NULL)
    sx->prev->next = sx->next;
  else
    reg->records = sx->next;
  if (sx->next != NULL) sx->next->prev = sx->prev;
  pthread_mutex_unlock(&reg->mu);
  sx->reg = NULL;
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
 * wait.c, sema.c and rate.c. */
int sab_napi_space_register(napi_env env, napi_value exports) {
  return sab_napi_add_functions(env, exports, fns, sizeof fns / sizeof fns[0]);
}
