/*
 * The named locks' table (src/core/locks.c): grant order per name, shared
 * and exclusive, ifAvailable, steal, cancel, an agent that leaves, names
 * that are two locks when their code units differ, nothing kept at rest;
 * then threads racing requests, releases and cancels on a few names, with
 * exclusion checked by a counter per name (TSan sees the table's lock).
 */
#define _POSIX_C_SOURCE 200809L
#include "sabsync_locks.h"
#include "check.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* An agent that records its grants and robberies. */
typedef struct {
  sab_lclient_t cl;
  void *granted[64];
  int ngranted, nstolen;
} agent_t;

static void on_granted(void *ctx) {
  agent_t *a = *(agent_t **)ctx;
  if (a->ngranted < 64) a->granted[a->ngranted] = ctx;
  a->ngranted++;
}
static void on_stolen(void *watch) { ((agent_t *)watch)->nstolen++; }

static void agent_init(agent_t *a, uint32_t thread) {
  memset(a, 0, sizeof *a);
  a->cl.granted = on_granted;
  a->cl.stolen = on_stolen;
  a->cl.pid = 1;
  a->cl.thread = thread;
}

static size_t name_of(const char *s, uint16_t *u) {
  size_t n = strlen(s);
  for (size_t i = 0; i < n; i++) u[i] = (uint8_t)s[i];
  return n;
}

/* A waiting request's ctx: a pointer to its agent, as the binding's
 * record would point to its env. */
typedef struct {
  agent_t *a;
} wait_t;

static int req(agent_t *a, const char *s, int shared, int how, wait_t *w, uint64_t *t) {
  uint16_t u[64];
  size_t n = name_of(s, u);
  if (w != NULL) w->a = a;
  return sab_locks_request(&a->cl, u, n, shared, how, w, t);
}

static void expect_empty(void) {
  size_t r, n;
  sab_locks_counts(&r, &n);
  CHECK(r == 0 && n == 0);
}

static void test_order_and_modes(void) {
  agent_t a, b;
  agent_init(&a, 1);
  agent_init(&b, 2);
  uint64_t t1, t2, t3, t4, tx;
  wait_t w2, w3, w4;
  CHECK(req(&a, "x", 0, SAB_LOCKS_WAIT, NULL, &t1) == SAB_LOCKS_GRANTED);
  CHECK(req(&b, "x", 1, SAB_LOCKS_WAIT, NULL, &tx) == SAB_LOCKS_WOULD_WAIT);
  CHECK(req(&b, "x", 1, SAB_LOCKS_IF_AVAILABLE, NULL, &tx) == SAB_LOCKS_UNAVAILABLE);
  CHECK(req(&b, "x", 1, SAB_LOCKS_WAIT, &w2, &t2) == SAB_LOCKS_QUEUED);
  CHECK(req(&b, "x", 0, SAB_LOCKS_WAIT, &w3, &t3) == SAB_LOCKS_QUEUED);
  CHECK(req(&a, "x", 1, SAB_LOCKS_WAIT, &w4, &t4) == SAB_LOCKS_QUEUED);
  CHECK(req(&a, "y", 0, SAB_LOCKS_WAIT, NULL, &tx) == SAB_LOCKS_GRANTED); /* another name */
  CHECK(sab_locks_release(&a.cl, tx) == 1);
  /* The exclusive holder goes: the shared head is granted, the exclusive
   * behind it waits, and so does the shared behind that (FIFO). */
  CHECK(sab_locks_release(&b.cl, t1) == 0); /* not b's */
  CHECK(sab_locks_release(&a.cl, t1) == 1);
  CHECK(b.ngranted == 1 && b.granted[0] == &w2);
  CHECK(a.ngranted == 0);
  CHECK(sab_locks_release(&b.cl, t2) == 1);
  CHECK(b.ngranted == 2 && b.granted[1] == &w3);
  CHECK(sab_locks_release(&b.cl, t3) == 1);
  CHECK(a.ngranted == 1 && a.granted[0] == &w4);
  CHECK(sab_locks_release(&a.cl, t4) == 1);
  CHECK(sab_locks_release(&a.cl, t4) == 0); /* twice */
  expect_empty();
}

static void test_cancel_lets_shared_through(void) {
  agent_t a, b;
  agent_init(&a, 1);
  agent_init(&b, 2);
  uint64_t t1, t2, t3;
  wait_t w2, w3;
  CHECK(req(&a, "s", 1, SAB_LOCKS_WAIT, NULL, &t1) == SAB_LOCKS_GRANTED);
  CHECK(req(&b, "s", 0, SAB_LOCKS_WAIT, &w2, &t2) == SAB_LOCKS_QUEUED);
  CHECK(req(&b, "s", 1, SAB_LOCKS_WAIT, &w3, &t3) == SAB_LOCKS_QUEUED);
  /* The exclusive head leaves the queue: the shared one behind it joins
   * the shared holder. */
  CHECK(sab_locks_cancel(t2) == 1);
  CHECK(b.ngranted == 1 && b.granted[0] == &w3);
  CHECK(sab_locks_cancel(t3) == 0); /* held now: not waiting */
  CHECK(sab_locks_cancel(t2) == 0); /* gone */
  CHECK(sab_locks_release(&a.cl, t1) == 1 && sab_locks_release(&b.cl, t3) == 1);
  expect_empty();
}

static void test_steal(void) {
  agent_t a, b;
  agent_init(&a, 1);
  agent_init(&b, 2);
  uint64_t t1, t2, tq, ts;
  wait_t wq;
  CHECK(req(&a, "st", 1, SAB_LOCKS_WAIT, NULL, &t1) == SAB_LOCKS_GRANTED);
  CHECK(req(&a, "st", 1, SAB_LOCKS_WAIT, NULL, &t2) == SAB_LOCKS_GRANTED);
  CHECK(req(&b, "st", 0, SAB_LOCKS_WAIT, &wq, &tq) == SAB_LOCKS_QUEUED);
  CHECK(sab_locks_watch(&a.cl, &a) == 1);
  CHECK(req(&b, "st", 0, SAB_LOCKS_STEAL, NULL, &ts) == SAB_LOCKS_GRANTED);
  CHECK(a.nstolen == 1); /* the watch fired once, for both */
  uint64_t robbed[4];
  CHECK(sab_locks_take_stolen(&a.cl, robbed, 4) == 2);
  CHECK(robbed[0] + robbed[1] == t1 + t2);
  CHECK(sab_locks_release(&a.cl, t1) == 0); /* robbed: nothing to release */
  CHECK(b.ngranted == 0);                   /* the queue waits behind the thief */
  CHECK(sab_locks_watch(&a.cl, &a) == 1 && sab_locks_unwatch(&a.cl, &a) == 1);
  CHECK(sab_locks_unwatch(&a.cl, &a) == 0);
  CHECK(sab_locks_release(&b.cl, ts) == 1);
  CHECK(b.ngranted == 1 && b.granted[0] == &wq);
  CHECK(sab_locks_release(&b.cl, tq) == 1);
  sab_locks_leave(&a.cl);
  expect_empty();
}

static void test_leave_and_names(void) {
  agent_t a, b;
  agent_init(&a, 1);
  agent_init(&b, 2);
  uint64_t t, tw, tx;
  wait_t w;
  for (int i = 0; i < 3; i++)
    CHECK(req(&a, i == 0 ? "l0" : i == 1 ? "l1" : "l2", 0, 0, NULL, &t) == 1);
  CHECK(req(&b, "l1", 0, SAB_LOCKS_WAIT, &w, &tw) == SAB_LOCKS_QUEUED);
  sab_locks_leave(&a.cl); /* every lock of a released: b's request granted */
  CHECK(b.ngranted == 1);
  CHECK(sab_locks_release(&b.cl, tw) == 1);
  expect_empty();

  /* Names differing in any code unit, lone surrogates included, are two. */
  uint16_t d800[] = {0xd800}, fffd[] = {0xfffd}, dbff[] = {0xdbff};
  CHECK(sab_locks_request(&a.cl, d800, 1, 0, 0, NULL, &t) == 1);
  CHECK(sab_locks_request(&a.cl, fffd, 1, 0, 0, NULL, &tw) == 1);
  CHECK(sab_locks_request(&a.cl, dbff, 1, 0, 0, NULL, &tx) == 1);
  CHECK(sab_locks_request(&a.cl, NULL, 0, 0, 0, NULL, &tx) == 1); /* the empty name */
  size_t r, n;
  sab_locks_counts(&r, &n);
  CHECK(r == 4 && n == 4);
  sab_locks_leave(&a.cl);
  uint16_t big[SAB_LOCKS_NAME_MAX + 1] = {0};
  CHECK(sab_locks_request(&a.cl, big, SAB_LOCKS_NAME_MAX + 1, 0, 0, NULL, &t) == SAB_LOCKS_E_NAME);
  CHECK(sab_locks_request(&a.cl, big, SAB_LOCKS_NAME_MAX, 0, 0, NULL, &t) == 1);
  sab_locks_leave(&a.cl);
  expect_empty();

  /* Many names at once, then none: the tables grow, then shrink. */
  static uint64_t ts[5000];
  for (int i = 0; i < 5000; i++) {
    uint16_t u[2] = {(uint16_t)i, (uint16_t)(i >> 16)};
    CHECK(sab_locks_request(&a.cl, u, 2, 0, 0, NULL, &ts[i]) == 1);
  }
  sab_locks_counts(&r, &n);
  CHECK(r == 5000 && n == 5000);
  for (int i = 0; i < 5000; i++) CHECK(sab_locks_release(&a.cl, ts[i]) == 1);
  expect_empty();
}

/* ---- threads racing ---- */

#define THREADS 4
#define ROUNDS  20000
#define NAMES   3

static int counters[NAMES], inside[NAMES], overlaps;

typedef struct {
  agent_t a;
  unsigned seed;
  pthread_mutex_t mu; /* this thread's grants come from any thread */
  pthread_cond_t cv;
  int granted;
  int entered;
} racer_t;

static void racer_granted(void *ctx) {
  racer_t *r = ctx;
  pthread_mutex_lock(&r->mu);
  r->granted = 1;
  pthread_cond_signal(&r->cv);
  pthread_mutex_unlock(&r->mu);
}

static void *race(void *arg) {
  racer_t *r = arg;
  for (int k = 0; k < ROUNDS; k++) {
    int i = (int)(rand_r(&r->seed) % NAMES);
    uint16_t u[1] = {(uint16_t)('a' + i)};
    uint64_t t;
    int got = sab_locks_request(&r->a.cl, u, 1, 0, SAB_LOCKS_WAIT, NULL, &t);
    if (got == SAB_LOCKS_WOULD_WAIT) {
      r->granted = 0;
      got = sab_locks_request(&r->a.cl, u, 1, 0, SAB_LOCKS_WAIT, r, &t);
      if (got == SAB_LOCKS_QUEUED && k % 7 == 0 && sab_locks_cancel(t)) continue;
      if (got == SAB_LOCKS_QUEUED) {
        pthread_mutex_lock(&r->mu);
        while (!r->granted) pthread_cond_wait(&r->cv, &r->mu);
        pthread_mutex_unlock(&r->mu);
      }
    }
    if (__atomic_fetch_add(&inside[i], 1, __ATOMIC_SEQ_CST) != 0)
      __atomic_fetch_add(&overlaps, 1, __ATOMIC_SEQ_CST);
    counters[i]++; /* plain: only the lock orders it */
    r->entered++;
    __atomic_fetch_sub(&inside[i], 1, __ATOMIC_SEQ_CST);
    if (sab_locks_release(&r->a.cl, t) != 1) __atomic_fetch_add(&overlaps, 1000, __ATOMIC_SEQ_CST);
  }
  return NULL;
}

static void test_threads_race(void) {
  static racer_t rs[THREADS];
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) {
    agent_init(&rs[i].a, (uint32_t)i);
    rs[i].a.cl.granted = racer_granted;
    rs[i].seed = (unsigned)i + 1;
    pthread_mutex_init(&rs[i].mu, NULL);
    pthread_cond_init(&rs[i].cv, NULL);
  }
  for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, race, &rs[i]);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  int sum = 0, entered = 0;
  for (int i = 0; i < NAMES; i++) sum += counters[i];
  for (int i = 0; i < THREADS; i++) entered += rs[i].entered;
  /* Every round that got the lock counted (those cancelled while waiting
   * did not enter), and none lost. */
  CHECK(sum == entered && entered > THREADS * ROUNDS / 2);
  CHECK(overlaps == 0);
  expect_empty();
}

int main(void) {
  test_order_and_modes();
  test_cancel_lets_shared_through();
  test_steal();
  test_leave_and_names();
  test_threads_race();
  return report("test_locks");
}
