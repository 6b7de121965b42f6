'use strict'
// RateLimiter on Redis: a token bucket per client key, shared by every
// client of the server, with the API of the in-process RateLimiter
// (lib/rate-limiter.js) in promise form.
//
// Layout (lib/redis/scripts.js, keyedRate): the limiter's keys share the
// hash tag `{prefix}`, so each call is one script on one slot of a Redis
// Cluster: `{prefix}:rlz`, a sorted set of client key -> its GCRA time
// (tat, on the server's clock, TIME, µs: the moment its bucket is full
// again); `{prefix}:rlp`, where an older version kept the parameters, is
// deleted by the idle sweep once the zset is empty. One script call (one
// round trip, one key) per consume, peek, refund or reset. limit, window,
// burst and exact are each client's: clients with other ones (a rolling
// deploy) share the zset, each applying its own (a tat deeper than its
// bucket reads as its empty bucket).
//
// No key carries a TTL: under a volatile-* eviction policy Redis evicts only
// keys with one, and a bucket evicted while it refills starts full again
// (an over-grant). An entry whose time has passed answers as an absent one,
// so it may go at any time: one consume, refund or reset in 8 removes up
// to 24 such entries (the oldest first). A limiter that stops being called
// is swept by the timer of each client that wrote to it (#sweepAfter),
// which also deletes the old parameters once nothing is left; what a
// client that died left goes by later calls. Under an allkeys-* policy
// any key may go, which no layout can prevent: the first call refuses
// such a server (hub.js, checkEviction), and the script reads the policy
// again at most once a POLICY_RECHECK_MS (scripts.js, evictionGuard), as
// Mutex and Sema do, unless options.unsafeAllowEviction.
//
// Times are whole µs (Redis's clock has no finer grain); T, the time a
// point takes to refill, is window / limit (exact: window / (limit -
// burst)) rounded up to a whole µs, which can only make the limit
// stricter (lib/rate-limiter.js, rule).

const {
  checkClient, checkPrefix, msOption, objectOptions, unsafeAllowEvictionOption, within, redisError, invalidType,
  outOfRange, redisName, isRefusal, POLICY_RECHECK_MS
} = require('./common')
const { hubOf } = require('./hub')
const { evictionCheck } = require('./queue')
const { commands, direct, callScript } = require('./scripts')
const { intOption, keyString, checkPoints, storeOf, mostIn } = require('../rate-limiter-common')

const CALL = direct.sabsync10KeyedRate // a call (scripts.js, keyedRate), sent by callScript
const SWEEP = 'sabsync3KeyedSweep' // the idle sweep (scripts.js, keyedSweep)
const MAX_LIMIT = 1e9
const MAX_WINDOW = 0x7FFFFFFF
const MAX_TAU = 2 ** 50 // µs (~35 years): sums stay exact in Lua's doubles

class RateLimiter {
  #redis
  #prefix
  #T
  #tau
  #m
  #Ts
  #taus
  #timeout
  #allowEviction
  #p
  #keys // [parameters, sorted set]
  #ready = null // null, the promise of #prepare(), or true once it has run
  #policyAt = -Infinity // when the script last found the eviction policy safe (lib/redis/queue.js, policyAt)
  #sweepTimer = null // the idle sweep's (#sweepAfter)

  /**
   * new RateLimiter(redis, prefix, { limit, window, burst, exact, commandTimeout }):
   * limit points per window ms for each key, burst deep (default limit;
   * with exact: true at most limit in any window, burst default half).
   */
  constructor (redis, prefix, options) {
    checkClient(redis)
    checkPrefix('prefix', prefix)
    if (options === undefined || options === null || typeof options !== 'object') {
      throw invalidType('options', 'an object like { limit, window }', options)
    }
    const peer = require('../errors').peerOptionError(options); if (peer !== undefined) throw peer // eslint-disable-line
    const limit = intOption('options.limit', options.limit, 1, MAX_LIMIT)
    const window = intOption('options.window', options.window, 1, MAX_WINDOW)
    const exact = options.exact === undefined ? false : options.exact
    if (typeof exact !== 'boolean') throw invalidType('options.exact', 'a boolean', exact)
    const burst = options.burst === undefined
      ? (exact ? Math.ceil(limit / 2) : limit)
      : intOption('options.burst', options.burst, 1, exact ? limit : MAX_LIMIT)
    if (window * 1000 < limit) {
      throw outOfRange('options.limit', `at most one point a µs: <= ${window * 1000} for a window of ${window} ms`, limit)
    }
    // As lib/rate-limiter.js's rule, in µs.
    const per = exact ? limit - burst : limit
    this.#T = per > 0 ? Math.ceil(window * 1000 / per) : window * 1000 + 1
    this.#tau = burst * this.#T
    this.#m = burst + 1 // an allowed consume's reply: resetAfter µs × m + remaining
    this.#Ts = String(this.#T) // as sent (a number would be formatted on every call)
    this.#taus = String(this.#tau)
    if (this.#tau > MAX_TAU) throw outOfRange('options.burst', 'such that burst × window / limit is below 2^50 µs', burst)
    this.#timeout = msOption(objectOptions(options), 'commandTimeout', 5000, 1)
    this.#allowEviction = unsafeAllowEvictionOption(options)
    this.#redis = redis
    this.#prefix = prefix
    this.#keys = [redisName(`{${prefix}}:rlp`), redisName(`{${prefix}}:rlz`)]
    this.#p = { limit, window, burst, exact }
  }

  // What a limiter does once, before its first call reaches the server:
  // every call waits for it until it has run (calls made meanwhile share
  // one run; a failed run is tried again by the next call), so a check of
  // the server (its eviction policy, say) belongs here too.
  async #prepare () {
    await evictionCheck(hubOf(this.#redis), this.#allowEviction, this.#timeout)
    if (typeof this.#redis[SWEEP] !== 'function') this.#redis.defineCommand(SWEEP, commands[SWEEP])
  }

  get limit () { return this.#p.limit }
  get window () { return this.#p.window }
  get burst () { return this.#p.burst }
  get exact () { return this.#p.exact }
  /** The most points one key can be allowed in any interval of `ms` ms (lib/rate-limiter-common.js, mostIn). */
  mostIn (ms) { return mostIn(this.#p, ms, 1000, this.#T) }
  get prefix () { return this.#prefix }

  // Bad arguments reject, as every call of this promise API does.
  #call (op, key, points) {
    let s, n
    try {
      s = keyString(key)
      n = checkPoints(points, this.#p.burst)
    } catch (err) {
      return Promise.reject(err)
    }
    if (this.#ready !== true) {
      this.#ready ??= this.#prepare().then(() => { this.#ready = true }, err => { this.#ready = null; throw err })
      return this.#ready.then(() => this.#send(op, s, n))
    }
    return this.#send(op, s, n)
  }

  #send (op, s, n) {
    const asked = performance.now()
    const check = !this.#allowEviction && asked - this.#policyAt >= POLICY_RECHECK_MS
    // The operation in one argument (scripts.js, keyedRate): its letter,
    // upper case to read the policy first, then the points when not 1.
    const letter = check ? op.toUpperCase() : op
    const code = n === 1 ? letter : letter + n
    return callScript(this.#redis, CALL, [this.#keys[1], code, this.#Ts, this.#taus, redisName(s)], this.#timeout,
      () => `RateLimiter on ${this.#prefix} key ${JSON.stringify(s)}`, (err, r) => {
        if (err !== null) {
          if (isRefusal(err)) this.#policyAt = -Infinity
          throw err
        }
        if (check && asked > this.#policyAt) this.#policyAt = asked
        return this.#answer(op, s, r)
      })
  }

  // The reply (scripts.js, keyedRate) is checked before it is believed:
  // integers in range (a time another client's deeper bucket wrote may
  // stand up to MAX_TAU ahead: src/core/limiter.c, C1).
  #answer (op, s, r) {
    let allowed = true
    let remaining
    let retry = 0
    let reset
    if (typeof r === 'number') {
      // An allowed consume: resetAfter × (burst + 1) + remaining; 0 for a
      // refund or reset.
      if (!Number.isSafeInteger(r) || r < 0 || op === 'p' || (op !== 'c' && r !== 0)) return this.#malformed(s, r)
      remaining = r % this.#m
      reset = (r - remaining) / this.#m
    } else if (Array.isArray(r) && r.length === 2 && (op === 'c' || op === 'p')) {
      [remaining, reset] = r
    } else if (Array.isArray(r) && r.length === 3 && (op === 'c' || op === 'p')) {
      allowed = false;
      [remaining, retry, reset] = r
    } else {
      return this.#malformed(s, r)
    }
    if (!Number.isSafeInteger(remaining) || remaining < 0 || remaining > this.#p.burst ||
        !Number.isSafeInteger(retry) || retry < 0 || retry > MAX_TAU + this.#T ||
        !Number.isSafeInteger(reset) || reset < 0 || reset > MAX_TAU + this.#T) return this.#malformed(s, r)
    // A write (a reset too, which may leave Z empty: P then goes).
    if ((op === 'c' && allowed) || op === 'r' || op === 'x') this.#sweepAfter(reset / 1000)
    return {
      allowed,
      remaining,
      retryAfter: retry / 1000,
      resetAfter: reset / 1000,
      limit: this.#p.limit
    }
  }

  #malformed (s, r) {
    throw redisError(`sabsync: an unexpected reply from Redis (RateLimiter on ${this.#prefix} key ${JSON.stringify(s)}): ${JSON.stringify(r)}`)
  }

  // The idle sweep (scripts.js, keyedSweep): `ms` after a write, and then
  // when the earliest entry left reaches its time, this client takes off
  // up to BATCH entries whose time has passed, and an older version's
  // parameters once none is left: a limiter nobody calls any more keeps
  // no key, without a later call. One unref'd timer per limiter; a
  // failure waits for the next write.
  #sweepAfter (ms) {
    if (this.#sweepTimer !== null) return
    this.#sweepTimer = setTimeout(() => {
      this.#sweepTimer = null
      let reply
      try {
        reply = this.#redis[SWEEP](this.#keys[0], this.#keys[1])
      } catch {
        return
      }
      within(reply, this.#timeout, `sweep of RateLimiter ${this.#prefix}`, this.#redis).then(r => {
        if (Number.isSafeInteger(r) && r >= 0) this.#sweepAfter(r / 1000)
      }, () => {})
    }, Math.min(Math.ceil(ms) + 1, 0x7FFFFFFF))
    this.#sweepTimer.unref()
  }

  /** Take `points` (default 1) from `key`'s bucket if it holds them. */
  consume (key, points = 1) { return this.#call('c', key, points) }

  /** How `key` stands, consuming nothing (allowed: whether 1 point would be). */
  peek (key) { return this.#call('p', key, 1) }

  /** Give `points` (default 1) back to `key`. */
  async refund (key, points = 1) { await this.#call('r', key, points) }

  /** Forget `key`: its bucket is full again. */
  async reset (key) { await this.#call('x', key, 1) }

  /** 0: consume() answers at once, so nobody ever waits on a RateLimiter. */
  nrWaiting () { return Promise.resolve(0) }

  /** An express-rate-limit Store over this limiter (lib/rate-limiter-common.js). */
  store () { return storeOf(this) }
}

module.exports = { RateLimiter }
