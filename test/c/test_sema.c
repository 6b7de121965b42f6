/*
 * Tests of the token semaphore and the rate limiter as plain C, with real
 * threads. Built and run by test/c/Makefile in every flavour (plain,
 * ASan+UBSan, TSan, portable parker). Asserts here survive NDEBUG.
 */
#define _POSIX_C_SOURCE 200809L
#include "sabsync.h"
#include "check.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOT(t) ((t) & ~SAB_SEMA_RECOVERED)

/* Semaphore memory: 8-aligned, room for up to 64 slots. */
typedef struct {
  int64_t words[(8 + 3 * 64) / 2 + 1];
} mem_t;

static void make(sab_sema_t *s, mem_t *m, uint32_t nr) {
  memset(m, 0, sizeof *m);
  CHECK(sab_sema_init(s, m, sizeof *m, nr) == 0);
}

static void await_waiting(const sab_sema_t *s, uint32_t n) {
  while (sab_sema_waiting(s) != n) sleep_ms(1);
}

static void test_layout_and_checks(void) {
  mem_t m;
  sab_sema_t s, v;
  CHECK(sab_sema_bytes(0) == 0);
  CHECK(sab_sema_bytes(SAB_SEMA_MAX + 1) == 0);
  CHECK(sab_sema_bytes(1) == 48);
  CHECK(sab_sema_bytes(3) % 8 == 0 && sab_sema_bytes(3) >= 4 * (8 + 9));
  CHECK(sab_sema_init(&s, m.words, 16, 3) == SAB_E_INVAL);
  CHECK(sab_sema_init(&s, (char *)m.words + 4, sizeof m - 4, 3) == SAB_E_INVAL);
  memset(&m, 0, sizeof m);
  CHECK(sab_sema_open(&v, &m, sizeof m) == SAB_E_CORRUPT);
  make(&s, &m, 3);
  CHECK(sab_sema_open(&v, &m, sizeof m) == 0 && v.nr == 3 && v.base == s.base);
  CHECK(sab_sema_open(&v, &m, sab_sema_bytes(3) - 8) == SAB_E_CORRUPT);
  /* A kept view sees its memory made a semaphore of another size, or
   * overwritten. */
  CHECK(sab_sema_check(&v) == 0);
  sab_sema_t other;
  CHECK(sab_sema_init(&other, &m, sizeof m, 2) == 0 && sab_sema_check(&v) == SAB_E_CORRUPT);
  make(&s, &m, 3);
  CHECK(sab_sema_check(&v) == 0);
  s.base[0] = -1;
  CHECK(sab_sema_check(&v) == SAB_E_CORRUPT);
  make(&s, &m, 3);
  /* Scribbled hints (frees, next) are only hints: never a token out of
   * range, never a refusal while a slot is free. */
  uint32_t tok;
  s.base[1] = 99;
  s.base[3] = 1000;
  CHECK(sab_sema_try(&s, 1, &tok) == SAB_OK && tok < 3);
  make(&s, &m, 3);
  s.base[1] = -5; /* frees: only a value that changes */
  CHECK(sab_sema_try(&s, 1, &tok) == SAB_OK && tok == 0);
  /* A holder word that is neither free nor an owner id is skipped. */
  make(&s, &m, 3);
  s.base[8 + 3 + 1] = (int32_t)0x80000000;
  CHECK(sab_sema_try(&s, 1, &tok) == SAB_OK && tok == 0);
  CHECK(sab_sema_try(&s, 1, &tok) == SAB_OK && tok == 2);
  CHECK(sab_sema_try(&s, 1, &tok) == SAB_TIMED_OUT);
  CHECK(sab_sema_available(&s) == 0);
}

static void test_try_release_and_bad_tokens(void) {
  mem_t m;
  sab_sema_t s;
  uint32_t a = sab_owner_new(), b = sab_owner_new(), tok, info;
  make(&s, &m, 3);
  for (uint32_t i = 0; i < 3; i++) {
    CHECK(sab_sema_try(&s, a, &tok) == SAB_OK);
    CHECK(tok == i);
  }
  CHECK(sab_sema_available(&s) == 0);
  CHECK(sab_sema_try(&s, a, &tok) == SAB_TIMED_OUT);
  CHECK(sab_sema_release(&s, b, 1, NULL) == SAB_E_BAD_TOKEN); /* a stranger */
  CHECK(sab_sema_release(&s, a, 3, NULL) == SAB_E_BAD_TOKEN); /* out of range */
  CHECK(sab_sema_release(&s, a, 1, &info) == 1);
  CHECK(info == SAB_SEMA_POOLED);
  CHECK(sab_sema_release(&s, a, 1, NULL) == SAB_E_BAD_TOKEN); /* twice */
  CHECK(sab_sema_available(&s) == 1);
  /* The most recent: 2, then 0 (1 is pooled), then none. */
  CHECK(sab_sema_release(&s, a, -1, NULL) == 2);
  CHECK(sab_sema_release(&s, a, -1, NULL) == 0);
  CHECK(sab_sema_release(&s, a, -1, NULL) == SAB_E_BAD_TOKEN);
  CHECK(sab_sema_available(&s) == 3);
  /* Next fit: a search starts after the slot granted last (2: so at 0). */
  CHECK(sab_sema_try(&s, b, &tok) == SAB_OK && tok == 0);
  CHECK(sab_sema_try(&s, b, &tok) == SAB_OK && tok == 1);
  CHECK(sab_sema_release(&s, b, 0, NULL) == 0);
  CHECK(sab_sema_try(&s, a, &tok) == SAB_OK && tok == 2);
  CHECK(sab_sema_try(&s, a, &tok) == SAB_OK && tok == 0);
  CHECK(sab_sema_release(&s, b, -1, NULL) == 1);
  CHECK(sab_sema_release(&s, a, -1, NULL) == 0);
  CHECK(sab_sema_release(&s, a, -1, NULL) == 2);
}

struct waiter_arg {
  const sab_sema_t *s;
  uint32_t owner;
  uint64_t timeout;
  int result;
  uint32_t token;
  int order; /* when it got its token */
};

static int order_counter; /* atomic */

static void *waiter(void *p) {
  struct waiter_arg *a = p;
  a->result = sab_sema_wait(a->s, a->owner, a->timeout, &a->token);
  a->order = __atomic_add_fetch(&order_counter, 1, __ATOMIC_SEQ_CST);
  return NULL;
}

/* Strict hand-off (fair_ns 0, RateLimit's turn): released slots go to the
 * oldest waiter; a try never overtakes one. */
static void test_fifo_handoff_no_barging(void) {
  enum { N = 5 };
  mem_t m;
  sab_sema_t s;
  uint32_t holder = sab_owner_new(), tok, info;
  pthread_t th[N];
  struct waiter_arg args[N];
  make(&s, &m, 1);
  s.fair_ns = 0;
  CHECK(sab_sema_try(&s, holder, &tok) == SAB_OK && tok == 0);
  order_counter = 0;
  for (int i = 0; i < N; i++) {
    args[i] = (struct waiter_arg){&s, sab_owner_new(), UINT64_MAX, -1, 0, 0};
    pthread_create(&th[i], NULL, waiter, &args[i]);
    await_waiting(&s, (uint32_t)i + 1);
  }
  CHECK(sab_sema_release(&s, holder, 0, &info) == 0);
  CHECK(info == 0); /* handed, not pooled */
  pthread_join(th[0], NULL);
  CHECK(args[0].result == SAB_OK && args[0].token == 0);
  CHECK(sab_sema_waiting(&s) == N - 1);
  CHECK(sab_sema_try(&s, holder, &tok) == SAB_TIMED_OUT);
  for (int i = 1; i < N; i++) {
    CHECK(sab_sema_release(&s, args[i - 1].owner, -1, NULL) == 0);
    pthread_join(th[i], NULL);
    CHECK(args[i].result == SAB_OK && args[i].order == i + 1);
  }
  CHECK(sab_sema_release(&s, args[N - 1].owner, 0, &info) == 0 && info == SAB_SEMA_POOLED);
  CHECK(sab_sema_waiting(&s) == 0 && sab_sema_available(&s) == 1);
}

/* Never more than nr holders; every acquire served; nothing lost. */
enum { STORM_THREADS = 6, STORM_ITERS = 3000, STORM_NR = 2 };
static int in_use, max_in_use; /* atomic */
static long served;            /* atomic */

static void *stormer(void *p) {
  const sab_sema_t *s = p;
  uint32_t me = sab_owner_new(), tok;
  for (int i = 0; i < STORM_ITERS; i++) {
    int r = (i % 3 == 0) ? sab_sema_try(s, me, &tok) : sab_sema_wait(s, me, UINT64_MAX, &tok);
    if (r == SAB_TIMED_OUT) continue;
    CHECK(r == SAB_OK && SLOT(tok) < STORM_NR);
    int n = __atomic_add_fetch(&in_use, 1, __ATOMIC_SEQ_CST);
    int mx = __atomic_load_n(&max_in_use, __ATOMIC_RELAXED);
    while (n > mx && !__atomic_compare_exchange_n(&max_in_use, &mx, n, 0, __ATOMIC_SEQ_CST,
                                                  __ATOMIC_RELAXED)) {
    }
    for (volatile int k = 0; k < 500; k++) {
    } /* hold it a little, so that holders overlap */
    __atomic_sub_fetch(&in_use, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&served, 1, __ATOMIC_RELAXED);
    CHECK(sab_sema_release(s, me, (i & 1) ? (int64_t)SLOT(tok) : -1, NULL) == (int)SLOT(tok));
  }
  return NULL;
}

static void test_storm(void) {
  mem_t m;
  sab_sema_t s;
  pthread_t th[STORM_THREADS];
  make(&s, &m, STORM_NR);
  for (int i = 0; i < STORM_THREADS; i++) pthread_create(&th[i], NULL, stormer, &s);
  for (int i = 0; i < STORM_THREADS; i++) pthread_join(th[i], NULL);
  CHECK(max_in_use >= 1 && max_in_use <= STORM_NR);
  CHECK(sab_sema_available(&s) == STORM_NR && sab_sema_waiting(&s) == 0);
  printf("# storm: %ld served, at most %d at once\n", served, max_in_use);
}

/* Slots of a dead holder come back: to a queued waiter at the death (R2),
 * and to the next caller when nobody waited (R1), marked RECOVERED. */
static void test_dead_holder(void) {
  mem_t m;
  sab_sema_t s;
  uint32_t dead = sab_owner_new(), tok;
  make(&s, &m, 2);
  CHECK(sab_sema_try(&s, dead, &tok) == SAB_OK && tok == 0);
  CHECK(sab_sema_try(&s, dead, &tok) == SAB_OK && tok == 1);
  struct waiter_arg a = {&s, sab_owner_new(), UINT64_MAX, -1, 0, 0};
  pthread_t t;
  pthread_create(&t, NULL, waiter, &a);
  await_waiting(&s, 1);
  sab_owner_died(dead);
  pthread_join(t, NULL);
  CHECK(a.result == SAB_OK && (a.token & SAB_SEMA_RECOVERED) && SLOT(a.token) == 0);
  CHECK(sab_sema_release(&s, dead, 1, NULL) == SAB_E_BAD_TOKEN); /* not its any more */
  uint32_t other = sab_owner_new();
  CHECK(sab_sema_try(&s, other, &tok) == SAB_OK && tok == (1 | SAB_SEMA_RECOVERED));
  /* The mark is reported once: released and taken again, a plain slot. */
  CHECK(sab_sema_release(&s, other, 1, NULL) == 1);
  CHECK(sab_sema_try(&s, other, &tok) == SAB_OK && tok == 1);
  /* No waiter, nobody looking: the next try reclaims. */
  uint32_t dead2 = sab_owner_new();
  CHECK(sab_sema_release(&s, a.owner, 0, NULL) == 0);
  CHECK(sab_sema_try(&s, dead2, &tok) == SAB_OK && tok == 0);
  sab_owner_died(dead2);
  CHECK(sab_sema_try(&s, other, &tok) == SAB_OK && tok == (0 | SAB_SEMA_RECOVERED));
  /* A death that held nothing here changes nothing. */
  sab_owner_died(sab_owner_new());
  CHECK(sab_sema_try(&s, other, &tok) == SAB_TIMED_OUT);
  CHECK(sab_sema_available(&s) == 0);
}

struct racer_arg {
  const sab_sema_t *s;
  uint32_t victim;
};

static void *killer(void *p) {
  struct racer_arg *a = p;
  sab_owner_died(a->victim);
  return NULL;
}

/* R3: an acquirer racing the death of the holder never sleeps through it. */
static void test_death_races_acquire(void) {
  int rounds = 300, served_ok = 0;
  for (int i = 0; i < rounds; i++) {
    mem_t m;
    sab_sema_t s;
    uint32_t victim = sab_owner_new(), tok;
    make(&s, &m, 1);
    CHECK(sab_sema_try(&s, victim, &tok) == SAB_OK);
    struct waiter_arg a = {&s, sab_owner_new(), 5000 * MS, -1, 0, 0};
    struct racer_arg k = {&s, victim};
    pthread_t tw, tk;
    pthread_create(&tw, NULL, waiter, &a);
    if (i % 2) sleep_ms(0);
    pthread_create(&tk, NULL, killer, &k);
    pthread_join(tk, NULL);
    pthread_join(tw, NULL);
    CHECK(a.result == SAB_OK && a.token == (0 | SAB_SEMA_RECOVERED));
    served_ok += a.result == SAB_OK;
    CHECK(sab_sema_waiting(&s) == 0);
  }
  printf("# death vs acquire: %d/%d served\n", served_ok, rounds);
}

static void on_wake(sab_waiter_t *w) { (void)w; }

/* A first ask through a copy of view s, as if it began at `since` (0: now):
 * k is the record's ask, kept while w is queued. */
static int ask(const sab_sema_t *s, sab_sema_ask_t *k, uint32_t owner, sab_waiter_t *w,
               uint64_t since, uint32_t *tok) {
  CHECK(!k->retrying); /* a retry asks again with its ask as it is */
  sab_sema_ask_init(k, s);
  k->since = since;
  return sab_sema_ask(k, owner, w, tok);
}

/* A token handed to a record that gives up goes to the next waiter. */
static void test_handoff_to_a_quitter(void) {
  mem_t m;
  sab_sema_t s;
  uint32_t a = sab_owner_new(), q = sab_owner_new(), n = sab_owner_new(), tok, info;
  sab_waiter_t wq, wn;
  sab_sema_ask_t kq = {0}, kn = {0};
  make(&s, &m, 1);
  s.fair_ns = 0; /* strict: the release hands over */
  CHECK(sab_sema_try(&s, a, &tok) == SAB_OK);
  sab_waiter_init_async(&wq, on_wake);
  sab_waiter_init_async(&wn, on_wake);
  CHECK(ask(&s, &kq, q, &wq, 0, &tok) == SAB_PENDING);
  CHECK(ask(&s, &kn, n, &wn, 0, &tok) == SAB_PENDING);
  CHECK(sab_sema_waiting(&s) == 2);
  CHECK(sab_sema_release(&s, a, 0, &info) == 0 && info == 0);
  CHECK(wq.token == 0);
  /* Its cancel comes too late: a handoff is an answer (SAB_OK). */
  CHECK(sab_wait_cancel(&wq, SAB_CANCELLED) == SAB_OK);
  sab_sema_give_back(&kq, q, wq.token);
  CHECK(wn.token == 0 && sab_sema_waiting(&s) == 0);
  CHECK(sab_wait_cancel(&wn, SAB_TIMED_OUT) == SAB_OK);
  /* Giving back what is no longer held does nothing. */
  sab_sema_give_back(&kq, q, 0);
  CHECK(sab_sema_release(&s, n, -1, NULL) == 0);
  /* A cancelled record leaves the queue clean. */
  CHECK(sab_sema_try(&s, a, &tok) == SAB_OK);
  CHECK(ask(&s, &kq, q, &wq, 0, &tok) == SAB_PENDING);
  CHECK(sab_wait_cancel(&wq, SAB_TIMED_OUT) == SAB_TIMED_OUT);
  CHECK(sab_sema_release(&s, a, 0, &info) == 0 && info == SAB_SEMA_POOLED);
  sab_waiter_destroy(&wq);
  sab_waiter_destroy(&wn);
}

/* A notify on the semaphore's first word (a plain cell) does not reach its
 * waiters; one on their key (base + SAB_SEMA_KEY_OFFSET, which no JS cell has) wakes a waiter
 * without a token: it queues again, and the pool stays whole. */
static void test_stray_notify(void) {
  mem_t m;
  sab_sema_t s;
  uint32_t a = sab_owner_new(), tok;
  make(&s, &m, 1);
  CHECK(sab_sema_try(&s, a, &tok) == SAB_OK);
  struct waiter_arg w = {&s, sab_owner_new(), UINT64_MAX, -1, 0, 0};
  pthread_t t;
  pthread_create(&t, NULL, waiter, &w);
  await_waiting(&s, 1);
  CHECK(sab_notify((uintptr_t)s.base, 1) == 0);
  CHECK(sab_waiters((uintptr_t)s.base) == 0 && sab_sema_waiting(&s) == 1);
  CHECK(sab_notify((uintptr_t)s.base + SAB_SEMA_KEY_OFFSET, 1) == 1);
  await_waiting(&s, 1); /* back in the queue */
  CHECK(sab_sema_release(&s, a, 0, NULL) == 0);
  pthread_join(t, NULL);
  CHECK(w.result == SAB_OK && w.token == 0);
}

/* A plain waiter on the first word (the key of a JS cell) is not an
 * acquirer: a release pools its slot instead of handing it over. */
static void test_plain_waiter_is_not_served(void) {
  mem_t m;
  sab_sema_t s;
  sab_waiter_t w;
  uint32_t a = sab_owner_new(), tok;
  make(&s, &m, 1);
  CHECK(sab_sema_try(&s, a, &tok) == SAB_OK);
  sab_waiter_init_blocking(&w);
  CHECK(sab_wait_enqueue(&w, s.base, 4, SAB_SEMA_MAGIC) == SAB_PENDING);
  uint32_t info = 0;
  CHECK(sab_sema_release(&s, a, 0, &info) == 0 && info == SAB_SEMA_POOLED);
  CHECK(sab_wait_cancel(&w, SAB_TIMED_OUT) == SAB_TIMED_OUT);
  sab_waiter_destroy(&w);
  CHECK(sab_sema_available(&s) == 1);
}

static void test_timeouts(void) {
  mem_t m;
  sab_sema_t s;
  uint32_t a = sab_owner_new(), tok;
  make(&s, &m, 1);
  CHECK(sab_sema_wait(&s, a, 0, &tok) == SAB_OK);
  uint64_t t0 = sab_now();
  CHECK(sab_sema_wait(&s, a, 0, &tok) == SAB_TIMED_OUT);
  CHECK(sab_sema_wait(&s, a, 10 * MS, &tok) == SAB_TIMED_OUT);
  CHECK(sab_now() - t0 >= 10 * MS);
  CHECK(sab_sema_waiting(&s) == 0);
}

/* ---- the rate limiter ---- */

typedef struct {
  int64_t words[4 + 64];
} rate_mem_t;

enum { RATE_THREADS = 4, RATE_GRANTS = 30 };
struct rate_arg {
  const sab_rate_t *r;
  uint64_t at[RATE_GRANTS];
};

static void *rate_taker(void *p) {
  struct rate_arg *a = p;
  for (int i = 0; i < RATE_GRANTS; i++) {
    uint64_t wait;
    int res;
    while ((res = sab_rate_take(a->r, &a->at[i], &wait)) == SAB_PENDING) {
      struct timespec ts = {0, (long)wait};
      nanosleep(&ts, NULL);
    }
    CHECK(res == SAB_OK);
  }
  return NULL;
}

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

/* Sorted grant times: no `rps + 1` of them within less than `unit`. */
static void check_windows(uint64_t *at, int n, uint32_t rps, uint64_t unit, uint64_t spacing) {
  qsort(at, (size_t)n, sizeof *at, cmp_u64);
  for (int i = (int)rps; i < n; i++) CHECK(at[i] - at[i - rps] >= unit);
  for (int i = 1; i < n && spacing > 0; i++) CHECK(at[i] - at[i - 1] >= spacing);
}

static void rate_run(uint32_t rps, uint64_t unit, int uniform) {
  rate_mem_t m;
  sab_rate_t r, v;
  struct rate_arg args[RATE_THREADS];
  pthread_t th[RATE_THREADS];
  uint64_t all[RATE_THREADS * RATE_GRANTS];
  CHECK(sab_rate_init(&r, &m, sizeof m, rps, unit, uniform) == 0);
  CHECK(sab_rate_open(&v, &m, sizeof m) == 0 && v.rps == rps);
  CHECK(sab_rate_unit_ns(&v) == unit && sab_rate_uniform(&v) == uniform);
  uint64_t t0 = sab_now();
  for (int i = 0; i < RATE_THREADS; i++) {
    args[i].r = &v;
    pthread_create(&th[i], NULL, rate_taker, &args[i]);
  }
  for (int i = 0; i < RATE_THREADS; i++) pthread_join(th[i], NULL);
  uint64_t took = sab_now() - t0;
  for (int i = 0; i < RATE_THREADS; i++)
    memcpy(&all[i * RATE_GRANTS], args[i].at, sizeof args[i].at);
  check_windows(all, RATE_THREADS * RATE_GRANTS, rps, unit, uniform ? unit / rps : 0);
  /* 120 grants at rps per unit need at least (120 / rps - 1) units. */
  CHECK(took >= (uint64_t)(RATE_THREADS * RATE_GRANTS / rps - 1) * unit);
  printf("# rate %u per %llu ms%s: %d grants in %.1f ms\n", rps, (unsigned long long)(unit / MS),
         uniform ? " (uniform)" : "", RATE_THREADS * RATE_GRANTS, (double)took / 1e6);
}

static void test_rate(void) {
  rate_mem_t m;
  sab_rate_t r;
  uint64_t at, wait;
  CHECK(sab_rate_bytes(0) == 0 && sab_rate_bytes(2) == 48);
  CHECK(sab_rate_init(&r, &m, sizeof m, 2, 0, 0) == SAB_E_INVAL);
  CHECK(sab_rate_init(&r, &m, sizeof m, 2, 100 * MS, 0) == 0);
  CHECK(sab_rate_take(&r, &at, &wait) == SAB_OK);
  CHECK(sab_rate_take(&r, &at, &wait) == SAB_OK);
  CHECK(sab_rate_take(&r, &at, &wait) == SAB_PENDING && wait > 0 && wait <= 100 * MS);
  m.words[4] = INT64_MAX; /* a time in the future: not ours */
  CHECK(sab_rate_take(&r, &at, &wait) == SAB_E_CORRUPT);
  rate_run(20, 40 * MS, 0);
  rate_run(30, 60 * MS, 1);
}

/* JS's fast path (lib/sema.js), done here as it does it, on the holder
 * words outside the lock: the protocol table atop src/core/sema.c. */
#define HOLD(s, i) (&(s)->base[8 + (s)->nr + (i)])

static int32_t *waiters_counter(const sab_sema_t *s) {
  return &sab_bucket_counts()[sab_bucket_of((uintptr_t)s->base + SAB_SEMA_KEY_OFFSET) *
                              SAB_COUNT_STRIDE];
}

/* A token (slot | RECOVERED), or -1: go native. */
static int64_t fast_take(const sab_sema_t *s, uint32_t me) {
  if (__atomic_load_n(waiters_counter(s), __ATOMIC_SEQ_CST) != 0) return -1;
  uint32_t i = (uint32_t)__atomic_load_n(&s->base[3], __ATOMIC_RELAXED);
  if (i >= s->nr) i = 0;
  for (uint32_t k = 0; k < s->nr; k++) {
    int32_t h = __atomic_load_n(HOLD(s, i), __ATOMIC_SEQ_CST);
    if ((h == 0 || h == (int32_t)SAB_SEMA_HELD_RECOVERED) &&
        __atomic_compare_exchange_n(HOLD(s, i), &h, (int32_t)me, 0, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST)) {
      __atomic_store_n(&s->base[3], (int32_t)(i + 1 == s->nr ? 0 : i + 1), __ATOMIC_RELAXED);
      return h == 0 ? (int64_t)i : (int64_t)(i | SAB_SEMA_RECOVERED);
    }
    if (++i == s->nr) i = 0;
  }
  return -1;
}

/* The give-back's CAS, without the counter's second look. */
static int fast_free(const sab_sema_t *s, uint32_t me, uint32_t slot) {
  int32_t expect = (int32_t)me;
  if (!__atomic_compare_exchange_n(HOLD(s, slot), &expect, 0, 0, __ATOMIC_SEQ_CST,
                                   __ATOMIC_SEQ_CST))
    return 0;
  return 1;
}

/* 1 done, 0 go native. */
static int fast_give(const sab_sema_t *s, uint32_t me, uint32_t slot) {
  if (__atomic_load_n(waiters_counter(s), __ATOMIC_SEQ_CST) != 0) return 0;
  if (!fast_free(s, me, slot)) return 0;
  if (__atomic_load_n(waiters_counter(s), __ATOMIC_SEQ_CST) != 0) sab_sema_kick(s); /* K2 */
  return 1;
}

/* Each row of the protocol table, one at a time. */
static void test_fast_protocol(void) {
  mem_t m;
  sab_sema_t s;
  uint32_t a = sab_owner_new(), b = sab_owner_new(), tok, info;
  make(&s, &m, 2);
  /* Strict hand-off, so that a release with a waiter hands over whether
   * or not the waiter has waited the bound yet (F1-F4 have their own
   * test below); the K rows are the same in both modes. */
  s.fair_ns = 0;
  /* free -> id by a JS take; the native side sees the holder. */
  CHECK(fast_take(&s, a) == 0);
  CHECK(*HOLD(&s, 0) == (int32_t)a && sab_sema_available(&s) == 1);
  CHECK(sab_sema_release(&s, b, 0, NULL) == SAB_E_BAD_TOKEN); /* K1: a's, not b's */
  CHECK(sab_sema_release(&s, a, 0, &info) == 0 && info == SAB_SEMA_POOLED);
  /* free -> id by a grant; id -> 0 by a JS give-back. */
  CHECK(sab_sema_try(&s, b, &tok) == SAB_OK && tok == 1);
  CHECK(!fast_give(&s, a, 1)); /* not a's: the CAS fails */
  CHECK(fast_give(&s, b, 1) && *HOLD(&s, 1) == 0);
  CHECK(sab_sema_release(&s, b, 1, NULL) == SAB_E_BAD_TOKEN); /* given back already */
  CHECK(sab_sema_available(&s) == 2);
  /* dead id -> RECOVERED by reclaim; a JS take reports the mark. */
  uint32_t dead = sab_owner_new();
  CHECK(fast_take(&s, dead) == 0 && fast_take(&s, dead) == 1);
  CHECK(fast_take(&s, a) == -1); /* none free: native */
  sab_owner_died(dead);
  CHECK(sab_sema_available(&s) == 2); /* native: reclaimed */
  int64_t t1 = fast_take(&s, a), t2 = fast_take(&s, a);
  CHECK(t1 >= 0 && t2 >= 0 && (t1 & SAB_SEMA_RECOVERED) && (t2 & SAB_SEMA_RECOVERED));
  CHECK(fast_give(&s, a, (uint32_t)SLOT(t1)) && fast_give(&s, a, (uint32_t)SLOT(t2)));
  t1 = fast_take(&s, a);
  CHECK(t1 >= 0 && !(t1 & SAB_SEMA_RECOVERED)); /* the mark is reported once */
  CHECK(fast_give(&s, a, (uint32_t)t1));

  /* K3: while a record waits, a JS take goes native and the native try
   * refuses; K2: a give-back that sees the waiter kicks, and the waiter
   * gets the slot. */
  CHECK(fast_take(&s, a) >= 0 && fast_take(&s, a) >= 0);
  struct waiter_arg w = {&s, b, UINT64_MAX, -1, 0, 0};
  pthread_t th;
  pthread_create(&th, NULL, waiter, &w);
  await_waiting(&s, 1);
  CHECK(!fast_give(&s, a, 0));                                /* the counter is raised: native */
  CHECK(sab_sema_release(&s, a, 0, &info) == 0 && info == 0); /* handed */
  pthread_join(th, NULL);
  CHECK(w.result == SAB_OK && w.token == 0);
  /* A give-back that freed its slot and then died before its kick (its
   * counter look raced the enqueue): the death hands the slot on (R2). */
  w = (struct waiter_arg){&s, b, UINT64_MAX, -1, 0, 0};
  pthread_create(&th, NULL, waiter, &w);
  await_waiting(&s, 1);
  CHECK(fast_free(&s, a, 1)); /* the CAS, no kick */
  sleep_ms(20);
  CHECK(sab_sema_waiting(&s) == 1); /* nobody told the waiter yet */
  sab_owner_died(a);
  pthread_join(th, NULL);
  CHECK(w.result == SAB_OK && w.token == 1);
  /* The same freed slot with a live releaser: the kick hands it on. */
  uint32_t c = sab_owner_new();
  CHECK(sab_sema_release(&s, b, 1, NULL) == 1 && sab_sema_release(&s, b, 0, NULL) == 0);
  CHECK(fast_take(&s, c) >= 0 && fast_take(&s, c) >= 0);
  w = (struct waiter_arg){&s, b, UINT64_MAX, -1, 0, 0};
  pthread_create(&th, NULL, waiter, &w);
  await_waiting(&s, 1);
  CHECK(fast_free(&s, c, 0));
  CHECK(sab_sema_kick(&s) == 0);
  pthread_join(th, NULL);
  CHECK(w.result == SAB_OK && w.token == 0);
  CHECK(sab_sema_waiting(&s) == 0);
}

/* K1 and K2 under load: JS-style takes and give-backs race native waits,
 * tries and releases; never more than nr holders, nobody stranded. */
enum { FSTORM_THREADS = 6, FSTORM_ITERS = 4000, FSTORM_NR = 2 };
static int f_in_use, f_max, f_go;                 /* atomic */
static long f_fast_takes, f_fast_gives, f_native; /* atomic */

static void *fast_stormer(void *p) {
  const sab_sema_t *s = p;
  uint32_t me = sab_owner_new(), tok;
  while (!__atomic_load_n(&f_go, __ATOMIC_ACQUIRE)) sleep_ms(0); /* start together */
  for (int i = 0; i < FSTORM_ITERS; i++) {
    int64_t t = fast_take(s, me);
    if (t >= 0) {
      tok = (uint32_t)t;
      __atomic_add_fetch(&f_fast_takes, 1, __ATOMIC_RELAXED);
    } else {
      int r = (i % 5 == 0) ? sab_sema_try(s, me, &tok) : sab_sema_wait(s, me, UINT64_MAX, &tok);
      if (r == SAB_TIMED_OUT) continue;
      CHECK(r == SAB_OK);
      __atomic_add_fetch(&f_native, 1, __ATOMIC_RELAXED);
    }
    CHECK(SLOT(tok) < FSTORM_NR);
    int n = __atomic_add_fetch(&f_in_use, 1, __ATOMIC_SEQ_CST);
    int mx = __atomic_load_n(&f_max, __ATOMIC_RELAXED);
    while (n > mx &&
           !__atomic_compare_exchange_n(&f_max, &mx, n, 0, __ATOMIC_SEQ_CST, __ATOMIC_RELAXED)) {
    }
    for (volatile int k = 0; k < 300; k++) {
    }
    if (i % 8 == 0) sleep_ms(0); /* let the others run into a held pool */
    __atomic_sub_fetch(&f_in_use, 1, __ATOMIC_SEQ_CST);
    if (fast_give(s, me, SLOT(tok))) {
      __atomic_add_fetch(&f_fast_gives, 1, __ATOMIC_RELAXED);
    } else {
      CHECK(sab_sema_release(s, me, SLOT(tok), NULL) == (int)SLOT(tok));
    }
  }
  return NULL;
}

static void test_fast_storm(void) {
  mem_t m;
  sab_sema_t s;
  pthread_t th[FSTORM_THREADS];
  make(&s, &m, FSTORM_NR);
  for (int i = 0; i < FSTORM_THREADS; i++) pthread_create(&th[i], NULL, fast_stormer, &s);
  __atomic_store_n(&f_go, 1, __ATOMIC_RELEASE);
  for (int i = 0; i < FSTORM_THREADS; i++) pthread_join(th[i], NULL);
  CHECK(f_max >= 1 && f_max <= FSTORM_NR);
  CHECK(sab_sema_available(&s) == FSTORM_NR && sab_sema_waiting(&s) == 0);
  /* Which way each went is the scheduler's choice; the first take, with
   * nobody queued, is fast. */
  CHECK(f_fast_takes > 0);
  printf(
      "# fast storm: %ld fast takes, %ld fast give-backs, %ld native grants, at most %d at once\n",
      f_fast_takes, f_fast_gives, f_native, f_max);
}

/* The bounded fairness, F1-F4 of the table atop src/core/sema.c, row by
 * row, with async records (nothing runs on their wake) and `since` given
 * explicitly, so that no row depends on timing: a record that asked
 * `OLD` ago has waited past the bound, one that asks now has not. */
#define MS           1000000ull
#define NEVER_STARVE (3600ull * 1000 * MS) /* an hour: nobody here waits that long */
static uint32_t state_of(sab_waiter_t *w) { return __atomic_load_n(&w->state, __ATOMIC_SEQ_CST); }

/* Ask again after a wake without a token, as src/napi/sema.c's retry does. */
static int retry(sab_sema_ask_t *k, uint32_t owner, sab_waiter_t *w, uint32_t *tok) {
  CHECK(state_of(w) == SAB_W_NOTIFIED && w->token == SAB_SEMA_NO_TOKEN);
  sab_waiter_init_async(w, on_wake);
  return sab_sema_ask(k, owner, w, tok);
}

static void test_bounded_fairness(void) {
  mem_t m;
  sab_sema_t s;
  uint32_t a = sab_owner_new(), n = sab_owner_new(), q1 = sab_owner_new(), q2 = sab_owner_new(),
           tok, info;
  sab_waiter_t w1, w2, w3;
  sab_sema_ask_t k1 = {0}, k2 = {0}, k3 = {0};
  sab_waiter_init_async(&w1, on_wake);
  sab_waiter_init_async(&w2, on_wake);
  sab_waiter_init_async(&w3, on_wake);

  /* F2: a release whose oldest waiter has not waited the bound pools the
   * slot and wakes that waiter to try again; a running thread takes the
   * slot meanwhile (the barge); the waiter asks again and queues in its
   * old place, ahead of a later waiter. */
  make(&s, &m, 1);
  s.fair_ns = NEVER_STARVE;
  CHECK(sab_sema_try(&s, a, &tok) == SAB_OK && tok == 0);
  CHECK(ask(&s, &k1, q1, &w1, 0, &tok) == SAB_PENDING);
  CHECK(sab_sema_release(&s, a, 0, &info) == 0 && info == SAB_SEMA_POOLED);
  CHECK(sab_sema_waiting(&s) == 1 && k1.retrying);        /* off the queue, still waiting (F5) */
  CHECK(sab_sema_try(&s, n, &tok) == SAB_OK && tok == 0); /* the barge */
  CHECK(ask(&s, &k2, q2, &w2, 0, &tok) == SAB_PENDING);   /* later than q1 */
  CHECK(retry(&k1, q1, &w1, &tok) == SAB_PENDING);
  CHECK(sab_sema_waiting(&s) == 2);
  CHECK(sab_sema_release(&s, n, 0, &info) == 0 && info == SAB_SEMA_POOLED);
  CHECK(state_of(&w1) == SAB_W_NOTIFIED && state_of(&w2) != SAB_W_NOTIFIED); /* q1 first */
  /* F3: the woken waiter, older than every queued one, is first in line. */
  CHECK(retry(&k1, q1, &w1, &tok) == SAB_OK && tok == 0);
  CHECK(sab_sema_waiting(&s) == 1);
  /* F4: a wake to try again that will not be used is passed on: the slot
   * goes to the next waiter directly. */
  CHECK(sab_sema_release(&s, q1, 0, &info) == 0 && info == SAB_SEMA_POOLED);
  CHECK(state_of(&w2) == SAB_W_NOTIFIED && w2.token == SAB_SEMA_NO_TOKEN);
  CHECK(ask(&s, &k1, q1, &w1, 0, &tok) == SAB_OK); /* q1 takes it: nobody queued */
  CHECK(ask(&s, &k3, n, &w3, 0, &tok) == SAB_PENDING);
  CHECK(sab_sema_release(&s, q1, 0, &info) == 0 && info == SAB_SEMA_POOLED);
  CHECK(state_of(&w3) == SAB_W_NOTIFIED);         /* n woken; q2's wake still unused */
  sab_sema_give_back(&k2, q2, SAB_SEMA_NO_TOKEN); /* q2 gives up: passes it on */
  CHECK(sab_sema_available(&s) == 1);             /* n's own wake is still on its way */
  CHECK(retry(&k3, n, &w3, &tok) == SAB_OK && tok == 0);
  /* ... and with a waiter queued, give_back hands the free slot over. */
  sab_waiter_init_async(&w2, on_wake);
  CHECK(ask(&s, &k2, q2, &w2, 0, &tok) == SAB_PENDING);
  CHECK(fast_free(&s, n, 0)); /* a give-back whose kick never came */
  sab_sema_give_back(&k1, q1, SAB_SEMA_NO_TOKEN);
  CHECK(state_of(&w2) == SAB_W_NOTIFIED && w2.token == 0 && sab_sema_waiting(&s) == 0);
  CHECK(sab_sema_release(&s, q2, 0, &info) == 0 && info == SAB_SEMA_POOLED);

  /* F1: a waiter that asked the bound ago or more is handed the released
   * slot directly, and no newcomer takes a free slot past it: the slot is
   * handed to it first. */
  make(&s, &m, 1);
  s.fair_ns = 5 * MS;
  uint64_t old = sab_now() - 10 * MS;
  sab_waiter_init_async(&w1, on_wake);
  sab_waiter_init_async(&w2, on_wake);
  CHECK(sab_sema_try(&s, a, &tok) == SAB_OK);
  CHECK(ask(&s, &k1, q1, &w1, old, &tok) == SAB_PENDING);
  CHECK(sab_sema_release(&s, a, 0, &info) == 0 && info == 0); /* handed */
  CHECK(state_of(&w1) == SAB_W_NOTIFIED && w1.token == 0);
  CHECK(ask(&s, &k2, q2, &w2, old, &tok) == SAB_PENDING);
  CHECK(fast_free(&s, q1, 0)); /* free slot, a starving waiter queued, no kick */
  CHECK(sab_sema_try(&s, n, &tok) == SAB_TIMED_OUT);       /* not past q2 */
  CHECK(state_of(&w2) == SAB_W_NOTIFIED && w2.token == 0); /* served instead */
  /* A young waiter is not protected: the newcomer may take the slot. */
  sab_waiter_init_async(&w1, on_wake);
  CHECK(ask(&s, &k1, q1, &w1, 0, &tok) == SAB_PENDING); /* since: now */
  CHECK(fast_free(&s, q2, 0));
  CHECK(sab_sema_try(&s, n, &tok) == SAB_OK && tok == 0);
  CHECK(sab_wait_cancel(&w1, SAB_CANCELLED) == SAB_CANCELLED);
  CHECK(sab_sema_release(&s, n, 0, &info) == 0 && info == SAB_SEMA_POOLED);
  /* F2's order: a retry with an older since goes before younger records. */
  CHECK(sab_sema_try(&s, a, &tok) == SAB_OK);
  sab_waiter_init_async(&w1, on_wake);
  sab_waiter_init_async(&w2, on_wake);
  sab_waiter_init_async(&w3, on_wake);
  uint64_t now = sab_now();
  CHECK(ask(&s, &k1, q1, &w1, now, &tok) == SAB_PENDING);
  CHECK(ask(&s, &k2, q2, &w2, now - 1 * MS, &tok) == SAB_PENDING);
  CHECK(ask(&s, &k3, n, &w3, now - 2 * MS, &tok) == SAB_PENDING);
  CHECK(sab_sema_release(&s, a, 0, &info) == 0 && info == SAB_SEMA_POOLED);
  CHECK(state_of(&w3) == SAB_W_NOTIFIED); /* the oldest ask, though it queued last */
  CHECK(state_of(&w1) != SAB_W_NOTIFIED && state_of(&w2) != SAB_W_NOTIFIED);
  CHECK(sab_wait_cancel(&w1, SAB_CANCELLED) == SAB_CANCELLED);
  CHECK(sab_wait_cancel(&w2, SAB_CANCELLED) == SAB_CANCELLED);
  sab_sema_give_back(&k3, n, SAB_SEMA_NO_TOKEN);
  CHECK(sab_sema_available(&s) == 1 && sab_sema_waiting(&s) == 0);

  /* F2, F3 with a blocking waiter (sab_sema_wait): woken to try again, it
   * asks again and takes the slot, first in line. */
  make(&s, &m, 1);
  s.fair_ns = NEVER_STARVE;
  CHECK(sab_sema_try(&s, a, &tok) == SAB_OK);
  struct waiter_arg wa = {&s, q1, 30 * MS, -1, 0, 0};
  pthread_t th;
  pthread_create(&th, NULL, waiter, &wa);
  await_waiting(&s, 1);
  CHECK(sab_sema_release(&s, a, 0, &info) == 0 && info == SAB_SEMA_POOLED);
  pthread_join(th, NULL);
  CHECK(wa.result == SAB_OK && wa.token == 0);
  CHECK(sab_sema_release(&s, q1, 0, NULL) == 0 && sab_sema_available(&s) == 1);
  sab_waiter_destroy(&w1);
  sab_waiter_destroy(&w2);
  sab_waiter_destroy(&w3);
}

/* F5: a record woken to try again keeps its place while it is off the
 * queue. A death or a kick meanwhile (both hand free slots to queued
 * records) does not hand its slot to a younger queued record; a barge may
 * overtake it while it is young, not once it waited the bound; nrWaiting
 * counts it; a give-up passes its place on. */
static void test_retry_keeps_place(void) {
  mem_t m;
  sab_sema_t s;
  uint32_t a = sab_owner_new(), q1 = sab_owner_new(), q2 = sab_owner_new(), q3 = sab_owner_new(),
           n = sab_owner_new(), tok, info;
  sab_waiter_t w1, w2, w3;
  sab_sema_ask_t k1 = {0}, k2 = {0}, k3 = {0};
  make(&s, &m, 1);
  s.fair_ns = NEVER_STARVE;
  for (int round = 0; round < 3; round++) {
    sab_waiter_init_async(&w1, on_wake);
    sab_waiter_init_async(&w2, on_wake);
    CHECK(sab_sema_try(&s, a, &tok) == SAB_OK && tok == 0);
    CHECK(ask(&s, &k1, q1, &w1, 0, &tok) == SAB_PENDING);
    CHECK(ask(&s, &k2, q2, &w2, 0, &tok) == SAB_PENDING);
    CHECK(sab_sema_release(&s, a, 0, &info) == 0 && info == SAB_SEMA_POOLED);
    CHECK(state_of(&w1) == SAB_W_NOTIFIED && k1.retrying); /* F2: q1 to try again */
    CHECK(sab_sema_waiting(&s) == 2);                      /* q2 queued, q1 on its way back */
    if (round == 0) sab_owner_died(sab_owner_new());       /* a death elsewhere (R2) */
    if (round == 1) CHECK(sab_sema_kick(&s) == 0);         /* a kick (F4) */
    if (round == 2) {
      /* q1 gives up: its place goes on, the slot to q2 directly. */
      sab_sema_give_back(&k1, q1, SAB_SEMA_NO_TOKEN);
      CHECK(!k1.retrying && state_of(&w2) == SAB_W_NOTIFIED && w2.token == 0);
      CHECK(sab_sema_release(&s, q2, 0, &info) == 0 && info == SAB_SEMA_POOLED);
      break;
    }
    CHECK(state_of(&w2) != SAB_W_NOTIFIED); /* not past q1 */
    CHECK(retry(&k1, q1, &w1, &tok) == SAB_OK && tok == 0 && !k1.retrying);
    CHECK(sab_sema_waiting(&s) == 1);
    CHECK(sab_sema_release(&s, q1, 0, &info) == 0 && info == SAB_SEMA_POOLED);
    CHECK(retry(&k2, q2, &w2, &tok) == SAB_OK && tok == 0);
    CHECK(sab_sema_release(&s, q2, 0, &info) == 0 && info == SAB_SEMA_POOLED);
    CHECK(sab_sema_waiting(&s) == 0 && sab_sema_available(&s) == 1);
  }

  /* Two free slots, one retry ahead: a death hands the other to the next
   * queued record, and keeps one for the retry. */
  make(&s, &m, 2);
  s.fair_ns = NEVER_STARVE;
  sab_waiter_init_async(&w1, on_wake);
  sab_waiter_init_async(&w2, on_wake);
  sab_waiter_init_async(&w3, on_wake);
  CHECK(sab_sema_try(&s, a, &tok) == SAB_OK && tok == 0);
  CHECK(sab_sema_try(&s, a, &tok) == SAB_OK && tok == 1);
  CHECK(ask(&s, &k1, q1, &w1, 0, &tok) == SAB_PENDING);
  CHECK(ask(&s, &k2, q2, &w2, 0, &tok) == SAB_PENDING);
  CHECK(ask(&s, &k3, q3, &w3, 0, &tok) == SAB_PENDING);
  CHECK(sab_sema_release(&s, a, 0, &info) == 0 && info == SAB_SEMA_POOLED);
  CHECK(k1.retrying && sab_sema_waiting(&s) == 3);
  CHECK(fast_free(&s, a, 1)); /* a JS give-back whose kick never came */
  sab_owner_died(sab_owner_new());
  CHECK(state_of(&w2) == SAB_W_NOTIFIED && w2.token != SAB_SEMA_NO_TOKEN);
  CHECK(state_of(&w3) != SAB_W_NOTIFIED);
  CHECK(retry(&k1, q1, &w1, &tok) == SAB_OK && tok != w2.token);
  CHECK(sab_sema_waiting(&s) == 1);
  CHECK(sab_wait_cancel(&w3, SAB_CANCELLED) == SAB_CANCELLED);
  CHECK(sab_sema_release(&s, q1, -1, NULL) >= 0 && sab_sema_release(&s, q2, -1, NULL) >= 0);

  /* A caller that finds the slot free may take it while a retry is on its
   * way, whatever the retry's age (F2): F5 keeps slots for retries only
   * from the hand-outs to every record. */
  make(&s, &m, 1);
  s.fair_ns = 30 * MS;
  sab_waiter_init_async(&w1, on_wake);
  CHECK(sab_sema_try(&s, a, &tok) == SAB_OK);
  CHECK(ask(&s, &k1, q1, &w1, 0, &tok) == SAB_PENDING);
  CHECK(sab_sema_release(&s, a, 0, &info) == 0 && info == SAB_SEMA_POOLED);
  sleep_ms(40); /* q1, on its way, now waited the bound; nobody is queued */
  CHECK(sab_sema_try(&s, n, &tok) == SAB_OK && tok == 0);
  CHECK(sab_sema_release(&s, n, 0, &info) == 0 && info == SAB_SEMA_POOLED);
  CHECK(retry(&k1, q1, &w1, &tok) == SAB_OK && tok == 0);
  CHECK(sab_sema_release(&s, q1, 0, &info) == 0 && info == SAB_SEMA_POOLED);
  sab_waiter_destroy(&w1);
  sab_waiter_destroy(&w2);
  sab_waiter_destroy(&w3);
}

int main(void) {
  test_layout_and_checks();
  test_try_release_and_bad_tokens();
  test_fifo_handoff_no_barging();
  test_storm();
  test_dead_holder();
  test_death_races_acquire();
  test_handoff_to_a_quitter();
  test_stray_notify();
  test_plain_waiter_is_not_served();
  test_timeouts();
  test_rate();
  test_fast_protocol();
  test_fast_storm();
  test_bounded_fairness();
  test_retry_keeps_place();
  return report("test_sema");
}
