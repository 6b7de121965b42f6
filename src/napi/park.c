/*
 * The binding's blocking park (park.h), used by every blocking call, in
 * either memory: a shared space's records (space.c) park through the same
 * loop as the in-process lot's, with a parker that says how to sleep on,
 * and leave, a record of that memory.
 *
 * A thread blocked in native code is not interrupted by worker.terminate()
 * or process.exit(): V8 interrupts only its own Atomics.wait. So a parked
 * record is woken at least once per slice, and after any wake its thread
 * probes the env (sab_napi_env_terminating; after a notify's wake, the
 * cheaper sab_napi_env_stopping): once termination was asked for, it leaves
 * the queue and returns, handing the caller any wake it was counted for.
 * The main thread's 'exit' nudges every parked thread (sab_nudge_all) and
 * shortens the slices, so that a process exiting with parked, unref'd
 * workers does not wait a whole slice per worker.
 *
 * The slices are ended by a watchdog: one thread per process that, while
 * any blocking record is queued, nudges them all once per slice. A parked
 * thread then sleeps with no timeout of its own (or its caller's), where a
 * futex wait with the slice's deadline started and cancelled a kernel timer
 * on every wait: about 0.3 us of a one-CPU wait/notify round trip of 8 us.
 * A nudged thread probes and parks again, as at the end of a slice.
 *
 * The watchdog sleeps (on wd_cv, with no timeout) once a round finds no
 * blocking record queued, and a parker wakes it. The handshake: the
 * watchdog sets wd_idle, then looks at every bucket once more (a nudge
 * round, under each bucket's lock); a parker is queued (under its bucket's
 * lock) before it reads wd_idle. Either that last round finds the parker's
 * record, or the parker's enqueue came after the round's visit of its
 * bucket, so after wd_idle was set (the lock orders them), and the parker
 * sees wd_idle and wakes the watchdog.
 *
 * Node unloads the addon when the last env that loaded it is gone (a
 * program whose main thread never loads sabsync, only its workers): the
 * watchdog is joined before that, in the last env's teardown, and started
 * again by the next park. Where it cannot be started, and while it is
 * being joined, parks fall back to timed slices, as a space's records
 * always do (sab_nudge_all reaches only the in-process lot).
 */
#include "park.h"

/* How long a blocking wait sleeps between checks for termination. */
#define SLICE_NS (50ull * 1000000ull)
/* The same, once the main thread is exiting. */
#define EXIT_SLICE_NS (5ull * 1000000ull)

/* Set when the main thread emits 'exit'. */
static int exiting;

/* The watchdog's state, guarded by wd_mu (wd_running and wd_idle are also
 * read without it). */
static uv_once_t wd_once = UV_ONCE_INIT;
static int wd_ok; /* wd_mu and wd_cv were made */
static uv_mutex_t wd_mu;
static uv_cond_t wd_cv;
static uv_thread_t wd_thread;
/* Envs alive in the process: the thread must be gone before the last one
 * is, for Node unloads the addon then (a worker-only user of sabsync): its
 * code must not run on. */
static unsigned wd_envs;
/* The thread runs and ends every slice (set after it started, cleared
 * before it is told to stop). */
static int wd_running;
static int wd_stopping; /* told to stop, not yet joined */
static int wd_failed;   /* could not be started: not tried again */
/* Set by the watchdog before it sleeps; cleared (under wd_mu) by whoever
 * wakes it. */
static int wd_idle;

static uint64_t slice_ns(void) {
  return __atomic_load_n(&exiting, __ATOMIC_RELAXED) ? EXIT_SLICE_NS : SLICE_NS;
}

static void watchdog(void *arg) {
  (void)arg;
  uv_mutex_lock(&wd_mu);
  while (!wd_stopping) {
    /* One slice (cut short by an exit or a stop: both signal). */
    (void)uv_cond_timedwait(&wd_cv, &wd_mu, slice_ns());
    if (wd_stopping) break;
    uv_mutex_unlock(&wd_mu);
    unsigned nudged = sab_nudge_all();
    uv_mutex_lock(&wd_mu);
    if (nudged != 0) continue;
    /* Nobody was parked: sleep until a parker comes (see the top). */
    __atomic_store_n(&wd_idle, 1, __ATOMIC_SEQ_CST);
    uv_mutex_unlock(&wd_mu);
    nudged = sab_nudge_all();
    uv_mutex_lock(&wd_mu);
    if (nudged != 0) __atomic_store_n(&wd_idle, 0, __ATOMIC_SEQ_CST);
    while (__atomic_load_n(&wd_idle, __ATOMIC_SEQ_CST) && !wd_stopping) {
      uv_cond_wait(&wd_cv, &wd_mu);
    }
  }
  uv_mutex_unlock(&wd_mu);
}

static void wd_init(void) {
  if (uv_mutex_init(&wd_mu) != 0) return;
  if (uv_cond_init(&wd_cv) != 0) {
    uv_mutex_destroy(&wd_mu);
    return;
  }
  wd_ok = 1;
}

/* Start the watchdog if it is not running: answers whether it runs. Not
 * while the last env's teardown stops it (that thread has not been joined
 * yet): the park then uses timed slices. */
static int wd_start(void) {
  uv_once(&wd_once, wd_init);
  if (!wd_ok) return 0;
  uv_mutex_lock(&wd_mu);
  if (!wd_running && !wd_stopping && !wd_failed) {
    uv_thread_options_t opts;
    opts.flags = UV_THREAD_HAS_STACK_SIZE;
    opts.stack_size = 256 * 1024;
    __atomic_store_n(&wd_idle, 0, __ATOMIC_SEQ_CST);
    if (uv_thread_create_ex(&wd_thread, &opts, watchdog, NULL) == 0) {
      __atomic_store_n(&wd_running, 1, __ATOMIC_RELEASE);
    } else {
      wd_failed = 1;
    }
  }
  int running = wd_running;
  uv_mutex_unlock(&wd_mu);
  return running;
}

void sab_napi_park_env_added(void) {
  uv_once(&wd_once, wd_init);
  if (!wd_ok) return;
  uv_mutex_lock(&wd_mu);
  wd_envs++;
  uv_mutex_unlock(&wd_mu);
}

void sab_napi_park_env_gone(void) {
  if (!wd_ok) return;
  uv_mutex_lock(&wd_mu);
  if (--wd_envs != 0 || !wd_running) {
    uv_mutex_unlock(&wd_mu);
    return;
  }
  /* No env is left to park (an env's own thread runs this), and one made
   * meanwhile counts itself first: it parks with timed slices until the
   * thread is joined. */
  __atomic_store_n(&wd_running, 0, __ATOMIC_RELEASE);
  wd_stopping = 1;
  uv_cond_signal(&wd_cv);
  uv_mutex_unlock(&wd_mu);
  (void)uv_thread_join(&wd_thread);
  uv_mutex_lock(&wd_mu);
  wd_stopping = 0;
  uv_mutex_unlock(&wd_mu);
}

/* Wake the watchdog if it sleeps: a record is queued (the caller's). */
static void wd_wake(void) {
  if (!__atomic_load_n(&wd_idle, __ATOMIC_SEQ_CST)) return;
  uv_mutex_lock(&wd_mu);
  __atomic_store_n(&wd_idle, 0, __ATOMIC_SEQ_CST);
  uv_cond_signal(&wd_cv);
  uv_mutex_unlock(&wd_mu);
}

void sab_napi_park_exiting(void) {
  __atomic_store_n(&exiting, 1, __ATOMIC_RELAXED);
  sab_nudge_all();
  if (__atomic_load_n(&wd_running, __ATOMIC_ACQUIRE)) {
    /* From now on, rounds of the exit slice (the lock: wd_mu was made). */
    uv_mutex_lock(&wd_mu);
    __atomic_store_n(&wd_idle, 0, __ATOMIC_SEQ_CST);
    uv_cond_signal(&wd_cv);
    uv_mutex_unlock(&wd_mu);
  }
}

/* The in-process lot's record, as a parker. */
typedef struct {
  sab_napi_parker_t base;
  sab_waiter_t *w;
} local_parker_t;

static int local_park(sab_napi_parker_t *self, uint64_t until) {
  return sab_wait_park(((local_parker_t *)self)->w, until);
}

static int local_leave(sab_napi_parker_t *self, int why) {
  return sab_wait_cancel(((local_parker_t *)self)->w, why);
}

/*
 * The one blocking park loop. `nudged`: the watchdog ends this record's
 * slices (the in-process lot's records, which sab_nudge_all reaches), so it
 * sleeps with no timer of its own; else it sleeps in timed slices.
 */
static inline __attribute__((always_inline)) int park_loop(
    sab_env_t *e, sab_napi_parker_t *p, int (*park)(sab_napi_parker_t *, uint64_t),
    int (*leave)(sab_napi_parker_t *, int), int (*between)(sab_napi_parker_t *), int nudged,
    uint64_t deadline, int *woken) {
  *woken = 0;
  for (;;) {
    int watched = nudged && (__atomic_load_n(&wd_running, __ATOMIC_ACQUIRE) || wd_start());
    int r;
    uint64_t now = deadline == UINT64_MAX ? 0 : sab_now();
    if (now >= deadline) {
      /* SAB_OK here: a notify took the record first. */
      r = leave(p, SAB_TIMED_OUT);
    } else {
      uint64_t until = deadline;
      if (watched) {
        wd_wake(); /* after the caller queued the record: see the top */
      } else {
        uint64_t slice = slice_ns();
        if (now == 0) now = sab_now();
        if (deadline - now > slice) until = now + slice;
      }
      r = park(p, until);
      if (r == SAB_PENDING) {
        if (sab_napi_env_terminating(e)) {
          /* Leave the queue; a notify may have taken us meanwhile. */
          *woken = leave(p, SAB_CANCELLED) == SAB_OK;
          return SAB_NAPI_TERMINATED;
        }
        if (between == NULL || (r = between(p)) == SAB_PENDING) continue;
      }
    }
    if (r == SAB_OK && sab_napi_env_stopping(e)) {
      /* Woken, but this thread will never run JS again (terminate()
       * arrived while we slept): the wake would be lost with it. */
      *woken = 1;
      return SAB_NAPI_TERMINATED;
    }
    return r;
  }
}

int sab_napi_park(sab_env_t *e, sab_waiter_t *w, uint64_t deadline, int *woken) {
  local_parker_t p = {{local_park, local_leave, NULL}, w};
  /* The functions passed as constants: direct calls, inlined. */
  return park_loop(e, &p.base, local_park, local_leave, NULL, 1, deadline, woken);
}

int sab_napi_park_on(sab_env_t *e, sab_napi_parker_t *p, uint64_t deadline, int *woken) {
  return park_loop(e, p, p->park, p->leave, p->between, 0, deadline, woken);
}
