/*
 * The common path of RateLimiter.consume (lib/rate-limiter.js), natively:
 * hash the key, find its slot, and take its points with one CAS. The
 * table's layout, its semantics (GCRA: one tat a key) and its proofs are at
 * the top of lib/rate-limiter.js; this file does exactly what that file's
 * #start, #find and consume loop do, word for word, so that a table can be
 * used by both at once (a key not in the table is claimed in JS).
 *
 * Why natively: in JS the path pays a BigInt for every 64-bit word it reads
 * and every time it computes, and a call to process.hrtime.bigint(); here
 * it is integer arithmetic and one vDSO clock read.
 *
 * Untrusted memory. Every word of the table can be written by another
 * thread or process at any moment. The parameters (keys, probe, the
 * secret, T, tau) come from the view, which JS made from the header it read
 * once and checked; an index is `start` (hash mod keys) plus a loop counter
 * below probe, wrapped at keys, never a value read from the table. Each
 * slot word is read once into a local; a W that is neither 0, a time nor a
 * claim marker costs the key its answer (SAB_E_CORRUPT, as JS throws),
 * never an access outside the `slots` words the caller checked.
 */
#include "internal.h"

/* A slot is two int64 words: F (the fingerprint) and W; F as two int32
 * halves, the low one first on a little-endian machine (the JS side
 * compares the halves of an Int32Array over the same bytes). */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
enum { F_LO = 1, F_HI = 0 };
#else
enum { F_LO = 0, F_HI = 1 };
#endif

#define SLACK_NS  1000000LL /* lib/rate-limiter.js SLACK_NS */
#define MAX_TRIES 1000      /* lib/rate-limiter.js MAX_TRIES */

static inline uint32_t rotl(uint32_t x, int b) { return (x << b) | (x >> (32 - b)); }

/* One SipRound of HalfSipHash on v0..v3 (a macro: the rounds stay in
 * registers). */
#define SIP_ROUND()    \
  do {                 \
    v0 += v1;          \
    v1 = rotl(v1, 5);  \
    v1 ^= v0;          \
    v0 = rotl(v0, 16); \
    v2 += v3;          \
    v3 = rotl(v3, 8);  \
    v3 ^= v2;          \
    v0 += v3;          \
    v3 = rotl(v3, 7);  \
    v3 ^= v0;          \
    v2 += v1;          \
    v1 = rotl(v1, 13); \
    v1 ^= v2;          \
    v2 = rotl(v2, 16); \
  } while (0)

/* HalfSipHash-1-3 with a 64-bit output over UTF-16 code units, two to a
 * 32-bit block, little-endian: lib/rate-limiter.js's makeHash(1, 3). */
void sab_limiter_hash(const uint16_t *s, size_t n, uint32_t k0, uint32_t k1, uint32_t out[2]) {
  uint32_t v0 = k0, v1 = k1 ^ 0xee, v2 = 0x6c796765u ^ k0, v3 = 0x74656462u ^ k1;
  size_t i = 0, end = n & ~(size_t)1;
  for (; i < end; i += 2) {
    uint32_t m = (uint32_t)s[i] | ((uint32_t)s[i + 1] << 16);
    v3 ^= m;
    SIP_ROUND();
    v0 ^= m;
  }
  uint32_t b = ((uint32_t)(n * 2) << 24) | (i < n ? s[i] : 0);
  v3 ^= b;
  SIP_ROUND();
  v0 ^= b;
  v2 ^= 0xee;
  SIP_ROUND();
  SIP_ROUND();
  SIP_ROUND();
  out[0] = v1 ^ v3;
  v1 ^= 0xdd;
  SIP_ROUND();
  SIP_ROUND();
  SIP_ROUND();
  out[1] = v1 ^ v3;
}

/* The slot of fingerprint f in its window with the latest W >= 0, or -1;
 * *w gets that W. A slot is the key's when F = f both before and after W
 * is read (lib/rate-limiter.js, "Updates"). */
static int64_t find(const sab_limiter_t *l, int64_t *slots, uint32_t start, const uint32_t f[2],
                    int64_t *w) {
  int64_t best = -1, best_w = -1;
  uint32_t i = start;
  for (uint32_t k = 0; k < l->probe; k++, i = i + 1 == l->keys ? 0 : i + 1) {
    int32_t *half = (int32_t *)&slots[2 * (size_t)i];
    if ((uint32_t)sab__rd32(&half[F_LO]) != f[0] || (uint32_t)sab__rd32(&half[F_HI]) != f[1])
      continue;
    int64_t wi = __atomic_load_n(&slots[2 * (size_t)i + 1], __ATOMIC_SEQ_CST);
    if (wi < 0 || (uint32_t)__atomic_load_n(&half[F_LO], __ATOMIC_SEQ_CST) != f[0] ||
        (uint32_t)__atomic_load_n(&half[F_HI], __ATOMIC_SEQ_CST) != f[1])
      continue;
    if (wi > best_w) {
      best = i;
      best_w = wi;
    }
  }
  *w = best_w;
  return best;
}

int sab_limiter_consume(const sab_limiter_t *l, int64_t *slots, const uint16_t *key, size_t len,
                        uint32_t points, sab_limiter_out_t *out) {
  sab_limiter_hash(key, len, l->k0, l->k1, out->f);
  out->start = out->f[0] % l->keys;
  const int64_t cost = (int64_t)points * l->T;
  for (int tries = 0; tries < MAX_TRIES; tries++) {
    int64_t w;
    int64_t i = find(l, slots, out->start, out->f, &w);
    if (i < 0) return SAB_LIMITER_ABSENT;
    /* The clock after W: a tat is never ahead of now + tau. */
    const int64_t now = (int64_t)sab_now();
    if (w - now > l->tau + SLACK_NS) return SAB_E_CORRUPT;
    const int64_t base = w > now ? w : now;
    const int64_t next = base + cost;
    out->ahead = next - now;
    out->behind = base - now;
    if (out->ahead > l->tau) return SAB_LIMITER_DENIED;
    int64_t expect = w;
    if (__atomic_compare_exchange_n(&slots[2 * i + 1], &expect, next, 0, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST))
      return SAB_LIMITER_ALLOWED;
  }
  return SAB_E_CORRUPT;
}
