/*
 * RateLimiter (src/core/limiter.c): its hash is the reference one (vectors
 * of test/rate-limiter.test.js's makeHash), and consume keeps the GCRA
 * rules on a table laid out as JS lays it out. The slot a key
 * gets is made here as a JS claim makes it (F, then W).
 */
#define _POSIX_C_SOURCE 200809L
#include "sabsync.h"
#include "check.h"

#include <stdint.h>
#include <string.h>

#define KEYS 64
static int64_t table[2 * KEYS];

static size_t utf16(const char *ascii, uint16_t *out) {
  size_t n = strlen(ascii);
  for (size_t i = 0; i < n; i++) out[i] = (uint8_t)ascii[i];
  return n;
}

static void test_hash_is_the_js_one(void) {
  uint32_t f[2];
  const uint32_t k0 = 0x01234567u, k1 = 0x89abcdefu;
  sab_limiter_hash(NULL, 0, k0, k1, f);
  CHECK(f[0] == 0xa0faf899u && f[1] == 0x3c504fecu);
  uint16_t s[32];
  size_t n = utf16("10.0.0.1", s);
  sab_limiter_hash(s, n, k0, k1, f);
  CHECK(f[0] == 0x595671d3u && f[1] == 0x0af3d6b7u);
  /* "user:é中😀x": non-ASCII code units, a surrogate pair, odd length. */
  const uint16_t u[] = {'u', 's', 'e', 'r', ':', 0x00e9, 0x4e2d, 0xd83d, 0xde00, 'x'};
  sab_limiter_hash(u, sizeof u / sizeof u[0], k0, k1, f);
  CHECK(f[0] == 0x4007d4f6u && f[1] == 0x42326a7cu);
}

/* Place a key's slot at i with tat w, as a claim would. */
static void place(const sab_limiter_out_t *o, uint32_t i, int64_t w) {
  int32_t *half = (int32_t *)&table[2 * i];
  memset(half, 0, 8);
  half[0] = (int32_t)o->f[0]; /* little-endian: the low half first */
  half[1] = (int32_t)o->f[1];
  table[2 * i + 1] = w;
}

static void test_consume(void) {
  /* 3 points a second, burst 3. */
  sab_limiter_t l = {
      .keys = KEYS, .probe = 16, .k0 = 7, .k1 = 9, .T = 333333334, .tau = 3 * 333333334LL};
  sab_limiter_out_t o;
  uint16_t key[16];
  size_t n = utf16("client-1", key);
  memset(table, 0, sizeof table);
  CHECK(sab_limiter_consume(&l, table, NULL, key, n, 1, &o) == SAB_LIMITER_ABSENT);
  CHECK(o.start == o.f[0] % KEYS);
  /* The key's slot, two past its start (others may sit before it). */
  uint32_t at = (o.start + 2) % KEYS;
  place(&o, at, 1); /* a tat long past: a full bucket */
  for (int i = 0; i < 3; i++) {
    CHECK(sab_limiter_consume(&l, table, NULL, key, n, 1, &o) == SAB_LIMITER_ALLOWED);
    CHECK(o.ahead > (i + 1) * l.T - 100 * (int64_t)MS && o.ahead <= (i + 1) * l.T);
  }
  int64_t tat = table[2 * at + 1];
  CHECK(sab_limiter_consume(&l, table, NULL, key, n, 1, &o) == SAB_LIMITER_DENIED);
  CHECK(table[2 * at + 1] == tat); /* a refusal writes nothing */
  CHECK(o.ahead > l.tau && o.behind > 0 && o.behind <= l.tau);
  /* Another key is absent, and the first key's slot is not its own. */
  size_t m = utf16("client-2", key);
  CHECK(sab_limiter_consume(&l, table, NULL, key, m, 1, &o) == SAB_LIMITER_ABSENT);
  /* A claim marker (W < 0) is no one's slot yet. */
  n = utf16("client-1", key);
  table[2 * at + 1] = -5;
  CHECK(sab_limiter_consume(&l, table, NULL, key, n, 1, &o) == SAB_LIMITER_ABSENT);
  /* A tat beyond what any participant writes is corrupt, not obeyed. */
  table[2 * at + 1] = INT64_MAX;
  CHECK(sab_limiter_consume(&l, table, NULL, key, n, 1, &o) == SAB_E_CORRUPT);
  /* Two slots with the key's fingerprint (a scribble): the later tat counts. */
  table[2 * at + 1] = 1;
  place(&o, (at + 1) % KEYS, (int64_t)sab_now() + l.tau);
  CHECK(sab_limiter_consume(&l, table, NULL, key, n, 1, &o) == SAB_LIMITER_DENIED);
}

/* The window wraps at the end of the table, and never reads past it. */
static void test_window_wraps(void) {
  sab_limiter_t l = {.keys = KEYS, .probe = 16, .k0 = 1, .k1 = 2, .T = 1000, .tau = 10000};
  sab_limiter_out_t o;
  uint16_t key[16];
  char name[16];
  for (int k = 0; k < 10000; k++) {
    snprintf(name, sizeof name, "k%d", k);
    size_t n = utf16(name, key);
    memset(table, 0, sizeof table);
    CHECK(sab_limiter_consume(&l, table, NULL, key, n, 1, &o) == SAB_LIMITER_ABSENT);
    if (o.start + l.probe <= KEYS) continue;
    place(&o, (o.start + l.probe - 1) % KEYS, 1); /* the window's last slot, wrapped */
    CHECK(sab_limiter_consume(&l, table, NULL, key, n, 1, &o) == SAB_LIMITER_ALLOWED);
    return;
  }
  CHECK(!"no key starts near the end of the table");
}

/* A new key claims a slot under its group's claim lock, and one caller's
 * parameters apply to the tats another wrote. */
static void test_claim_and_parameters(void) {
  static int64_t locks[KEYS / 16];
  sab_limiter_t l = {
      .keys = KEYS, .probe = 16, .k0 = 3, .k1 = 4, .T = 1000000000LL, .tau = 4000000000LL};
  sab_limiter_out_t o;
  uint16_t key[16];
  size_t n = utf16("fresh", key);
  memset(table, 0, sizeof table);
  memset(locks, 0, sizeof locks);
  for (int i = 0; i < 4; i++)
    CHECK(sab_limiter_consume(&l, table, locks, key, n, 1, &o) == SAB_LIMITER_ALLOWED);
  CHECK(sab_limiter_consume(&l, table, locks, key, n, 1, &o) == SAB_LIMITER_DENIED);
  int held = 0;
  for (int i = 0; i < KEYS; i++) held += table[2 * i + 1] > 0;
  CHECK(held == 1);
  CHECK(locks[o.start / 16] < 0); /* given back */
  /* A caller of a shallower bucket (2 points) obeys the 4-deep tat as
   * written: refused until it comes within its bucket, and it is never
   * lowered (the deeper callers would take again what they took). */
  sab_limiter_t small = l;
  small.tau = 2 * l.T;
  int64_t tat = 0;
  for (int i = 0; i < KEYS; i++)
    if (table[2 * i + 1] > 0) tat = table[2 * i + 1];
  CHECK(sab_limiter_consume(&small, table, locks, key, n, 1, &o) == SAB_LIMITER_DENIED);
  CHECK(o.behind > small.tau && o.ahead - small.tau > l.T);
  int still = 0;
  for (int i = 0; i < KEYS; i++) still += table[2 * i + 1] == tat;
  CHECK(still == 1);
  /* peek and refund under the small bucket. */
  CHECK(sab_limiter_peek(&small, table, key, n, &o) == SAB_LIMITER_DENIED);
  CHECK(sab_limiter_lower(&small, table, key, n, 3, &o) == SAB_OK);
  CHECK(sab_limiter_peek(&small, table, key, n, &o) == SAB_LIMITER_ALLOWED);
  CHECK(sab_limiter_lower(&small, table, key, n, 0, &o) == SAB_OK);
  CHECK(sab_limiter_peek(&l, table, key, n, &o) == SAB_LIMITER_ALLOWED && o.behind == 0);
  /* A lock held by a live lease: busy after 10 ms, not a hang. */
  size_t m = utf16("other", key);
  sab_limiter_consume(&l, table, NULL, key, m, 1, &o); /* its start */
  locks[o.start / 16] = (int64_t)sab_now() + 1000000000LL;
  int64_t t0 = (int64_t)sab_now();
  CHECK(sab_limiter_consume(&l, table, locks, key, m, 1, &o) == SAB_LIMITER_BUSY);
  int64_t took = (int64_t)sab_now() - t0;
  CHECK(took >= 10 * (int64_t)MS && took < 200 * (int64_t)MS);
}

int main(void) {
  test_claim_and_parameters();
  test_hash_is_the_js_one();
  test_consume();
  test_window_wraps();
  return report("test_limiter");
}
