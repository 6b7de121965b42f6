/*
 * RateLimiter: a token bucket per client key, in one table of shared memory
 * that every thread (and, in a space, every process) updates without a lock.
 * This file is the whole algorithm: lib/rate-limiter.js validates, lays the
 * table out, and turns these results into answers.
 *
 * Semantics (GCRA, one time per key). T (ns) is the time one point takes to
 * refill, tau = burst × T the depth of the bucket. A key keeps its
 * "theoretical arrival time" tat: the time at which its bucket is full
 * again. consume(key, n) at `now`:
 *   base = max(tat, now); next = base + n·T
 *   allowed iff next - now <= tau, and then tat := next.
 * So a key gets at most burst + t/T points in any interval of t ns,
 * whoever asks. A key with tat <= now has a full bucket: the same as a key
 * that is not in the table, which is what lets a bounded table reuse its
 * slots without changing any answer.
 *
 * T and tau are the caller's (sab_limiter_t), not the table's: processes
 * with other parameters (a rolling deploy) share the table, each applying
 * its own to the same tats (C1). A tat further ahead than this caller's tau
 * (left by a deeper bucket) is obeyed as written: refused, with the
 * retryAfter that says when it comes within this caller's bucket, at most
 * the deeper bucket's depth. It is never lowered: a shallower caller that
 * lowered it would hand the deeper bucket's callers again what they took,
 * on every call (a roll from 5 x 50 ms to 5 x 33 ms over-granted tenfold
 * that way). So while callers of two parameter sets share a key it gets at
 * most max(tau) / min(T) + t / min(T) points in any t, and each caller's
 * own bound once the other's tats have passed. A tat more than MAX_AHEAD
 * past the clock was written by no participant (each writes at most now +
 * tau, tau below 2^60): SAB_E_CORRUPT.
 *
 * Time. CLOCK_MONOTONIC (sab_now(), process.hrtime's clock): one clock for
 * every process of a host. Never store a time earlier than the one read
 * (refund and reset aside, which lower on purpose): every
 * consume writes max(tat, now) + n·T, above the tat it read, so a caller
 * whose `now` is stale (preempted after reading the clock) writes a later
 * tat than it needs, never an earlier one.
 *
 * The table. Slot i is two int64 words: F (the key's fingerprint,
 * ((uint64)f[1] << 32) | f[0]) and W; after the slots, one claim lock word
 * per LOCK_SPAN starting slots:
 *
 *   W          meaning
 *   0          never used (or cleared): a full bucket, free
 *   > 0        tat (ns); free when tat <= now (the bucket is full again)
 *   < 0        a claim in progress: -1 - (its claim lock's lease token)
 *
 *   L (lock)   > 0: a lease, the time (ns) it expires (its token); free
 *              once <= now. <= 0: free, -(the last token). Taken by
 *              CAS(l -> a), a = max(now + LEASE_NS, |l| + 1); given back
 *              by CAS(a -> -a). The tokens one lock word takes grow
 *              strictly: L = a again means nobody took L since.
 *
 * A key's place is a window of `probe` slots from hash(key) mod keys; F =
 * the same keyed hash, 64 bits (HalfSipHash-1-3 keyed by the table's
 * secret). A key is found by its fingerprint among the slots of its window
 * whose W is a time.
 *
 * Updates. A consume of a key in slot i reads W, then checks F, then
 * CAS(W). F changes only while W holds a claim marker, and every value W
 * takes after a marker is either a new tat above every tat it held before
 * (next > now >= old tat) or 0 after F was cleared: so a CAS that succeeds
 * saw no claim in between, and the slot was this key's all along.
 *
 * Claims. A key with no slot claims one; a key must never hold two slots
 * (two buckets: 2 × burst). The claims of one key are serialised by the
 * claim lock of its start. A claim of key K (fingerprint f), start s, lock g:
 *   1. take L[g] (wait while a live lease holds it, at most CLAIM_WAIT_NS
 *      in all; take it over once it has expired);
 *   2. in K's window, clear every abandoned marker: CAS(W: m -> own
 *      marker), F := 0, CAS(W -> 0);
 *   3. look for K again (F = f, W >= 0): found, give L back, consume there;
 *   4. mark a free slot i of K's window: CAS(W: free -> -1 - a); F := f;
 *   5. re-check L[g] = a and now < a, else undo (F := 0, W := 0), again;
 *   6. activate: CAS(W: -1 - a -> now + n·T); give L back.
 *
 * Invariant (U): K's window holds at most one slot with F = f and W >= 0.
 * Such a slot appears only at step 6. Suppose claims A (token a) and B
 * (token b) activate slots i != j for K, B's step 3 reading slot i before
 * A's step 6 (else B finds i and does not claim). Both held L[g]; say B
 * took it after A. If A's re-check (5) came after B took L, it failed (L =
 * a again would need a token taken twice): A never activates. So A's
 * re-check, hence A's marker (4), came before B took L: B's step 2 then
 * reads slot i holding A's marker, whose token a has run out (L passed
 * from A by a takeover, once a <= now). B clears it, and A's activation
 * CAS fails. If B took L first, swap the names: either A's step 2 cleared
 * B's marker or B activated before A's step 2, and A's step 3 finds j.
 * Either way one activation, and (U) holds.
 *
 * What (U) assumes: F is written (steps 2, 4, 5) by the holder of W's
 * marker right after the CAS that made it so. A participant stopped for
 * longer than LEASE_NS between that CAS and its F store (two adjacent
 * statements) could store F into a slot since cleared and claimed by
 * someone else: LEASE_NS is 2 s, far beyond preemption and GC pauses.
 * Waiting for a lease naps (NAP_NS), and never longer than CLAIM_WAIT_NS
 * in one call: consume is synchronous on an event loop, and a lease is a
 * word anyone can write (a claimant killed mid-claim leaves one running for
 * LEASE_NS; a co-tenant can push it forward for ever). A call that cannot
 * have the lock within that answers SAB_LIMITER_BUSY.
 *
 * Untrusted memory. Every word of the table can be written by another
 * thread or process at any moment. The parameters (keys, probe, the
 * secret, T, tau) come from the view, which JS made from the header it
 * read once and checked, and the caller's options; an index is `start`
 * (hash mod keys) plus a loop counter below probe, wrapped at keys, never
 * a value read from the table. Each word is read once into a local, and
 * only the local is used.
 */
#include "internal.h"

#include <stdlib.h>
#if defined(_WIN32)
#include <windows.h>
#else
#include <time.h>
#endif

#define LOCK_SPAN     16                 /* starting slots per claim lock */
#define LEASE_NS      2000000000LL       /* a claim lock's lease */
#define CLAIM_WAIT_NS 10000000LL         /* the longest one call waits for a claim lock */
#define SLACK_NS      1000000LL          /* a clock read a hair early on another CPU */
#define NAP_NS        50000L             /* a nap while a live lease holds a claim lock */
#define MAX_TRIES     1000               /* CAS retries before the slot is called corrupt */
#define AGAIN         (-1000)            /* internal: look for the key again */
#define MAX_AHEAD     ((int64_t)1 << 61) /* beyond every tau (< 2^60) and any clock skew */

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

/* HalfSipHash-1-3 (1 round a block, 3 to finish, as Rust's HashMap runs
 * SipHash) with a 64-bit output, over UTF-16 code units, two to a 32-bit
 * block, little-endian: the bytes are one-to-one with the string, and
 * their length is in the last block. test/c/test_limiter.c checks the
 * reference's vectors. */
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

#define LD(p)           __atomic_load_n((p), __ATOMIC_SEQ_CST)
#define ST(p, v)        __atomic_store_n((p), (int64_t)(v), __ATOMIC_SEQ_CST)
#define CAS(p, old, nw) cas64((p), (old), (nw))

static inline int cas64(int64_t *p, int64_t old, int64_t nw) {
  return __atomic_compare_exchange_n(p, &old, nw, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

static inline int64_t now_ns(void) { return (int64_t)sab_now(); }

static void nap(void) {
#if defined(_WIN32)
  Sleep(0);
#else
  struct timespec ts = {0, NAP_NS};
  nanosleep(&ts, NULL);
#endif
}

static inline uint32_t next_slot(const sab_limiter_t *l, uint32_t i) {
  return i + 1 == l->keys ? 0 : i + 1;
}

/* The slot of fingerprint fp in its window with the latest W >= 0, or -1;
 * *w gets that W. A slot is the key's when F = fp both before and after W
 * is read ("Updates"). */
static int64_t find(const sab_limiter_t *l, int64_t *slots, uint32_t start, int64_t fp,
                    int64_t *w) {
  int64_t best = -1, best_w = -1;
  uint32_t i = start;
  for (uint32_t k = 0; k < l->probe; k++, i = next_slot(l, i)) {
    if (__atomic_load_n(&slots[2 * (size_t)i], __ATOMIC_RELAXED) != fp) continue;
    int64_t wi = LD(&slots[2 * (size_t)i + 1]);
    if (wi < 0 || LD(&slots[2 * (size_t)i]) != fp) continue;
    if (wi > best_w) {
      best = i;
      best_w = wi;
    }
  }
  *w = best_w;
  return best;
}

static void locate(const sab_limiter_t *l, const uint16_t *key, size_t len, sab_limiter_out_t *out,
                   int64_t *fp) {
  sab_limiter_hash(key, len, l->k0, l->k1, out->f);
  out->start = out->f[0] % l->keys;
  *fp = (int64_t)(((uint64_t)out->f[1] << 32) | out->f[0]);
}

/* Whether W (a marker) is abandoned: its lease ran out, or it holds a lease
 * no participant could have taken. */
static int abandoned(int64_t w, int64_t now) {
  int64_t a = -1 - w; /* w < 0: 0 .. INT64_MAX */
  return a <= now || a - now > LEASE_NS + SLACK_NS;
}

/* Step 1: the claim lock of `start`: its token (> 0), AGAIN when the key
 * appeared in the table meanwhile, SAB_LIMITER_BUSY when a live lease kept
 * it (or its word kept changing) for CLAIM_WAIT_NS, or SAB_E_CORRUPT. */
static int64_t take_lock(const sab_limiter_t *l, int64_t *slots, int64_t *locks, uint32_t start,
                         int64_t fp) {
  int64_t *lw = &locks[start / LOCK_SPAN];
  int64_t until = 0, w;
  for (int spins = 0;; spins++) {
    int64_t v = LD(lw);
    int64_t now = now_ns();
    if (until == 0)
      until = now + CLAIM_WAIT_NS;
    else if (now >= until)
      return SAB_LIMITER_BUSY;
    if (v == INT64_MIN) return SAB_E_CORRUPT;
    int64_t last = v < 0 ? -v : v;
    /* A token no participant could have taken (each takes at most
     * now + LEASE_NS after reading its clock) was written by someone else. */
    if (last - now > LEASE_NS + SLACK_NS) return SAB_E_CORRUPT;
    if (v <= now) {
      int64_t a = now + LEASE_NS > last ? now + LEASE_NS : last + 1;
      if (CAS(lw, v, a)) return a;
      continue;
    }
    if (spins >= 16) nap();
    if (find(l, slots, start, fp, &w) >= 0) return AGAIN; /* claimed meanwhile */
  }
}

/* Steps 2 to 6, holding the lock with token a. */
static int claim_held(const sab_limiter_t *l, int64_t *slots, int64_t *locks, uint32_t start,
                      int64_t fp, int64_t cost, int64_t a, sab_limiter_out_t *out) {
  const int64_t marker = -1 - a;
  int64_t *lw = &locks[start / LOCK_SPAN];
  int64_t now = now_ns(), w;
  uint32_t i = start;
  /* 2. Clear abandoned markers: a late claimer of this key cannot activate. */
  for (uint32_t k = 0; k < l->probe; k++, i = next_slot(l, i)) {
    int64_t wi = LD(&slots[2 * (size_t)i + 1]);
    if (wi < 0 && abandoned(wi, now) && CAS(&slots[2 * (size_t)i + 1], wi, marker)) {
      ST(&slots[2 * (size_t)i], 0);
      CAS(&slots[2 * (size_t)i + 1], marker, 0);
    }
  }
  /* 3. The key may have been claimed since the caller looked. */
  if (find(l, slots, start, fp, &w) >= 0) return AGAIN;
  /* 4. A free slot: an empty one first (pass 1), then one whose bucket is
   * full again (pass 2). Taking an empty slot while there is one keeps
   * quiet keys in theirs, where their next call finds them without a
   * claim: with the empty ones taken last, keys whose buckets refill fast
   * took each other's slots in turn, and most calls were claims
   * (bench/cases/rate-limiter.js, 1,000 keys in 4,096 slots). */
  now = now_ns();
  int64_t soonest = -1;
  i = start;
  for (uint32_t k = 0; k < 2 * l->probe; k++, i = next_slot(l, i)) {
    if (k == l->probe) i = start;
    int64_t *wp = &slots[2 * (size_t)i + 1];
    int64_t wi = LD(wp);
    int free_;
    if (wi >= 0) {
      free_ = k < l->probe ? wi == 0 : wi <= now;
      if (wi > now && (soonest < 0 || wi < soonest)) soonest = wi;
    } else {
      free_ = abandoned(wi, now);
    }
    if (!free_ || !CAS(wp, wi, marker)) continue;
    ST(&slots[2 * (size_t)i], fp);
    /* 5. Still the lock's holder? One whose lease was taken over undoes
     * its mark; its successor decides. */
    if (LD(lw) != a || now_ns() >= a) {
      ST(&slots[2 * (size_t)i], 0);
      CAS(wp, marker, 0);
      return AGAIN;
    }
    /* 6. Activate (fails when a successor cleared the mark). */
    if (!CAS(wp, marker, now_ns() + cost)) return AGAIN;
    out->ahead = cost;
    out->behind = 0;
    return SAB_LIMITER_ALLOWED;
  }
  out->ahead = soonest < 0 ? -1 : soonest - now; /* when a slot frees, if known */
  out->behind = 0;
  return SAB_LIMITER_FULL;
}

/* A key not in the table: claim a slot (the steps above). */
static int claim(const sab_limiter_t *l, int64_t *slots, int64_t *locks, uint32_t start, int64_t fp,
                 int64_t cost, sab_limiter_out_t *out) {
  int64_t a = take_lock(l, slots, locks, start, fp);
  if (a == AGAIN) return AGAIN;
  if (a == SAB_LIMITER_BUSY) {
    out->ahead = CLAIM_WAIT_NS;
    out->behind = 0;
    return SAB_LIMITER_BUSY;
  }
  if (a < 0) return (int)a;
  int r = claim_held(l, slots, locks, start, fp, cost, a, out);
  CAS(&locks[start / LOCK_SPAN], a, -a); /* a lease taken over: nothing to give back */
  return r;
}

int sab_limiter_consume(const sab_limiter_t *l, int64_t *slots, int64_t *locks, const uint16_t *key,
                        size_t len, uint32_t points, sab_limiter_out_t *out) {
  int64_t fp;
  locate(l, key, len, out, &fp);
  const int64_t cost = (int64_t)points * l->T;
  for (int tries = 0; tries < MAX_TRIES; tries++) {
    int64_t w;
    int64_t i = find(l, slots, out->start, fp, &w);
    if (i < 0) {
      if (locks == NULL) return SAB_LIMITER_ABSENT;
      int r = claim(l, slots, locks, out->start, fp, cost, out);
      if (r == AGAIN) continue;
      return r;
    }
    int64_t *wp = &slots[2 * i + 1];
    const int64_t now = now_ns(); /* after W: see "Time" */
    if (w - now > MAX_AHEAD) return SAB_E_CORRUPT;
    const int64_t base = w > now ? w : now;
    const int64_t next = base + cost;
    out->ahead = next - now;
    out->behind = base - now;
    if (out->ahead > l->tau) return SAB_LIMITER_DENIED;
    if (CAS(wp, w, next)) return SAB_LIMITER_ALLOWED;
  }
  return SAB_E_CORRUPT;
}

int sab_limiter_peek(const sab_limiter_t *l, int64_t *slots, const uint16_t *key, size_t len,
                     sab_limiter_out_t *out) {
  int64_t fp, w;
  locate(l, key, len, out, &fp);
  if (find(l, slots, out->start, fp, &w) < 0) w = 0;
  const int64_t now = now_ns();
  if (w - now > MAX_AHEAD) return SAB_E_CORRUPT;
  int64_t behind = w > now ? w - now : 0;
  out->behind = behind;
  out->ahead = behind + l->T;
  return out->ahead > l->tau ? SAB_LIMITER_DENIED : SAB_LIMITER_ALLOWED;
}

int sab_limiter_lower(const sab_limiter_t *l, int64_t *slots, const uint16_t *key, size_t len,
                      uint32_t points, sab_limiter_out_t *out) {
  int64_t fp;
  locate(l, key, len, out, &fp);
  for (int tries = 0; tries < MAX_TRIES; tries++) {
    int64_t w;
    int64_t i = find(l, slots, out->start, fp, &w);
    if (i < 0) return SAB_OK;
    const int64_t now = now_ns();
    if (w <= now) return SAB_OK;
    if (w - now > MAX_AHEAD) return SAB_E_CORRUPT;
    int64_t next = points == 0 ? 0 : w - (int64_t)points * l->T;
    if (next < now) next = now;
    if (CAS(&slots[2 * i + 1], w, next)) {
      if (next <= now) continue; /* a second slot of the key, if any */
      return SAB_OK;
    }
  }
  return SAB_E_CORRUPT;
}
