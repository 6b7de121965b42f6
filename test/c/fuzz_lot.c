/*
 * libFuzzer target for the parking lot's argument-free paths: the input is
 * a program of operations (enqueue, cancel, notify, store, count, owner
 * death) on a few cells of both sizes, run on async records in one thread
 * against a model of FIFO queues. Every answer of the lot is checked
 * against the model: results, woken counts, who was woken and in what
 * order, queue lengths, and the per-bucket counters.
 *
 *   make -C test/c fuzz            (FUZZ_SECONDS=60 by default)
 */
#include "sabsync.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECORDS 12
#define CELLS   4

/* Cells: three 8-byte words, viewed as 4-byte cells too, so that 4- and
 * 8-byte waits share addresses (cell 0 and cell 1 are the halves of word 0,
 * cell 2 is word 1's low half, cell 3 is word 2). */
static int64_t words[3];

static void *cell_addr(unsigned c) {
  switch (c) {
    case 0: return &words[0];
    case 1: return (char *)&words[0] + 4;
    case 2: return &words[1];
    default: return &words[2];
  }
}

typedef struct {
  sab_waiter_t w;
  int queued; /* model: in a queue */
  int woken;  /* the lot called its wake callback */
  uintptr_t addr;
  uint32_t watch;
  uint64_t seq; /* model: enqueue order */
} rec_t;

static rec_t recs[RECORDS];
static uint64_t seq;
static int order[RECORDS], norder; /* records woken, in callback order */

#define FAIL(...)                 \
  do {                            \
    fprintf(stderr, __VA_ARGS__); \
    abort();                      \
  } while (0)

static void on_wake(sab_waiter_t *w) {
  rec_t *r = (rec_t *)w;
  if (r->woken) FAIL("a record was woken twice\n");
  r->woken = 1;
  order[norder++] = (int)(r - recs);
}

static uint32_t model_count(uintptr_t addr) {
  uint32_t n = 0;
  for (int i = 0; i < RECORDS; i++) n += recs[i].queued && recs[i].addr == addr;
  return n;
}

/* The oldest queued record on addr not yet picked, or -1. */
static int model_oldest(uintptr_t addr, const int *picked) {
  int best = -1;
  for (int i = 0; i < RECORDS; i++) {
    if (!recs[i].queued || recs[i].addr != addr || picked[i]) continue;
    if (best < 0 || recs[i].seq < recs[best].seq) best = i;
  }
  return best;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  uint32_t owners[2] = {sab_owner_new(), sab_owner_new()};
  memset(words, 0, sizeof words);
  memset(recs, 0, sizeof recs);
  for (int i = 0; i < RECORDS; i++) sab_waiter_init_async(&recs[i].w, on_wake);

  for (size_t p = 0; p + 3 <= size; p += 3) {
    uint8_t op = data[p] % 6, a = data[p + 1], b = data[p + 2];
    rec_t *r = &recs[a % RECORDS];
    unsigned c = (a >> 4) % CELLS;
    uintptr_t addr = (uintptr_t)cell_addr(c);
    int wide = (b & 1) && (c == 0 || c == 2 || c == 3); /* 8-byte cells are 8-aligned */
    switch (op) {
      case 0: { /* enqueue */
        if (r->queued || r->woken) break;
        int64_t expected = (b >> 1) & 3;
        uint32_t watch =
            (b >> 3) & 3 ? ((b >> 3) & 3) == 3 ? SAB_WATCH_ANY : owners[(b >> 3) & 1] : 0;
        int64_t actual = wide ? *(int64_t *)cell_addr(c) : *(int32_t *)cell_addr(c);
        int want = actual != expected ? SAB_NOT_EQUAL : SAB_PENDING;
        int got = sab_wait_enqueue_watch(&r->w, cell_addr(c), wide ? 8 : 4, expected, watch,
                                         sab_death_epoch());
        if (got != want) FAIL("enqueue answered %d, the model %d\n", got, want);
        if (got == SAB_PENDING) {
          r->queued = 1;
          r->addr = addr;
          r->watch = watch;
          r->seq = ++seq;
        }
        break;
      }
      case 1: { /* cancel */
        if (!r->queued && !r->woken) break;
        int why = b & 1 ? SAB_TIMED_OUT : SAB_CANCELLED;
        int got = sab_wait_cancel(&r->w, why);
        int want = r->queued ? why : SAB_OK;
        if (got != want) FAIL("cancel answered %d, the model %d\n", got, want);
        r->queued = r->woken = 0;
        sab_waiter_init_async(&r->w, on_wake);
        break;
      }
      case 2: { /* notify */
        uint64_t count = b % 5 == 4 ? UINT64_MAX : b % 5;
        int picked[RECORDS] = {0}, expect[RECORDS], nexpect = 0;
        for (uint64_t k = 0; k < count; k++) {
          int o = model_oldest(addr, picked);
          if (o < 0) break;
          picked[o] = 1;
          expect[nexpect++] = o;
        }
        norder = 0;
        uint64_t n = sab_notify(addr, count);
        if (n != (uint64_t)nexpect || norder != nexpect)
          FAIL("notify woke %d, the model %d\n", (int)n, nexpect);
        for (int k = 0; k < nexpect; k++) {
          if (order[k] != expect[k]) FAIL("notify woke out of FIFO order\n");
          recs[expect[k]].queued = 0;
        }
        break;
      }
      case 3: /* store */
        if (wide)
          *(int64_t *)cell_addr(c) = (b >> 1) & 3;
        else
          *(int32_t *)cell_addr(c) = (b >> 1) & 3;
        break;
      case 4: /* count */
        if (sab_waiters(addr) != model_count(addr)) FAIL("waiters disagrees with the model\n");
        break;
      case 5: { /* an owner dies (and a new one takes its place) */
        int which = b & 1;
        uint32_t dead = owners[which];
        norder = 0;
        sab_owner_died(dead);
        int n = 0;
        for (int i = 0; i < RECORDS; i++) {
          if (recs[i].queued && (recs[i].watch == dead || recs[i].watch == SAB_WATCH_ANY)) {
            if (!recs[i].woken) FAIL("a watcher of a dead owner was not woken\n");
            recs[i].queued = 0;
            n++;
          }
        }
        if (n != norder) FAIL("a death woke %d records, the model %d\n", norder, n);
        owners[which] = sab_owner_new();
        break;
      }
    }
  }
  /* Leave the lot empty for the next input. */
  for (int i = 0; i < RECORDS; i++) {
    if (recs[i].queued && sab_wait_cancel(&recs[i].w, SAB_CANCELLED) != SAB_CANCELLED)
      FAIL("a queued record had left\n");
  }
  for (unsigned c = 0; c < CELLS; c++) {
    uintptr_t addr = (uintptr_t)cell_addr(c);
    if (sab_waiters(addr) != 0 || sab_bucket_counts()[sab_bucket_of(addr) * SAB_COUNT_STRIDE] != 0)
      FAIL("records left behind\n");
  }
  return 0;
}
