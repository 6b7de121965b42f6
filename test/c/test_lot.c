/*
 * Tests of the parking lot as plain C, with real threads. Built and run
 * by test/c/Makefile plainly, under ASan+UBSan, under TSan, and with the
 * portable parker. Asserts here survive NDEBUG.
 */
#define _POSIX_C_SOURCE 200809L
#include "sabsync.h"
#include "check.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Wait until `n` records are queued on `cell`. */
static void await_waiters(const void *cell, uint32_t n) {
  while (sab_waiters((uintptr_t)cell) != n) sleep_ms(1);
}

static void test_not_equal_and_zero_timeout(void) {
  int32_t cell = 5;
  CHECK(sab_wait(&cell, 4, 4, UINT64_MAX) == SAB_NOT_EQUAL);
  CHECK(sab_wait(&cell, 4, 5, 0) == SAB_TIMED_OUT);
  int64_t big = (int64_t)1 << 40;
  CHECK(sab_wait(&big, 8, 0, UINT64_MAX) == SAB_NOT_EQUAL);
  CHECK(sab_wait(&big, 8, (int64_t)1 << 40, 0) == SAB_TIMED_OUT);
  CHECK(sab_waiters((uintptr_t)&cell) == 0);
  CHECK(sab_notify((uintptr_t)&cell, UINT64_MAX) == 0);
}

static void test_timeout_never_early(void) {
  int32_t cell = 0;
  for (int i = 0; i < 5; i++) {
    uint64_t t0 = sab_now();
    CHECK(sab_wait(&cell, 4, 0, 15 * MS) == SAB_TIMED_OUT);
    CHECK(sab_now() - t0 >= 15 * MS);
  }
  CHECK(sab_waiters((uintptr_t)&cell) == 0);
}

struct fifo_arg {
  int32_t *cell;
  int id;
  int woke; /* atomic */
  int result;
};

static void *fifo_waiter(void *p) {
  struct fifo_arg *a = p;
  a->result = sab_wait(a->cell, 4, 0, UINT64_MAX);
  __atomic_store_n(&a->woke, 1, __ATOMIC_RELEASE);
  return NULL;
}

static void test_fifo_and_exact_counts(void) {
  enum { N = 8 };
  int32_t cell = 0;
  pthread_t th[N];
  struct fifo_arg args[N];
  for (int i = 0; i < N; i++) {
    args[i] = (struct fifo_arg){&cell, i, 0, -1};
    pthread_create(&th[i], NULL, fifo_waiter, &args[i]);
    await_waiters(&cell, (uint32_t)i + 1); /* queue them in a known order */
  }
  /* One at a time: each notify wakes exactly the oldest. */
  for (int i = 0; i < 3; i++) {
    CHECK(sab_notify((uintptr_t)&cell, 1) == 1);
    while (!__atomic_load_n(&args[i].woke, __ATOMIC_ACQUIRE)) sleep_ms(1);
    for (int j = i + 1; j < N; j++) CHECK(!__atomic_load_n(&args[j].woke, __ATOMIC_ACQUIRE));
  }
  CHECK(sab_waiters((uintptr_t)&cell) == N - 3);
  CHECK(sab_notify((uintptr_t)&cell, 2) == 2);
  CHECK(sab_notify((uintptr_t)&cell, UINT64_MAX) == N - 5);
  CHECK(sab_notify((uintptr_t)&cell, UINT64_MAX) == 0);
  for (int i = 0; i < N; i++) {
    pthread_join(th[i], NULL);
    CHECK(args[i].result == SAB_OK);
  }
}

struct wide_arg {
  void *cell;
  int size;
  int result;
};

static void *wide_waiter(void *p) {
  struct wide_arg *a = p;
  a->result = sab_wait(a->cell, a->size, 0, UINT64_MAX);
  return NULL;
}

/* A 4-byte and an 8-byte waiter on one address share one queue; a
 * neighbour 4 bytes on is a different queue. */
static void test_int32_and_int64_share_an_address(void) {
  int64_t cells[2] = {0, 0};
  struct wide_arg a = {&cells[0], 8, -1}, b = {&cells[0], 4, -1},
                  c = {(char *)&cells[0] + 4, 4, -1};
  pthread_t ta, tb, tc;
  pthread_create(&ta, NULL, wide_waiter, &a);
  await_waiters(&cells[0], 1);
  pthread_create(&tb, NULL, wide_waiter, &b);
  await_waiters(&cells[0], 2);
  pthread_create(&tc, NULL, wide_waiter, &c);
  await_waiters((char *)&cells[0] + 4, 1);
  CHECK(sab_notify((uintptr_t)&cells[0], UINT64_MAX) == 2);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  CHECK(a.result == SAB_OK && b.result == SAB_OK);
  CHECK(sab_waiters((uintptr_t)&cells[0] + 4) == 1);
  CHECK(sab_notify((uintptr_t)&cells[0] + 4, 1) == 1);
  pthread_join(tc, NULL);
  CHECK(c.result == SAB_OK);
}

struct race_arg {
  int32_t *cell;
  int result;
};

static void *race_waiter(void *p) {
  struct race_arg *a = p;
  a->result = sab_wait(a->cell, 4, 0, 1 * MS);
  return NULL;
}

/* A notify racing a timeout: the count and the result always agree. */
static void test_notify_races_timeout(void) {
  int32_t cell = 0;
  int woke = 0, timed = 0;
  for (int i = 0; i < 400; i++) {
    struct race_arg a = {&cell, -1};
    pthread_t t;
    pthread_create(&t, NULL, race_waiter, &a);
    /* Aim the notify around the moment the 1 ms deadline passes. */
    uint64_t until = sab_now() + (uint64_t)(i % 20) * 100000u;
    while (sab_now() < until) {
    }
    uint64_t n = sab_notify((uintptr_t)&cell, 1);
    pthread_join(t, NULL);
    if (n == 1) {
      CHECK(a.result == SAB_OK);
      woke++;
    } else {
      CHECK(n == 0);
      CHECK(a.result == SAB_TIMED_OUT || a.result == SAB_NOT_EQUAL);
      timed++;
    }
  }
  CHECK(sab_waiters((uintptr_t)&cell) == 0);
  printf("# notify vs timeout: %d woken, %d timed out\n", woke, timed);
}

static int async_woken; /* atomic */
static void on_wake(sab_waiter_t *w) {
  (void)w;
  __atomic_fetch_add(&async_woken, 1, __ATOMIC_SEQ_CST);
}

static void test_async_records(void) {
  int32_t cell = 7;
  sab_waiter_t a, b, c;
  sab_waiter_init_async(&a, on_wake);
  sab_waiter_init_async(&b, on_wake);
  sab_waiter_init_async(&c, on_wake);
  CHECK(sab_wait_enqueue(&a, &cell, 4, 6) == SAB_NOT_EQUAL);
  CHECK(sab_wait_enqueue(&a, &cell, 4, 7) == SAB_PENDING);
  CHECK(sab_wait_enqueue(&b, &cell, 4, 7) == SAB_PENDING);
  CHECK(sab_wait_enqueue(&c, &cell, 4, 7) == SAB_PENDING);
  CHECK(sab_waiters((uintptr_t)&cell) == 3);
  /* Cancel the middle one: FIFO order of the rest is kept. */
  CHECK(sab_wait_cancel(&b, SAB_CANCELLED) == SAB_CANCELLED);
  CHECK(sab_wait_cancel(&b, SAB_TIMED_OUT) == SAB_CANCELLED);
  CHECK(sab_notify((uintptr_t)&cell, 1) == 1);
  CHECK(async_woken == 1);
  CHECK(sab_wait_cancel(&a, SAB_TIMED_OUT) == SAB_OK);
  CHECK(sab_wait_cancel(&c, SAB_TIMED_OUT) == SAB_TIMED_OUT);
  CHECK(sab_notify((uintptr_t)&cell, UINT64_MAX) == 0);
  CHECK(async_woken == 1);
  CHECK(sab_bucket_counts()[sab_bucket_of((uintptr_t)&cell) * SAB_COUNT_STRIDE] == 0);
}

/* A lock built on wait/notify: the counter is exact after a storm. */
static int32_t lock_word, lock_waiters;
static long counter;
enum { THREADS = 4, ITERS = 20000 };

static void spin_lock(void) {
  int32_t c = 0;
  if (__atomic_compare_exchange_n(&lock_word, &c, 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) return;
  if (c != 2) c = __atomic_exchange_n(&lock_word, 2, __ATOMIC_ACQUIRE);
  while (c != 0) {
    sab_wait(&lock_word, 4, 2, UINT64_MAX);
    c = __atomic_exchange_n(&lock_word, 2, __ATOMIC_ACQUIRE);
  }
}

static void spin_unlock(void) {
  if (__atomic_exchange_n(&lock_word, 0, __ATOMIC_RELEASE) == 2)
    sab_notify((uintptr_t)&lock_word, 1);
}

static void *locker(void *p) {
  (void)p;
  for (int i = 0; i < ITERS; i++) {
    spin_lock();
    counter++;
    spin_unlock();
  }
  return NULL;
}

static void test_lock_storm(void) {
  pthread_t th[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, locker, NULL);
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  CHECK(counter == (long)THREADS * ITERS);
  CHECK(sab_waiters((uintptr_t)&lock_word) == 0);
  (void)lock_waiters;
}

struct nudge_arg {
  int32_t cell;
  int result;
};

static void *nudge_waiter(void *p) {
  struct nudge_arg *a = p;
  sab_waiter_t w;
  sab_waiter_init_blocking(&w);
  CHECK(sab_wait_enqueue(&w, &a->cell, 4, 0) == SAB_PENDING);
  a->result = sab_wait_park(&w, UINT64_MAX);
  CHECK(sab_wait_cancel(&w, SAB_CANCELLED) == SAB_CANCELLED);
  sab_waiter_destroy(&w);
  return NULL;
}

/* A nudge returns a parked waiter to its caller, still queued. */
static void test_nudge(void) {
  struct nudge_arg a = {0, -1};
  pthread_t t;
  pthread_create(&t, NULL, nudge_waiter, &a);
  await_waiters(&a.cell, 1);
  sleep_ms(20); /* past the spin, asleep */
  /* The one parked record: */
  CHECK(sab_nudge_all() == 1);
  pthread_join(t, NULL);
  CHECK(a.result == SAB_PENDING);
  CHECK(sab_waiters((uintptr_t)&a.cell) == 0);
}

struct watch_arg {
  int32_t *word;
  uint32_t owner;
  int result;
};

/* Wait while the word names a live owner; answer how the wait ended. */
static void *watch_waiter(void *p) {
  struct watch_arg *a = p;
  for (;;) {
    uint32_t epoch = sab_death_epoch();
    int32_t v = __atomic_load_n(a->word, __ATOMIC_SEQ_CST);
    if (!sab_owner_alive((uint32_t)v)) {
      a->result = SAB_OWNER_DEAD;
      return NULL;
    }
    sab_waiter_t w;
    sab_waiter_init_blocking(&w);
    int r = sab_wait_enqueue_watch(&w, a->word, 4, v, (uint32_t)v, epoch);
    if (r == SAB_PENDING) r = sab_wait_park(&w, UINT64_MAX);
    sab_waiter_destroy(&w);
    if (r == SAB_NOT_EQUAL) continue;
    a->result = r;
    if (r == SAB_OK) continue; /* woken: look again */
  }
}

/* The death of an owner wakes those that watch it, and only them. */
static void test_owner_death(void) {
  uint32_t a = sab_owner_new(), b = sab_owner_new();
  CHECK(a != 0 && b != 0 && a != b);
  CHECK(sab_owner_alive(a) && sab_owner_alive(b));
  int32_t word_a = (int32_t)a, word_b = (int32_t)b;
  struct watch_arg wa = {&word_a, a, -1}, wb = {&word_b, b, -1};
  pthread_t ta, tb;
  pthread_create(&ta, NULL, watch_waiter, &wa);
  pthread_create(&tb, NULL, watch_waiter, &wb);
  await_waiters(&word_a, 1);
  await_waiters(&word_b, 1);
  sab_owner_died(a);
  CHECK(!sab_owner_alive(a) && sab_owner_alive(b));
  pthread_join(ta, NULL);
  CHECK(wa.result == SAB_OWNER_DEAD);
  CHECK(sab_waiters((uintptr_t)&word_b) == 1);
  sab_owner_died(b);
  pthread_join(tb, NULL);
  CHECK(wb.result == SAB_OWNER_DEAD);
  /* An epoch that moved refuses the enqueue. */
  uint32_t c = sab_owner_new();
  int32_t word_c = (int32_t)c;
  uint32_t epoch = sab_death_epoch();
  sab_owner_died(sab_owner_new());
  sab_waiter_t w;
  sab_waiter_init_blocking(&w);
  CHECK(sab_wait_enqueue_watch(&w, &word_c, 4, (int32_t)c, c, epoch) == SAB_OWNER_DEAD);
  CHECK(sab_wait_enqueue_watch(&w, &word_c, 4, 0, c, epoch) == SAB_NOT_EQUAL);
  sab_waiter_destroy(&w);
  CHECK(sab_waiters((uintptr_t)&word_c) == 0);
}

int main(void) {
  test_not_equal_and_zero_timeout();
  test_timeout_never_early();
  test_fifo_and_exact_counts();
  test_int32_and_int64_share_an_address();
  test_notify_races_timeout();
  test_async_records();
  test_lock_storm();
  test_nudge();
  test_owner_death();
  return report("test_lot");
}
