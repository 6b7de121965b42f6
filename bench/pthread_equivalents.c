/*
 * The C equivalents of the RWLock, CondVar and Barrier benchmarks: the same
 * work on pthreads, as extra rows of bench/cases/{rwlock,condvar,barrier}.js,
 * which build and run this program. Each mode prints "FIGURE CHECK" (CHECK
 * is 1 when the run verified its own result, else 0):
 *
 *   pthread_equivalents rwlock THREADS MS WRITE_EVERY  -> total ops/s
 *     THREADS threads look up a 256-int table under a read lock (sum it,
 *     check it is consistent) and, one operation in WRITE_EVERY, rewrite it
 *     under the write lock, for MS milliseconds. The rwlock prefers writers,
 *     as sabsync's RWLock does (glibc's default prefers readers).
 *   pthread_equivalents condvar ROUNDS                  -> ns per round trip
 *     Two threads hand a turn back and forth under a pthread_mutex, each
 *     waiting on its own pthread_cond; a round trip is two hand-overs.
 *   pthread_equivalents barrier THREADS ROUNDS          -> ns per round
 *     THREADS threads pass a pthread_barrier ROUNDS times; the check: every
 *     round had exactly one leader (PTHREAD_BARRIER_SERIAL_THREAD) and every
 *     party saw all THREADS arrivals of its round when it passed.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* Start line: every thread counts itself in, then spins until go. */
static int ready, go;
static void start_line(void) {
  __atomic_add_fetch(&ready, 1, __ATOMIC_SEQ_CST);
  while (!__atomic_load_n(&go, __ATOMIC_SEQ_CST)) {
  }
}
static void wait_ready(int n) {
  while (__atomic_load_n(&ready, __ATOMIC_SEQ_CST) < n) {
  }
}

/* ---- rwlock: read-mostly ---- */

#define TABLE 256
static pthread_rwlock_t rw;
static int table[TABLE];
static int stop;
static long write_every;

struct rw_result {
  long ops, bad;
};

static void *rw_thread(void *arg) {
  struct rw_result *r = arg;
  long ops = 0, bad = 0;
  start_line();
  while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
    if (ops % write_every == 0) {
      pthread_rwlock_wrlock(&rw);
      int v = table[0] + 1;
      for (int i = 0; i < TABLE; i++) table[i] = v;
      pthread_rwlock_unlock(&rw);
    } else {
      pthread_rwlock_rdlock(&rw);
      int v = table[0];
      long sum = 0;
      for (int i = 0; i < TABLE; i++) sum += table[i];
      if (sum != (long)v * TABLE) bad++;
      pthread_rwlock_unlock(&rw);
    }
    ops++;
  }
  r->ops = ops;
  r->bad = bad;
  return NULL;
}

static int run_rwlock(int threads, long ms) {
  pthread_rwlockattr_t attr;
  pthread_rwlockattr_init(&attr);
  pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  pthread_rwlock_init(&rw, &attr);
  pthread_t *t = calloc((size_t)threads, sizeof *t);
  struct rw_result *r = calloc((size_t)threads, sizeof *r);
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, rw_thread, &r[i]);
  wait_ready(threads);
  double t0 = now_ns();
  __atomic_store_n(&go, 1, __ATOMIC_SEQ_CST);
  struct timespec d = {ms / 1000, (ms % 1000) * 1000000};
  nanosleep(&d, NULL);
  __atomic_store_n(&stop, 1, __ATOMIC_SEQ_CST);
  long ops = 0, bad = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    ops += r[i].ops;
    bad += r[i].bad;
  }
  double secs = (now_ns() - t0) / 1e9;
  printf("%.0f %d\n", (double)ops / secs, bad == 0 && ops > 0);
  return 0;
}

/* ---- condvar: ping-pong ---- */

static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv[2] = {PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER};
static int turn;
static long trips, rounds;

static void *cv_thread(void *arg) {
  int me = (int)(long)arg;
  start_line();
  for (long k = 0; k < rounds; k++) {
    pthread_mutex_lock(&m);
    while (turn != me) pthread_cond_wait(&cv[me], &m);
    turn = 1 - me;
    if (me == 1) trips++;
    pthread_cond_signal(&cv[1 - me]);
    pthread_mutex_unlock(&m);
  }
  return NULL;
}

static int run_condvar(long n) {
  rounds = n;
  pthread_t t[2];
  for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, cv_thread, (void *)i);
  wait_ready(2);
  double t0 = now_ns();
  __atomic_store_n(&go, 1, __ATOMIC_SEQ_CST);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  printf("%.1f %d\n", (now_ns() - t0) / (double)rounds, trips == rounds);
  return 0;
}

/* ---- barrier: rounds ---- */

static pthread_barrier_t bar;
static int parties;
static int *arrived, *leaders;

struct bar_result {
  long passed, short_rounds;
  double ns;
};

static void *bar_thread(void *arg) {
  struct bar_result *r = arg;
  long passed = 0, short_rounds = 0;
  long warm = rounds / 5; /* the first fifth warms up, untimed */
  start_line();
  double t0 = now_ns();
  for (long k = 0; k < rounds; k++) {
    if (k == warm) t0 = now_ns();
    __atomic_add_fetch(&arrived[k], 1, __ATOMIC_SEQ_CST);
    if (pthread_barrier_wait(&bar) == PTHREAD_BARRIER_SERIAL_THREAD) {
      __atomic_add_fetch(&leaders[k], 1, __ATOMIC_SEQ_CST);
    }
    if (__atomic_load_n(&arrived[k], __ATOMIC_SEQ_CST) != parties) short_rounds++;
    passed++;
  }
  r->ns = (now_ns() - t0) / (double)(rounds - warm);
  r->passed = passed;
  r->short_rounds = short_rounds;
  return NULL;
}

static int run_barrier(int threads, long n) {
  rounds = n;
  parties = threads;
  arrived = calloc((size_t)n, sizeof *arrived);
  leaders = calloc((size_t)n, sizeof *leaders);
  pthread_barrier_init(&bar, NULL, (unsigned)threads);
  pthread_t *t = calloc((size_t)threads, sizeof *t);
  struct bar_result *r = calloc((size_t)threads, sizeof *r);
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, bar_thread, &r[i]);
  wait_ready(threads);
  __atomic_store_n(&go, 1, __ATOMIC_SEQ_CST);
  int ok = 1;
  double ns = 0;
  for (int i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    if (r[i].passed != n || r[i].short_rounds != 0) ok = 0;
    if (r[i].ns > ns) ns = r[i].ns;
  }
  for (long k = 0; k < n; k++) {
    if (leaders[k] != 1 || arrived[k] != threads) ok = 0;
  }
  printf("%.1f %d\n", ns, ok);
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 5 && strcmp(argv[1], "rwlock") == 0) {
    write_every = atol(argv[4]);
    return run_rwlock(atoi(argv[2]), atol(argv[3]));
  }
  if (argc == 3 && strcmp(argv[1], "condvar") == 0) return run_condvar(atol(argv[2]));
  if (argc == 4 && strcmp(argv[1], "barrier") == 0)
    return run_barrier(atoi(argv[2]), atol(argv[3]));
  fprintf(stderr,
          "usage: %s rwlock THREADS MS WRITE_EVERY | condvar ROUNDS | barrier THREADS ROUNDS\n",
          argv[0]);
  return 2;
}
