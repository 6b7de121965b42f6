'use strict'
// RateLimiter: a token bucket per client key, in one table of shared memory
// that every thread (and, in a space, every process) updates without a lock.
//
// Semantics (GCRA, one time per key). T = ceil(window ns / limit) is the
// time one point takes to refill, tau = burst × T the depth of the bucket.
// A key keeps its "theoretical arrival time" tat: the time at which its
// bucket is full again. consume(key, n) at `now`:
//   base = max(tat, now); next = base + n·T
//   allowed iff next - now <= tau, and then tat := next.
// So a key gets at most burst + t/T <= burst + t·limit/window points in any
// interval of t ms, whoever asks. A key with tat <= now has a full bucket:
// the same as a key that is not in the table, which is what lets a bounded
// table reuse its slots without changing any answer.
//
// Time. Every participant reads CLOCK_MONOTONIC (process.hrtime.bigint(),
// the clock of src/core/clock.c): one clock for every process of a host.
// Times are integer nanoseconds (BigInt), so every comparison and every
// retryAfter is exact; T is rounded up to a whole ns, which can only make
// the limit stricter, by under 1 ns a point.
//
// Never store a time earlier than the one read: every consume writes
// max(tat, now) + n·T, which is above the tat it read, so a caller whose
// `now` is stale (it was preempted after reading the clock) writes a later
// tat than it needs, never an earlier one. A CAS that fails re-reads the
// slot and the clock.
//
// The table. Slot i is two 64-bit words: F (the key's fingerprint) and W;
// after the slots, one claim lock word per LOCK_SPAN slots (see Claims):
//
//   W          meaning
//   0          never used (or cleared): a full bucket, free
//   > 0        tat (ns); free when tat <= now (the bucket is full again)
//   < 0        a claim in progress: -1 - (its claim lock's lease token)
//
// A key's place is a probe window of PROBE slots from hash(key) mod keys;
// F = the same keyed hash, 64 bits. The hash is HalfSipHash-1-3 (64-bit
// output; 1 round a block, 3 to finish, as Rust's HashMap runs SipHash)
// keyed by a 64-bit secret drawn from crypto when the table is made
// and stored in its header, so every participant places keys alike and a
// client that does not know the secret cannot choose keys that collide. A
// key is found by its fingerprint among the slots of its window whose W is
// a time; two distinct keys with equal 64-bit fingerprints under a secret
// they cannot see are a 2^-64 event per pair.
//
// Updates. A consume of a key in slot i reads W, then checks F, then CAS(W).
// F changes only while W holds a claim marker, and every value W takes
// after a marker is either a new tat above every tat it held before the
// marker (next > now >= old tat) or 0 after F was cleared: so a CAS that
// succeeds saw no claim in between, and the slot was this key's all along.
// (refund and reset lower W; a lowered W that a later claim raises back to
// the very same nanosecond is the only way around that, and the cost would
// be that one call charged to another key.)
//
// Claims. A key with no slot claims one, and a key must never hold two
// slots: two slots are two buckets, and the key would get 2 × burst. So the
// claims of one key are serialised by a claim lock, a 64-bit word per
// group of LOCK_SPAN starting slots (all claims of a key use the lock of its
// start). The common path (a key in the table) takes no lock: one CAS.
//
//   L (lock)   > 0: a lease, the time (ns) it expires (its token); free
//              once <= now. <= 0: free, -(the last token). Taken by
//              CAS(l -> a), a = max(now + LEASE_NS, |l| + 1); given back
//              by CAS(a -> -a). So the tokens one lock word takes grow
//              strictly: L = a again means nobody took L since.
//   marker     W = -1 - a: a claim in progress by the holder of token a;
//              abandoned once a <= now (the lease ran out).
//
// A claim of key K (fingerprint f), start s, lock g:
//   1. take L[g] (wait while a live lease holds it; take it over once it
//      has expired: a holder killed mid-claim wedges nobody);
//   2. in K's window, clear every abandoned marker: CAS(W: m -> own
//      marker), F := 0, CAS(W -> 0);
//   3. look for K again (F = f, W >= 0): found, give L back and consume
//      there (the common path);
//   4. mark a free slot i of K's window: CAS(W: free -> -1 - a); F := f;
//   5. re-check L[g] = a and now < a, else undo (F := 0, W := 0) and
//      start again;
//   6. activate: CAS(W: -1 - a -> now + n·T); give L back.
//
// Invariant (U): K's window holds at most one slot with F = f and W >= 0.
// Such a slot appears only at step 6. Suppose claims A (token a) and B
// (token b) activate slots i != j for K, B's step 3 reading slot i before A's
// step 6 (else B finds i and does not claim). Both held L[g]; say B took
// it after A. If A's re-check (5) came after B took L, it failed (L = a
// again would need a token taken twice): A never activates. So A's re-check,
// hence A's marker (4), came before B took L: B's step 2 then reads slot i
// holding A's marker (A has not activated yet: its step 6 is after B's
// step 3), whose token a has run out: A did not give L back (it had not
// finished), so L passed from A by a takeover, once a <= now. B
// clears it, and A's activation CAS fails. If B took L first, swap the
// names: then A took L over from B, and either A's step 2 cleared B's marker
// (B's activation fails) or B activated before A's step 2, and A's step 3
// finds j. Either way one activation, and (U) holds. The common path then
// charges every call of K to the one bucket, which is what makes the bound
// burst + t·limit/window exact across every participant.
//
// What (U) assumes: F is written (steps 2, 4, 5) by the holder of W's
// marker right after the CAS that made it so. A participant stopped for
// longer than LEASE_NS between that CAS and its F store (two adjacent
// statements) could store F into a slot that has since been cleared and
// claimed by someone else: LEASE_NS is 2 s, far beyond scheduler
// preemption and GC pauses. Waiting for a lease naps (Atomics.wait on a
// private cell), so waiters do not spin a CPU, and never longer than
// CLAIM_WAIT_NS in one call: consume is synchronous on an event loop, and
// a lease is a word anyone can write (a claimant killed mid-claim leaves
// one running for LEASE_NS; a co-tenant can push it forward for ever). A
// call that cannot have the lock within that answers as a full table does
// (whenFull), flagged `busy`; the key's next call claims again.
//
// Untrusted memory. Any thread (in a space, any process) can write any word
// at any time. The parameters are read once, when the limiter is made or
// attached, checked, and kept here; no index ever comes from the shared
// memory (slot indexes come from the hash and the kept `keys`), and a slot
// word of any value gives an answer for that key only, or
// ERR_SABSYNC_BAD_MEMORY (a tat too far ahead to have been written by a
// participant).

const { randomFillSync } = require('crypto')
const { memoryOf, notOptions, madeAs, SabsyncError, invalidType, outOfRange } = require('./shared')
const { attachTo, writeTag, sizeAgrees } = require('./kind')
const { intOption, keyString, checkPoints, storeOf } = require('./rate-limiter-common')
const native = require('./native')

const VERSION = 2 // 2: claim locks after the slots
const HEADER_BYTES = 64
const SLOT_BYTES = 16
const PROBE = 16
const LOCK_SPAN = 16 // starting slots per claim lock
const LEASE_NS = 2_000_000_000n // a claim lock's lease (see "What (U) assumes")
const CLAIM_WAIT_NS = 10_000_000n // the longest one call waits for a claim lock
const MAX_KEYS = 1 << 24 // 256 MiB of slots
const MAX_LIMIT = 1e9
const MAX_WINDOW = 0x7FFFFFFF // ms (~24.8 days)
const MAX_TAU = 1n << 60n // ns (~36 years): keeps every sum far from 2^63
// A tat more than tau ahead of the clock was not written by a participant
// (each writes at most its own now + tau, and reads the clock before);
// the slack keeps a clock read a hair early on another CPU from ever
// being called corruption.
const SLACK_NS = 1_000_000n
const MAX_TRIES = 1000 // CAS retries before the slot is called corrupt
const DEFAULT_KEYS = 10_000
const WHEN_FULL = ['allow', 'deny']

// Header, Int32 words:
//   0 tag 'RLK1' (written last)   1 version   2 limit   3 window (ms)
//   4 burst   5 keys   6 whenFull (0 allow, 1 deny)   7 probe
//   8, 9 secret (HalfSipHash key)
//   10 apart: 0 the slots follow the header; 1 they are a space's entry of
//      their own (attached by space.rateLimiter only, never by from())
//   11 .. 15 zero
const H = { VERSION: 1, LIMIT: 2, WINDOW: 3, BURST: 4, KEYS: 5, WHEN_FULL: 6, PROBE: 7, K0: 8, K1: 9, APART: 10 }

const LITTLE = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1
const LO = LITTLE ? 0 : 1 // the Int32 half of a BigInt64 with its low bits
const HI = 1 - LO

// ---- HalfSipHash-1-3, 64-bit output, over the key's UTF-16 code units ----

const rotl = (x, b) => (x << b) | (x >>> (32 - b))

// The two 32-bit halves of the hash go to fp[0] (low) and fp[1] (high).
const fp = new Int32Array(2)

// What the native common path answers (src/napi/limiter.c); its figures,
// ahead and behind in ns, in OUT[0] and OUT[1].
const { LIMITER_ALLOWED: ALLOWED, LIMITER_DENIED: DENIED } = native.constants
const OUT = native.out

// HalfSipHash-c-d: c rounds a block, d to finish (the reference's
// cROUNDS and dROUNDS). Each code unit is two bytes, little-endian: the
// bytes of the string are one-to-one with the string, and their length is
// in the last block. test/rate-limiter.test.js checks makeHash(2, 4)
// against the reference's 64-bit test vectors.
function makeHash (c, d) {
  return function hashKey (s, k0, k1) {
    let v0 = k0
    let v1 = k1 ^ 0xee
    let v2 = 0x6c796765 ^ k0
    let v3 = 0x74656462 ^ k1
    const n = s.length
    const end = n & ~1
    let i = 0
    for (; i < end; i += 2) {
      const m = s.charCodeAt(i) | (s.charCodeAt(i + 1) << 16)
      v3 ^= m
      for (let r = 0; r < c; r++) {
        v0 = (v0 + v1) | 0; v1 = rotl(v1, 5); v1 ^= v0; v0 = rotl(v0, 16)
        v2 = (v2 + v3) | 0; v3 = rotl(v3, 8); v3 ^= v2
        v0 = (v0 + v3) | 0; v3 = rotl(v3, 7); v3 ^= v0
        v2 = (v2 + v1) | 0; v1 = rotl(v1, 13); v1 ^= v2; v2 = rotl(v2, 16)
      }
      v0 ^= m
    }
    // ((2n bytes) mod 256) << 24, and the odd code unit's two bytes.
    const b = ((n * 2) << 24) | (i < n ? s.charCodeAt(i) : 0)
    v3 ^= b
    for (let r = 0; r < c; r++) {
      v0 = (v0 + v1) | 0; v1 = rotl(v1, 5); v1 ^= v0; v0 = rotl(v0, 16)
      v2 = (v2 + v3) | 0; v3 = rotl(v3, 8); v3 ^= v2
      v0 = (v0 + v3) | 0; v3 = rotl(v3, 7); v3 ^= v0
      v2 = (v2 + v1) | 0; v1 = rotl(v1, 13); v1 ^= v2; v2 = rotl(v2, 16)
    }
    v0 ^= b
    v2 ^= 0xee
    for (let r = 0; r < d; r++) {
      v0 = (v0 + v1) | 0; v1 = rotl(v1, 5); v1 ^= v0; v0 = rotl(v0, 16)
      v2 = (v2 + v3) | 0; v3 = rotl(v3, 8); v3 ^= v2
      v0 = (v0 + v3) | 0; v3 = rotl(v3, 7); v3 ^= v0
      v2 = (v2 + v1) | 0; v1 = rotl(v1, 13); v1 ^= v2; v2 = rotl(v2, 16)
    }
    fp[0] = v1 ^ v3
    v1 ^= 0xdd
    for (let r = 0; r < d; r++) {
      v0 = (v0 + v1) | 0; v1 = rotl(v1, 5); v1 ^= v0; v0 = rotl(v0, 16)
      v2 = (v2 + v3) | 0; v3 = rotl(v3, 8); v3 ^= v2
      v0 = (v0 + v3) | 0; v3 = rotl(v3, 7); v3 ^= v0
      v2 = (v2 + v1) | 0; v1 = rotl(v1, 13); v1 ^= v2; v2 = rotl(v2, 16)
    }
    fp[1] = v1 ^ v3
  }
}

const hashKey = makeHash(1, 3)

// ---- arguments ----

// { limit, window, burst, keys, whenFull } checked, with the defaults.
// `name` prefixes the option names in errors ('options.').
function parseOptions (options, name = 'options') {
  if (options === undefined || options === null) throw invalidType(name, 'an object like { limit, window }', options)
  if (typeof options !== 'object') throw invalidType(name, 'an object like { limit, window }', options)
  const peer = require('./errors').peerOptionError(options, name); if (peer !== undefined) throw peer // eslint-disable-line
  const limit = intOption(`${name}.limit`, options.limit, 1, MAX_LIMIT)
  const window = intOption(`${name}.window`, options.window, 1, MAX_WINDOW)
  const burst = options.burst === undefined ? limit : intOption(`${name}.burst`, options.burst, 1, MAX_LIMIT)
  const keys = options.keys === undefined ? DEFAULT_KEYS : intOption(`${name}.keys`, options.keys, 1, MAX_KEYS)
  const whenFull = options.whenFull === undefined ? 'allow' : options.whenFull
  if (!WHEN_FULL.includes(whenFull)) {
    if (typeof whenFull !== 'string') throw invalidType(`${name}.whenFull`, "'allow' or 'deny'", whenFull)
    throw outOfRange(`${name}.whenFull`, "'allow' or 'deny'", whenFull)
  }
  const windowNs = BigInt(window) * 1_000_000n
  if (windowNs < BigInt(limit)) {
    throw outOfRange(`${name}.limit`, `at most one point a nanosecond: <= ${windowNs} for a window of ${window} ms`, limit)
  }
  const T = (windowNs + BigInt(limit) - 1n) / BigInt(limit)
  if (BigInt(burst) * T > MAX_TAU) {
    throw outOfRange(`${name}.burst`, 'such that burst × window / limit is below 2^60 ns (~36 years)', burst)
  }
  return { limit, window, burst, keys, whenFull }
}

const locksFor = keys => Math.ceil(keys / LOCK_SPAN)
const tableBytes = keys => SLOT_BYTES * keys + 8 * locksFor(keys)
const bytesFor = keys => HEADER_BYTES + tableBytes(keys)

// A nap while a claim lock is held: Atomics.wait on a cell nobody notifies.
const napCell = new Int32Array(new SharedArrayBuffer(4))
const NAP_MS = 0.05

// Write a header (the tag last: a thread that reads the tag sees the rest).
function writeHeader (i32, p, apart = 0) {
  const secret = new Int32Array(2)
  randomFillSync(secret)
  Atomics.store(i32, H.VERSION, VERSION)
  Atomics.store(i32, H.LIMIT, p.limit)
  Atomics.store(i32, H.WINDOW, p.window)
  Atomics.store(i32, H.BURST, p.burst)
  Atomics.store(i32, H.KEYS, p.keys)
  Atomics.store(i32, H.WHEN_FULL, WHEN_FULL.indexOf(p.whenFull))
  Atomics.store(i32, H.PROBE, PROBE)
  Atomics.store(i32, H.K0, secret[0])
  Atomics.store(i32, H.K1, secret[1])
  Atomics.store(i32, H.APART, apart)
}

// Read a header once, check it: { limit, window, burst, keys, whenFull, k0, k1 }.
function readHeader (i32, where) {
  const bad = what => new SabsyncError('ERR_SABSYNC_BAD_MEMORY', `RateLimiter: ${where}: ${what}`)
  if (Atomics.load(i32, H.VERSION) !== VERSION) throw bad(`not a RateLimiter of layout version ${VERSION}`)
  if (Atomics.load(i32, H.PROBE) !== PROBE) throw bad('the header is overwritten (probe)')
  const wf = Atomics.load(i32, H.WHEN_FULL)
  const raw = {
    limit: Atomics.load(i32, H.LIMIT),
    window: Atomics.load(i32, H.WINDOW),
    burst: Atomics.load(i32, H.BURST),
    keys: Atomics.load(i32, H.KEYS),
    whenFull: WHEN_FULL[wf]
  }
  let p
  try {
    p = parseOptions(raw, 'header')
  } catch (err) {
    throw bad(`the header is overwritten (${err.message})`)
  }
  return { ...p, k0: Atomics.load(i32, H.K0), k1: Atomics.load(i32, H.K1), apart: Atomics.load(i32, H.APART) }
}

// ---- the limiter ----

// ns (a Number: every difference here is at most tau + T, below 2^61)
// as ms, rounded up to a whole µs: waiting this many ms is always enough.
// Converting with Number() keeps a difference below 2^53 exact; above
// that (a bucket deeper than 104 days) it is within a part in 2^52.
const msOf = ns => (ns > 0 ? Math.ceil(ns / 1000) / 1000 : 0)

/** How a key stands: what consume, peek and the full table answer. */
function answer (allowed, remaining, retryAfterNs, resetAfterNs, limit) {
  return { allowed, remaining, retryAfter: msOf(retryAfterNs), resetAfter: msOf(resetAfterNs), limit }
}

class RateLimiter {
  #p // the checked parameters (never re-read from memory)
  #T
  #tau
  #Tn // T and tau as Numbers, for the answers
  #taun
  #w64 // BigInt64Array over the slots
  #w32 // Int32Array over the slots
  #locks // BigInt64Array: the claim locks
  #probe
  #costs = [] // n·T for small n
  #view // the parameters, natively (src/napi/limiter.c)

  /**
   * A limit per client key: new RateLimiter({ limit, window, burst, keys,
   * whenFull, buffer, byteOffset }). limit points per window ms, burst deep
   * (default limit); keys: slots in the table (default 10,000); whenFull:
   * what a new key gets when its slots are all held by active keys
   * ('allow', the default, or 'deny').
   */
  constructor (options, slots) {
    if (slots !== undefined && slots.attach === ATTACH) {
      // RateLimiter.from / space: memory already made and checked.
      this.#init(slots.params, slots.w64, slots.w32, slots.locks)
      Object.defineProperty(this, 'buffer', { value: slots.buffer, enumerable: true })
      Object.defineProperty(this, 'byteOffset', { value: slots.byteOffset, enumerable: true })
      Object.defineProperty(this, 'byteLength', { value: bytesFor(slots.params.keys), enumerable: true })
      return
    }
    // Memory passed where options belong says what to pass instead.
    const wrong = options !== null && typeof options === 'object' ? notOptions('RateLimiter', options) : undefined
    if (wrong !== undefined) throw wrong
    const p = parseOptions(options)
    const mem = memoryOf('RateLimiter', bytesFor(p.keys), options)
    const i32 = mem.i32
    i32.fill(0) // a fresh table: every slot never used
    writeHeader(i32, p)
    writeTag(i32, 'RateLimiter')
    const { k0, k1 } = readHeader(i32, 'new')
    this.#init({ ...p, k0, k1 }, ...slotViews(mem.buffer, mem.byteOffset + HEADER_BYTES, p.keys))
    Object.defineProperty(this, 'buffer', { value: mem.buffer, enumerable: true })
    Object.defineProperty(this, 'byteOffset', { value: mem.byteOffset, enumerable: true })
    Object.defineProperty(this, 'byteLength', { value: mem.i32.byteLength, enumerable: true })
    madeAs(this, 'RateLimiter')
  }

  #init (p, w64, w32, locks) {
    this.#p = p
    const windowNs = BigInt(p.window) * 1_000_000n
    this.#T = (windowNs + BigInt(p.limit) - 1n) / BigInt(p.limit)
    this.#tau = BigInt(p.burst) * this.#T
    this.#Tn = Number(this.#T)
    this.#taun = Number(this.#tau)
    this.#w64 = w64
    this.#w32 = w32
    this.#locks = locks
    this.#probe = Math.min(PROBE, p.keys)
    this.#view = native.limiterView(p.keys, this.#probe, p.k0, p.k1, this.#T, this.#tau)
    for (let n = 0; n <= Math.min(p.burst, 64); n++) this.#costs.push(BigInt(n) * this.#T)
  }

  /** Points per window. */
  get limit () { return this.#p.limit }
  /** The window, ms. */
  get window () { return this.#p.window }
  /** The depth of a bucket, points. */
  get burst () { return this.#p.burst }
  /** Slots in the table. */
  get keys () { return this.#p.keys }
  /** What a new key gets when the table has no room for it. */
  get whenFull () { return this.#p.whenFull }

  #cost (n) {
    return n < this.#costs.length ? this.#costs[n] : BigInt(n) * this.#T
  }

  // The slot of the hashed key (fp) with the latest tat, or -1. `w` gets
  // its W. Slots whose W is a claim marker are not the key's (yet).
  #find (start, out) {
    const w32 = this.#w32
    const w64 = this.#w64
    const keys = this.#p.keys
    const lo = fp[0]
    const hi = fp[1]
    let best = -1
    let bestW = -1n
    for (let k = 0, i = start; k < this.#probe; k++, i = i + 1 === keys ? 0 : i + 1) {
      const j = i * 4
      if (w32[j + LO] !== lo || w32[j + HI] !== hi) continue
      const w = Atomics.load(w64, i * 2 + 1)
      // F again, after W: see "Updates" above.
      if (w < 0n || Atomics.load(w32, j + LO) !== lo || Atomics.load(w32, j + HI) !== hi) continue
      if (w > bestW) { best = i; bestW = w }
    }
    out.w = bestW
    return best
  }

  #start (key) {
    const s = keyString(key)
    hashKey(s, this.#p.k0, this.#p.k1)
    return (fp[0] >>> 0) % this.#p.keys
  }

  #corrupt (what) {
    return new SabsyncError('ERR_SABSYNC_BAD_MEMORY', `RateLimiter: the table's shared state is corrupt (${what})`)
  }

  /**
   * Take `points` (default 1) from `key`'s bucket if it holds them:
   * { allowed, remaining, retryAfter, resetAfter, limit } (ms).
   */
  consume (key, points = 1) {
    const s = keyString(key)
    const n = checkPoints(points, this.#p.burst)
    // The common path natively (src/core/limiter.c does what the loop below
    // does, word for word, without a BigInt): a key in the table, one CAS.
    const got = native.limiterConsume(this.#view, this.#w64, s, n)
    if (got === ALLOWED) {
      const ahead = OUT[0]
      return answer(true, Math.floor((this.#taun - ahead) / this.#Tn), 0, ahead, this.#p.limit)
    }
    if (got === DENIED) {
      const ahead = OUT[0]
      const behind = OUT[1]
      return answer(false, Math.max(0, Math.floor((this.#taun - behind) / this.#Tn)), ahead - this.#taun, behind, this.#p.limit)
    }
    // Not in the table (claimed below, in JS), or a key too long for the
    // native path: the same steps here.
    const start = this.#start(s)
    const cost = this.#cost(n)
    const lo = fp[0]
    const hi = fp[1]
    const w64 = this.#w64
    const tau = this.#tau
    const out = { w: 0n }
    for (let tries = 0; tries < MAX_TRIES; tries++) {
      fp[0] = lo; fp[1] = hi
      const i = this.#find(start, out)
      if (i < 0) {
        const r = this.#claim(start, lo, hi, cost)
        if (r !== undefined) return r
        continue
      }
      const w = out.w
      const now = process.hrtime.bigint() // after W: a tat is never ahead of now + tau
      if (w - now > tau + SLACK_NS) throw this.#corrupt('a time beyond the bucket')
      const base = w > now ? w : now
      const next = base + cost
      const d = next - now
      const ahead = Number(d)
      if (d > tau) { // the decision in exact integers; the answer's ms from Numbers
        const behind = Number(base - now)
        return answer(false, Math.max(0, Math.floor((this.#taun - behind) / this.#Tn)), ahead - this.#taun, behind, this.#p.limit)
      }
      if (Atomics.compareExchange(w64, i * 2 + 1, w, next) === w) {
        return answer(true, Math.floor((this.#taun - ahead) / this.#Tn), 0, ahead, this.#p.limit)
      }
    }
    throw this.#corrupt('no update took effect in ' + MAX_TRIES + ' tries')
  }

  // A key not in the table takes a free slot of its window under its claim
  // lock and consumes `cost` there (see "Claims" above); undefined to look
  // again (the key is in the table now, or a race was lost), or the
  // whenFull answer when no slot is free.
  #claim (start, lo, hi, cost) {
    const a = this.#lock(start, lo, hi)
    if (a === undefined) return undefined
    if (a === null) {
      const now = process.hrtime.bigint()
      const r = this.#whenFull(cost, now + CLAIM_WAIT_NS, now)
      r.busy = true
      return r
    }
    const g = (start / LOCK_SPAN) | 0
    try {
      return this.#claimHeld(start, lo, hi, cost, a, g)
    } finally {
      Atomics.compareExchange(this.#locks, g, a, -a) // a lease taken over: nothing to give back
    }
  }

  // Take the claim lock of `start`: its token, undefined when the key
  // appeared in the table while waiting, or null when a live lease kept the
  // lock for CLAIM_WAIT_NS.
  #lock (start, lo, hi) {
    const locks = this.#locks
    const g = (start / LOCK_SPAN) | 0
    const out = { w: 0n }
    let until = 0n
    for (let spins = 0; ; spins++) {
      const l = Atomics.load(locks, g)
      const now = process.hrtime.bigint()
      if (until === 0n) until = now + CLAIM_WAIT_NS
      else if (now >= until && l > now) return null
      const last = l < 0n ? -l : l
      // A token no participant could have taken (each takes at most
      // now + LEASE_NS after reading its clock) was written by someone else.
      if (last - now > LEASE_NS + SLACK_NS) throw this.#corrupt('a claim lock beyond its lease')
      if (l <= now) {
        const a = now + LEASE_NS > last ? now + LEASE_NS : last + 1n
        if (Atomics.compareExchange(locks, g, l, a) === l) return a
        continue
      }
      if (spins >= 16) Atomics.wait(napCell, 0, 0, NAP_MS)
      fp[0] = lo; fp[1] = hi
      if (this.#find(start, out) >= 0) return undefined // claimed meanwhile
    }
  }

  // Whether W (a marker) is abandoned: its lease has run out, or it holds
  // a lease no participant could have taken.
  #abandoned (w, now) {
    const a = -1n - w
    return a <= now || a - now > LEASE_NS + SLACK_NS
  }

  // Steps 2 to 6 of a claim, holding lock g with token a.
  #claimHeld (start, lo, hi, cost, a, g) {
    const w64 = this.#w64
    const locks = this.#locks
    const keys = this.#p.keys
    const marker = -1n - a
    let now = process.hrtime.bigint()
    // 2. Clear abandoned markers: a late claimer of this key cannot activate.
    for (let k = 0, i = start; k < this.#probe; k++, i = i + 1 === keys ? 0 : i + 1) {
      const w = Atomics.load(w64, i * 2 + 1)
      if (w < 0n && this.#abandoned(w, now) && Atomics.compareExchange(w64, i * 2 + 1, w, marker) === w) {
        Atomics.store(w64, i * 2, 0n)
        Atomics.compareExchange(w64, i * 2 + 1, marker, 0n)
      }
    }
    // 3. The key may have been claimed since the caller looked.
    fp[0] = lo; fp[1] = hi
    if (this.#find(start, { w: 0n }) >= 0) return undefined
    // 4. A free slot: an empty one first, then one whose bucket is full
    // again (another key's, gone quiet). Taking an empty slot while there
    // is one keeps the quiet keys in theirs, where their next call finds
    // them without a claim: with the empty ones taken last, keys whose
    // buckets refill fast took each other's slots in turn, and most
    // calls were claims (bench/cases/rate-limiter.js, 1,000 keys in 4,096
    // slots).
    now = process.hrtime.bigint()
    let soonest = -1n
    for (let k = 0, i = start; k < 2 * this.#probe; k++, i = i + 1 === keys ? 0 : i + 1) {
      if (k === this.#probe) i = start // the second pass
      const w = Atomics.load(w64, i * 2 + 1)
      let free
      if (w >= 0n) {
        free = k < this.#probe ? w === 0n : w <= now
        if (w > now && (soonest < 0n || w < soonest)) soonest = w
      } else {
        free = this.#abandoned(w, now)
      }
      if (!free || Atomics.compareExchange(w64, i * 2 + 1, w, marker) !== w) continue
      Atomics.store(w64, i * 2, BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo >>> 0)))
      // 5. Still the lock's holder? A holder whose lease was taken over
      // undoes its mark; its successor decides.
      if (Atomics.load(locks, g) !== a || process.hrtime.bigint() >= a) {
        Atomics.store(w64, i * 2, 0n)
        Atomics.compareExchange(w64, i * 2 + 1, marker, 0n)
        return undefined
      }
      // 6. Activate (fails when a successor cleared the mark).
      const next = process.hrtime.bigint() + cost
      if (Atomics.compareExchange(w64, i * 2 + 1, marker, next) !== marker) return undefined
      const ahead = Number(cost)
      return answer(true, Math.floor((this.#taun - ahead) / this.#Tn), 0, ahead, this.#p.limit)
    }
    const r = this.#whenFull(cost, soonest, now)
    r.full = true
    return r
  }

  // The whenFull answer for a call that found no slot it could claim:
  // retryAfter, when denied, until `soonest` (a slot's tat; < 0: unknown).
  #whenFull (cost, soonest, now) {
    const allow = this.#p.whenFull === 'allow'
    return answer(allow, allow ? this.#p.burst - Math.round(Number(cost) / this.#Tn) : 0,
      allow || soonest < 0n ? 0 : Number(soonest - now), 0, this.#p.limit)
  }

  /** How `key` stands, consuming nothing (allowed: whether 1 point would be). */
  peek (key) {
    const start = this.#start(key)
    const out = { w: 0n }
    const i = this.#find(start, out)
    if (i < 0) return answer(true, this.#p.burst, 0, 0, this.#p.limit)
    const now = process.hrtime.bigint()
    const w = out.w
    if (w - now > this.#tau + SLACK_NS) throw this.#corrupt('a time beyond the bucket')
    const behind = w > now ? Number(w - now) : 0
    const ahead = behind + this.#Tn
    const allowed = (w > now ? w : now) + this.#T - now <= this.#tau
    return answer(allowed, Math.max(0, Math.floor((this.#taun - behind) / this.#Tn)), allowed ? 0 : ahead - this.#taun, behind, this.#p.limit)
  }

  /** Give `points` (default 1) back to `key` (a request that did not count). */
  refund (key, points = 1) {
    const start = this.#start(key)
    const cost = this.#cost(checkPoints(points, this.#p.burst))
    this.#lower(start, w => w - cost)
  }

  /** Forget `key`: its bucket is full again. */
  reset (key) {
    const start = this.#start(key)
    this.#lower(start, () => 0n)
  }

  // Lower the tat of every slot of the hashed key to f(tat), never below
  // now (below now means "full", whatever the value).
  #lower (start, f) {
    const lo = fp[0]
    const hi = fp[1]
    const out = { w: 0n }
    for (let tries = 0; tries < MAX_TRIES; tries++) {
      fp[0] = lo; fp[1] = hi
      const i = this.#find(start, out)
      if (i < 0) return
      const w = out.w
      const now = process.hrtime.bigint()
      if (w <= now) return
      let next = f(w)
      if (next < now) next = now
      if (Atomics.compareExchange(this.#w64, i * 2 + 1, w, next) === w) {
        if (next <= now) continue // a second slot of the key, if any
        return
      }
    }
    throw this.#corrupt('no update took effect in ' + MAX_TRIES + ' tries')
  }

  /**
   * An express-rate-limit Store over this limiter: hits are points, and
   * resetTime is when the key's bucket is full again. Use it with
   * rateLimit({ limit: limiter.burst, store: limiter.store() }) (the
   * limiter decides; express-rate-limit compares totalHits with its limit).
   */
  store () {
    return storeOf(this)
  }

  /** Bytes a RateLimiter of `keys` slots needs (8-byte aligned). */
  static byteLengthFor (keys = DEFAULT_KEYS) {
    intOption('keys', keys, 1, MAX_KEYS)
    return bytesFor(keys)
  }

  /** Attach to a RateLimiter made in another thread (or its { buffer, byteOffset }). */
  static from (handle) {
    const { buffer, byteOffset, byteLength } = attachTo('RateLimiter', handle)
    const head = memoryOf('RateLimiter', HEADER_BYTES, { buffer, byteOffset }, 'handle')
    const p = readHeader(head.i32, `byteOffset ${byteOffset}`)
    if (p.apart !== 0) {
      throw new SabsyncError('ERR_SABSYNC_BAD_MEMORY', `RateLimiter.from(handle): the RateLimiter at byteOffset ${byteOffset} lives in a shared space: attach with space.rateLimiter(key, options)`)
    }
    sizeAgrees('RateLimiter', byteOffset, byteLength, bytesFor(p.keys), `a RateLimiter of ${p.keys} keys`)
    memoryOf('RateLimiter', bytesFor(p.keys), { buffer, byteOffset }, 'handle') // in range
    const [w64, w32, locks] = slotViews(buffer, byteOffset + HEADER_BYTES, p.keys)
    return new RateLimiter(undefined, { attach: ATTACH, params: p, w64, w32, locks, buffer, byteOffset })
  }
}

const ATTACH = Symbol('attach')

// The slots (as 64- and 32-bit words) and the claim locks after them.
function slotViews (buffer, byteOffset, keys) {
  return [
    new BigInt64Array(buffer, byteOffset, keys * 2),
    new Int32Array(buffer, byteOffset, keys * 4),
    new BigInt64Array(buffer, byteOffset + SLOT_BYTES * keys, locksFor(keys))
  ]
}

Object.defineProperty(RateLimiter, 'byteLength', { value: bytesFor(DEFAULT_KEYS), enumerable: true })

// ---- in a shared space (lib/space.js) ----

// The header of a space's limiter, made (or found) under its key, and its
// table under a second key; `lookup(kind, key, params, bytes, create,
// attach)` is the space's directory. The header is looked up first, with
// fixed parameters, so a limiter asked for with other parameters is told
// what the space holds.
function inSpace (lookup, key, options, kinds) {
  const p = parseOptions(options)
  const header = lookup(kinds.header, key, [], HEADER_BYTES,
    m => {
      const { i32 } = memoryOf('RateLimiter', HEADER_BYTES, m)
      writeHeader(i32, p, 1)
      writeTag(i32, 'RateLimiter')
      return m
    },
    m => m)
  const { buffer, byteOffset } = attachTo('RateLimiter', header)
  const head = memoryOf('RateLimiter', HEADER_BYTES, { buffer, byteOffset }, 'handle')
  const have = readHeader(head.i32, `space key "${key}"`)
  const show = q => `{ limit: ${q.limit}, window: ${q.window}, burst: ${q.burst}, keys: ${q.keys}, whenFull: '${q.whenFull}' }`
  if (have.apart !== 1) throw new SabsyncError('ERR_SABSYNC_BAD_MEMORY', `space.rateLimiter("${key}"): the header is overwritten (apart)`)
  if (have.limit !== p.limit || have.window !== p.window || have.burst !== p.burst || have.keys !== p.keys ||
      have.whenFull !== p.whenFull) {
    throw new SabsyncError('ERR_SABSYNC_SHARED_MISMATCH',
      `space.rateLimiter("${key}"): the space holds a RateLimiter with ${show(have)}, not ${show(p)}`)
  }
  const table = lookup(kinds.table, key + '\u0001', [p.keys], tableBytes(p.keys), m => m, m => m)
  const [w64, w32, locks] = slotViews(table.buffer, table.byteOffset, p.keys) // zeroed when made
  return new RateLimiter(undefined, { attach: ATTACH, params: have, w64, w32, locks, buffer, byteOffset })
}

module.exports = { RateLimiter, inSpace, parseOptions, hashKey, makeHash, fp }
