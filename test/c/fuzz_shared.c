/*
 * libFuzzer target for the primitives whose state the core reads from
 * shared memory (the token semaphore and the rate limiter), with another
 * "thread" writing that memory between the core's reads.
 *
 * The core is built with SAB_FUZZ_READS: after every read of a shared word
 * it calls sab__fuzz_after_read (below), which takes the next byte of a
 * tape read from the end of the input and may write a hostile value into
 * any word of the object that was read, as a racing thread could. So a
 * word that the core checked and then read again comes back hostile, and
 * ASan reports where it is used. The program itself (from the front of
 * the input) acquires, releases, queues and cancels async records, kills
 * owners (so reclaims run), and takes grants; every token handed out must
 * be below nr, and the guard words on both sides of each object must stay
 * intact.
 *
 *   make -C test/c fuzz            (FUZZ_SECONDS=60 by default, each target)
 */
#include "sabsync.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(...)                 \
  do {                            \
    fprintf(stderr, __VA_ARGS__); \
    abort();                      \
  } while (0)

#define MAX_NR  8
#define MAX_RPS 4
#define GUARD   8 /* int64 words of guard on each side of each object */
#define PATTERN 0x5A5A5A5A5A5A5A5AULL
#define RECORDS 6
#define OWNERS  3

/* Words of the semaphore (8 + 3 * MAX_NR int32) and the rate limiter
 * (4 + MAX_RPS int64), each between guards. */
#define SEMA_W64 ((8 + 3 * MAX_NR + 1) / 2)
#define RATE_W64 (4 + MAX_RPS)
static int64_t arena[GUARD + SEMA_W64 + GUARD + RATE_W64 + GUARD];
static int32_t *const sema_mem = (int32_t *)&arena[GUARD];
static int64_t *const rate_mem = &arena[GUARD + SEMA_W64 + GUARD];

static sab_sema_t sema;
static sab_rate_t rate;
static size_t sema_bytes, rate_bytes;

/* The hook's tape: input bytes taken from the end, towards the program. */
static const uint8_t *tape;
static size_t tape_left;
static int hooks_on;

static uint8_t tape_byte(void) {
  if (tape_left == 0) return 0;
  return tape[--tape_left];
}

static const int32_t hostile[] = {
    -1,         0,          1,        2,        7,   8, 9, 0x7fffffff, (int32_t)0x80000000,
    0x40000000, 0x3fffffff, 0x100000, 0x100001, 1000};

void sab__fuzz_after_read(const void *word) {
  if (!hooks_on) return;
  uint8_t b = tape_byte();
  if ((b & 3) != 0) return; /* most reads go untouched */
  int32_t *base;
  size_t words;
  if ((const char *)word >= (const char *)sema_mem &&
      (const char *)word < (const char *)sema_mem + sema_bytes) {
    base = sema_mem;
    words = sema_bytes / 4;
  } else if ((const char *)word >= (const char *)rate_mem &&
             (const char *)word < (const char *)rate_mem + rate_bytes) {
    base = (int32_t *)rate_mem;
    words = rate_bytes / 4;
  } else {
    FAIL("the core read shared memory outside its objects\n");
  }
  /* Mostly the word just read (the re-read this hunts for), else any. */
  size_t w = (b & 4) ? (size_t)(tape_byte() % words) : (size_t)((const int32_t *)word - base);
  int32_t v = hostile[tape_byte() % (sizeof hostile / sizeof hostile[0])];
  __atomic_store_n(&base[w], v, __ATOMIC_RELAXED);
}

typedef struct {
  sab_waiter_t w;
  sab_sema_ask_t ask; /* the record's ctx while queued */
  int queued;
} rec_t;

static rec_t recs[RECORDS];
static uint32_t owners[OWNERS];

static void check_token(uint32_t token, const char *what) {
  if (token == SAB_SEMA_NO_TOKEN) return;
  if ((token & ~SAB_SEMA_RECOVERED) >= sema.nr)
    FAIL("%s handed out token %u of a semaphore of %u\n", what, token, sema.nr);
}

static void on_wake(sab_waiter_t *w) {
  rec_t *r = (rec_t *)w;
  check_token(w->token, "a handoff");
  r->queued = 0;
}

static void check_guards(void) {
  for (int i = 0; i < GUARD; i++) {
    if ((uint64_t)arena[i] != PATTERN || (uint64_t)arena[GUARD + SEMA_W64 + i] != PATTERN ||
        (uint64_t)arena[GUARD + SEMA_W64 + GUARD + RATE_W64 + i] != PATTERN)
      FAIL("a guard word was written\n");
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 2) return 0;
  for (size_t i = 0; i < sizeof arena / sizeof arena[0]; i++) arena[i] = (int64_t)PATTERN;
  uint32_t nr = 1 + data[0] % MAX_NR, rps = 1 + data[1] % MAX_RPS;
  sema_bytes = sab_sema_bytes(nr);
  rate_bytes = sab_rate_bytes(rps);
  if (sab_sema_init(&sema, sema_mem, sema_bytes, nr) != 0) FAIL("init\n");
  if (sab_rate_init(&rate, rate_mem, rate_bytes, rps, 1000000, data[1] & 8) != 0) FAIL("init\n");
  for (int i = 0; i < OWNERS; i++) owners[i] = sab_owner_new();
  for (int i = 0; i < RECORDS; i++) {
    sab_waiter_init_async(&recs[i].w, on_wake);
    recs[i].queued = 0;
  }
  /* The program: the first half; the tape: the second, from its end. */
  size_t prog = 2 + (size - 2) / 2;
  tape = data + prog;
  tape_left = size - prog;
  hooks_on = 1;

  for (size_t p = 2; p + 3 <= prog; p += 3) {
    uint8_t op = data[p] % 8, a = data[p + 1], b = data[p + 2];
    uint32_t owner = owners[a % OWNERS], token = SAB_SEMA_NO_TOKEN;
    rec_t *r = &recs[b % RECORDS];
    switch (op) {
      case 0: /* tryAcquire */
        if (sab_sema_try(&sema, owner, &token) == SAB_OK) check_token(token, "a try");
        break;
      case 1: { /* an async acquire */
        if (r->queued) break;
        sab_waiter_init_async(&r->w, on_wake);
        /* Woken to try again before (F5's list holds its ask): it asks
         * again through the same ask, as a real record does. */
        if (!r->ask.retrying) sab_sema_ask_init(&r->ask, &sema);
        int res = sab_sema_ask(&r->ask, owner, &r->w, &token);
        if (res == SAB_OK) check_token(token, "an acquire");
        if (res == SAB_PENDING) r->queued = 1;
        break;
      }
      case 2: { /* release a slot (or the newest: -1), maybe not held */
        int res = sab_sema_release(&sema, owner, (int64_t)(b % (MAX_NR + 2)) - 1, NULL);
        if (res >= 0 && (uint32_t)res >= nr) FAIL("release answered slot %d\n", res);
        break;
      }
      case 3: /* cancel a queued record; give back a slot handed to it */
        if (!r->queued) break;
        if (sab_wait_cancel(&r->w, SAB_CANCELLED) == SAB_OK)
          sab_sema_give_back(&r->ask, r->w.owner, r->w.token);
        r->queued = 0;
        break;
      case 4: /* an owner dies: the death hook reclaims on this memory */
        sab_owner_died(owner);
        owners[a % OWNERS] = sab_owner_new();
        break;
      case 5: (void)sab_sema_available(&sema); break;
      case 6: {
        uint64_t at, wait;
        (void)sab_rate_take(&rate, &at, &wait);
        break;
      }
      default: (void)sab_sema_check(&sema); break;
    }
    check_guards();
  }
  hooks_on = 0;
  for (int i = 0; i < RECORDS; i++) {
    if (recs[i].queued && sab_wait_cancel(&recs[i].w, SAB_CANCELLED) == SAB_OK)
      FAIL("a queued record had left without its wake\n");
    recs[i].queued = 0;
    sab_sema_ask_done(&recs[i].ask); /* a wake to try again, never used */
  }
  if (sab_sema_waiting(&sema) != 0) FAIL("records left behind\n");
  check_guards();
  return 0;
}
