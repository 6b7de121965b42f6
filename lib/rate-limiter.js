'use strict'
// RateLimiter: a token bucket per client key, in one table of shared memory
// that every thread (and, in a space, every process) updates without a lock.
// The algorithm (GCRA, one time per key), the hash, the table's words, the
// claims and their invariants are src/core/limiter.c's, and only there: this
// file checks arguments, lays out and attaches the table, and turns the
// core's answers into objects.
//
// Parameters. The table holds its shape (keys, the probe window, the
// secret), which every participant must agree on. limit, window, burst,
// exact and whenFull are each caller's: a process with other ones (a
// rolling deploy) applies them to the same per-key times (src/core/
// limiter.c, C1), so old and new processes share one table during the roll
// and the new limit holds after it.
//
// Bounds. The default bucket (burst = limit, refilled at limit per window)
// allows at most burst + t × limit / window points in any t ms. With
// { exact: true } the bucket is burst deep (default: half the limit,
// rounded up) and refills limit - burst points per window, so burst +
// window × (limit - burst) / window = limit: at most limit points in any
// window. mostIn(ms) is the bound for any interval, what a RateLimit-Policy
// header may honestly say.
//
// Untrusted memory. Any thread (in a space, any process) can write any word
// at any time. The header is read once, when the limiter is made or
// attached, checked, and kept here; no index ever comes from the shared
// memory (src/core/limiter.c reads each word once, and indexes only with
// the hash and the kept `keys`).

const { randomFillSync } = require('crypto')
const { memoryOf, notOptions, madeAs, SabsyncError, invalidType, outOfRange } = require('./shared')
const { attachTo, writeTag, sizeAgrees } = require('./kind')
const { intOption, keyString, checkPoints, storeOf, mostIn } = require('./rate-limiter-common')
const native = require('./native')
const { limiterFull } = require('./inside')

const VERSION = 2 // 2: claim locks after the slots
const HEADER_BYTES = 64
const SLOT_BYTES = 16
const PROBE = 16
const LOCK_SPAN = 16 // starting slots per claim lock (src/core/limiter.c)
const MAX_KEYS = 1 << 24 // 256 MiB of slots
const MAX_LIMIT = 1e9
const MAX_WINDOW = 0x7FFFFFFF // ms (~24.8 days)
const MAX_TAU = 1n << 60n // ns (~36 years): keeps every sum far from 2^63
const DEFAULT_KEYS = 10_000
const WHEN_FULL = ['allow', 'deny']

// Header, Int32 words:
//   0 tag 'RLK1' (written last)   1 version   2 limit   3 window (ms)
//   4 burst   5 keys   6 whenFull (0 allow, 1 deny)   7 probe
//   8, 9 secret (HalfSipHash key)
//   10 apart: 0 the slots follow the header; 1 they are a space's entry of
//      their own (attached by space.rateLimiter only, never by from())
//   11 exact (0 or 1)
//   12 .. 15 zero
// keys, probe, the secret and apart are the table's; limit, window, burst,
// whenFull and exact are its maker's, the defaults of RateLimiter.from().
const H = { VERSION: 1, LIMIT: 2, WINDOW: 3, BURST: 4, KEYS: 5, WHEN_FULL: 6, PROBE: 7, K0: 8, K1: 9, APART: 10, EXACT: 11 }

// What the core answers (src/napi/limiter.c); its figures, ahead and
// behind in ns, in OUT[0] and OUT[1].
const {
  LIMITER_ALLOWED: ALLOWED, LIMITER_DENIED: DENIED, LIMITER_FULL: FULL, LIMITER_BUSY: BUSY
} = native.constants
const OUT = native.out

// ---- arguments ----

// { limit, window, burst, exact, keys, whenFull } checked, with the
// defaults. `name` prefixes the option names in errors ('options.').
function parseOptions (options, name = 'options') {
  if (options === undefined || options === null) throw invalidType(name, 'an object like { limit, window }', options)
  if (typeof options !== 'object') throw invalidType(name, 'an object like { limit, window }', options)
  const peer = require('./errors').peerOptionError(options, name); if (peer !== undefined) throw peer // eslint-disable-line
  const limit = intOption(`${name}.limit`, options.limit, 1, MAX_LIMIT)
  const window = intOption(`${name}.window`, options.window, 1, MAX_WINDOW)
  const exact = options.exact === undefined ? false : options.exact
  if (typeof exact !== 'boolean') throw invalidType(`${name}.exact`, 'a boolean', exact)
  const burst = options.burst === undefined
    ? (exact ? Math.ceil(limit / 2) : limit)
    : intOption(`${name}.burst`, options.burst, 1, exact ? limit : MAX_LIMIT)
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
  const p = { limit, window, burst, exact, keys, whenFull }
  if (rule(p).tau > MAX_TAU) {
    throw outOfRange(`${name}.burst`, 'such that the bucket refills in under 2^60 ns (~36 years)', burst)
  }
  return p
}

// T, the ns a point takes to refill, and tau = burst × T, the bucket's
// depth. By default T = window / limit: at most burst + t / T points in
// any t. Exact: the bucket refills limit - burst points a window, so
// burst + window / T <= limit (T = window + 1 ns when burst = limit:
// nothing refills within a window). T is rounded up to a whole ns, which
// can only make the limit stricter.
function rule ({ limit, window, burst, exact }) {
  const W = BigInt(window) * 1_000_000n
  const per = exact ? BigInt(limit - burst) : BigInt(limit)
  const T = per > 0n ? (W + per - 1n) / per : W + 1n
  return { T, tau: BigInt(burst) * T }
}

const locksFor = keys => Math.ceil(keys / LOCK_SPAN)
const tableBytes = keys => SLOT_BYTES * keys + 8 * locksFor(keys)
const bytesFor = keys => HEADER_BYTES + tableBytes(keys)

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
  Atomics.store(i32, H.EXACT, p.exact ? 1 : 0)
}

// Read a header once, check it: { limit, window, burst, exact, keys, whenFull, k0, k1, apart }.
function readHeader (i32, where) {
  const bad = what => new SabsyncError('ERR_SABSYNC_BAD_MEMORY', `RateLimiter: ${where}: ${what}`)
  if (Atomics.load(i32, H.VERSION) !== VERSION) throw bad(`not a RateLimiter of layout version ${VERSION}`)
  if (Atomics.load(i32, H.PROBE) !== PROBE) throw bad('the header is overwritten (probe)')
  const wf = Atomics.load(i32, H.WHEN_FULL)
  const ex = Atomics.load(i32, H.EXACT)
  const raw = {
    limit: Atomics.load(i32, H.LIMIT),
    window: Atomics.load(i32, H.WINDOW),
    burst: Atomics.load(i32, H.BURST),
    exact: ex === 1 ? true : ex === 0 ? false : ex,
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

// The caller's parameters over a table's: options (checked) with keys
// from the table when not given, or the table's maker's when no options.
function callerParams (table, options, where) {
  if (options === undefined) return table
  const p = parseOptions({ keys: table.keys, ...options })
  if (p.keys !== table.keys) {
    throw new SabsyncError('ERR_SABSYNC_SHARED_MISMATCH',
      `${where}: options.keys is ${p.keys}, but the table has ${table.keys} slots (keys is the table's size, ` +
      'fixed when it is made: ask for the same keys, or use another key for a table of another size)')
  }
  return { ...p, k0: table.k0, k1: table.k1, apart: table.apart }
}

// ---- the limiter ----

// ns (a Number: every difference here is below 2^61) as ms, rounded up
// to a whole µs: waiting this many ms is always enough. Converting with
// Number() keeps a difference below 2^53 exact; above that (a bucket
// deeper than 104 days) it is within a part in 2^52.
const msOf = ns => (ns > 0 ? Math.ceil(ns / 1000) / 1000 : 0)

/** How a key stands: what consume, peek and the full table answer. */
function answer (allowed, remaining, retryAfterNs, resetAfterNs, limit) {
  return { allowed, remaining, retryAfter: msOf(retryAfterNs), resetAfter: msOf(resetAfterNs), limit }
}

class RateLimiter {
  #p // the checked parameters (never re-read from memory)
  #Tn // T and tau (ns) as Numbers, for the answers
  #taun
  #table // BigInt64Array over the slots and, after them, the claim locks
  #view // the table's shape and the parameters, natively (src/napi/limiter.c)

  /**
   * A limit per client key: new RateLimiter({ limit, window, burst, exact,
   * keys, whenFull, buffer, byteOffset }). limit points per window ms,
   * burst deep (default limit; with exact: true, at most limit in any
   * window, burst default half the limit); keys: slots in the table
   * (default 10,000); whenFull: what a new key gets when its slots are all
   * held by active keys ('allow', the default, or 'deny').
   */
  constructor (options, slots) {
    if (slots !== undefined && slots.attach === ATTACH) {
      // RateLimiter.from / space: memory already made and checked.
      this.#init(slots.params, slots.table)
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
    this.#init({ ...p, k0, k1 }, tableView(mem.buffer, mem.byteOffset + HEADER_BYTES, p.keys))
    Object.defineProperty(this, 'buffer', { value: mem.buffer, enumerable: true })
    Object.defineProperty(this, 'byteOffset', { value: mem.byteOffset, enumerable: true })
    Object.defineProperty(this, 'byteLength', { value: mem.i32.byteLength, enumerable: true })
    madeAs(this, 'RateLimiter')
  }

  #init (p, table) {
    this.#p = p
    const { T, tau } = rule(p)
    this.#Tn = Number(T)
    this.#taun = Number(tau)
    this.#table = table
    this.#view = native.limiterView(p.keys, Math.min(PROBE, p.keys), p.k0, p.k1, T, tau)
  }

  /** Points per window. */
  get limit () { return this.#p.limit }
  /** The window, ms. */
  get window () { return this.#p.window }
  /** The depth of a bucket, points. */
  get burst () { return this.#p.burst }
  /** Whether at most `limit` points are allowed in any window. */
  get exact () { return this.#p.exact }
  /** Slots in the table. */
  get keys () { return this.#p.keys }
  /** What a new key gets when the table has no room for it. */
  get whenFull () { return this.#p.whenFull }

  /**
   * The most points one key can be allowed in any interval of `ms` ms
   * (whatever asks): burst + ms / T. What a RateLimit-Policy header may
   * say for a window of `ms`: mostIn(window) is limit with exact: true,
   * burst + limit by default.
   */
  mostIn (ms) {
    return mostIn(this.#p, ms, 1e6, this.#Tn)
  }

  /**
   * Take `points` (default 1) from `key`'s bucket if it holds them:
   * { allowed, remaining, retryAfter, resetAfter, limit } (ms).
   */
  consume (key, points = 1) {
    const s = keyString(key)
    const n = checkPoints(points, this.#p.burst)
    const got = native.limiterConsume(this.#view, this.#table, s, n)
    const Tn = this.#Tn
    const taun = this.#taun
    if (got === ALLOWED) {
      const ahead = OUT[0]
      return answer(true, Math.floor((taun - ahead) / Tn), 0, ahead, this.#p.limit)
    }
    if (got === DENIED) {
      const ahead = OUT[0]
      const behind = OUT[1]
      return answer(false, Math.max(0, Math.floor((taun - behind) / Tn)), ahead - taun, behind, this.#p.limit)
    }
    // No slot for a new key (FULL), or its claim lock held for 10 ms (BUSY):
    // whenFull's answer; retryAfter, when denied, until a slot frees (or 10 ms).
    const allow = this.#p.whenFull === 'allow'
    const r = answer(allow, allow ? this.#p.burst - n : 0, allow || OUT[0] < 0 ? 0 : OUT[0], 0, this.#p.limit)
    if (got === FULL) {
      r.full = true
      limiterFull(this, { keys: this.#p.keys, whenFull: this.#p.whenFull, allowed: allow })
    } else if (got === BUSY) {
      r.busy = true
    }
    return r
  }

  /** How `key` stands, consuming nothing (allowed: whether 1 point would be). */
  peek (key) {
    const s = keyString(key)
    const allowed = native.limiterPeek(this.#view, this.#table, s) === ALLOWED
    const ahead = OUT[0]
    const behind = OUT[1]
    return answer(allowed, Math.max(0, Math.floor((this.#taun - behind) / this.#Tn)), allowed ? 0 : ahead - this.#taun,
      behind, this.#p.limit)
  }

  /** Give `points` (default 1) back to `key` (a request that did not count). */
  refund (key, points = 1) {
    const s = keyString(key)
    native.limiterLower(this.#view, this.#table, s, checkPoints(points, this.#p.burst))
  }

  /** Forget `key`: its bucket is full again. */
  reset (key) {
    native.limiterLower(this.#view, this.#table, keyString(key), 0)
  }

  /** 0: consume() answers at once, so nobody ever waits on a RateLimiter. */
  nrWaiting () { return 0 }

  /**
   * An express-rate-limit Store over this limiter. Give rateLimit() the
   * limit its headers may honestly send: limit: limiter.mostIn(windowMs)
   * (lib/rate-limiter-common.js, storeOf).
   */
  store () {
    return storeOf(this)
  }

  /** Bytes a RateLimiter of `keys` slots needs (8-byte aligned). */
  static byteLengthFor (keys = DEFAULT_KEYS) {
    intOption('keys', keys, 1, MAX_KEYS)
    return bytesFor(keys)
  }

  /**
   * Attach to a RateLimiter made in another thread (or its { buffer,
   * byteOffset }), with its maker's parameters or with options { limit,
   * window, burst, exact, whenFull } of this caller's.
   */
  static from (handle, options) {
    const { buffer, byteOffset, byteLength } = attachTo('RateLimiter', handle)
    const head = memoryOf('RateLimiter', HEADER_BYTES, { buffer, byteOffset }, 'handle')
    const table = readHeader(head.i32, `byteOffset ${byteOffset}`)
    if (table.apart !== 0) {
      throw new SabsyncError('ERR_SABSYNC_BAD_MEMORY', `RateLimiter.from(handle): the RateLimiter at byteOffset ${byteOffset} lives in a shared space: attach with space.rateLimiter(key, options)`)
    }
    sizeAgrees('RateLimiter', byteOffset, byteLength, bytesFor(table.keys), `a RateLimiter of ${table.keys} keys`)
    memoryOf('RateLimiter', bytesFor(table.keys), { buffer, byteOffset }, 'handle') // in range
    const params = callerParams(table, options, 'RateLimiter.from()')
    return new RateLimiter(undefined, { attach: ATTACH, params, table: tableView(buffer, byteOffset + HEADER_BYTES, table.keys), buffer, byteOffset })
  }
}

const ATTACH = Symbol('attach')

// The slots and the claim locks after them, as one array of int64 words.
const tableView = (buffer, byteOffset, keys) => new BigInt64Array(buffer, byteOffset, tableBytes(keys) / 8)

Object.defineProperty(RateLimiter, 'byteLength', { value: bytesFor(DEFAULT_KEYS), enumerable: true })

// ---- in a shared space (lib/space.js) ----

// The header of a space's limiter, made (or found) under its key, and its
// table under a second key; `lookup(kind, key, params, bytes, create,
// attach)` is the space's directory. Only the table's size (keys) must
// agree; limit, window, burst, exact and whenFull are the caller's.
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
  if (have.apart !== 1) throw new SabsyncError('ERR_SABSYNC_BAD_MEMORY', `space.rateLimiter("${key}"): the header is overwritten (apart)`)
  const params = callerParams(have, p, `space.rateLimiter("${key}")`)
  const table = lookup(kinds.table, key + '\u0001', [p.keys], tableBytes(p.keys), m => m, m => m)
  return new RateLimiter(undefined, { attach: ATTACH, params, table: tableView(table.buffer, table.byteOffset, p.keys), buffer, byteOffset }) // zeroed when made
}

module.exports = { RateLimiter, inSpace, parseOptions, rule }
