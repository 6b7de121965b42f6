'use strict'
// RateLimiter on Redis: a token bucket per client key, shared by every
// client of the server, with the API of the in-process RateLimiter
// (lib/rate-limiter.js) in promise form.
//
// One key per client key, `<prefix>:<key>`, holding its GCRA time (tat) on
// the server's clock (TIME, µs), and one script call (one round trip) per
// consume, peek, refund or reset (lib/redis/scripts.js, keyedRate). The key
// expires when its bucket is full again: an absent key and a key with
// tat <= now answer alike, so expiry changes no answer and nothing grows.
// Only eviction before that moment (maxmemory with a volatile-* or
// allkeys-* policy) can lose a bucket early, which lets that client start
// full again; run the limiter's server with noeviction.
//
// Times are whole µs (Redis's clock has no finer grain); T, the time a
// point takes to refill, is window / limit rounded up to a whole µs, which
// can only make the limit stricter.

const {
  checkClient, msOption, objectOptions, within, redisError, invalidType, outOfRange
} = require('./common')
const { commands } = require('./scripts')
const { intOption, keyString, checkPoints, storeOf } = require('../rate-limiter-common')

const NAME = 'sabsync1KeyedRate'
const MAX_LIMIT = 1e9
const MAX_WINDOW = 0x7FFFFFFF
const MAX_TAU = 2 ** 50 // µs (~35 years): sums stay exact in Lua's doubles

class RateLimiter {
  #redis
  #prefix
  #T
  #tau
  #timeout
  #p
  #tail

  /**
   * new RateLimiter(redis, prefix, { limit, window, burst, commandTimeout }):
   * limit points per window ms for each key, burst deep (default limit).
   */
  constructor (redis, prefix, options) {
    checkClient(redis)
    if (typeof prefix !== 'string') throw invalidType('prefix', 'a non-empty string', prefix)
    if (prefix.length === 0) throw outOfRange('prefix', 'a non-empty string', prefix)
    if (options === undefined || options === null || typeof options !== 'object') {
      throw invalidType('options', 'an object like { limit, window }', options)
    }
    const limit = intOption('options.limit', options.limit, 1, MAX_LIMIT)
    const window = intOption('options.window', options.window, 1, MAX_WINDOW)
    const burst = options.burst === undefined ? limit : intOption('options.burst', options.burst, 1, MAX_LIMIT)
    if (window * 1000 < limit) {
      throw outOfRange('options.limit', `at most one point a µs: <= ${window * 1000} for a window of ${window} ms`, limit)
    }
    this.#T = Math.ceil(window * 1000 / limit)
    this.#tau = burst * this.#T
    if (this.#tau > MAX_TAU) throw outOfRange('options.burst', 'such that burst × window / limit is below 2^50 µs', burst)
    this.#timeout = msOption(objectOptions(options), 'commandTimeout', 5000, 1)
    this.#tail = `:${this.#T}:${this.#tau}`
    this.#redis = redis
    this.#prefix = prefix
    this.#p = { limit, window, burst }
    if (typeof redis[NAME] !== 'function') redis.defineCommand(NAME, commands[NAME])
  }

  get limit () { return this.#p.limit }
  get window () { return this.#p.window }
  get burst () { return this.#p.burst }
  get prefix () { return this.#prefix }

  async #call (op, key, points) {
    const k = this.#prefix + ':' + keyString(key)
    const n = checkPoints(points, this.#p.burst)
    let reply
    try {
      reply = this.#redis[NAME](k, op, this.#T, this.#tau, n, this.#tail)
    } catch (err) {
      reply = Promise.reject(err)
    }
    const r = await within(reply, this.#timeout, `RateLimiter on ${k}`, this.#redis)
    // The reply is checked before it is believed: four integers in range.
    const ok = Array.isArray(r) && r.length === 4 && (r[0] === 0 || r[0] === 1) &&
      r.every(x => Number.isSafeInteger(x) && x >= 0) && r[1] <= this.#p.burst &&
      r[2] <= this.#tau && r[3] <= this.#tau + this.#T
    if (!ok) throw redisError(`sabsync: an unexpected reply from Redis (RateLimiter on ${k}): ${JSON.stringify(r)}`)
    return {
      allowed: r[0] === 1,
      remaining: r[1],
      retryAfter: r[2] / 1000,
      resetAfter: r[3] / 1000,
      limit: this.#p.limit
    }
  }

  /** Take `points` (default 1) from `key`'s bucket if it holds them. */
  consume (key, points = 1) { return this.#call('c', key, points) }

  /** How `key` stands, consuming nothing (allowed: whether 1 point would be). */
  peek (key) { return this.#call('p', key, 1) }

  /** Give `points` (default 1) back to `key`. */
  async refund (key, points = 1) { await this.#call('r', key, points) }

  /** Forget `key`: its bucket is full again. */
  async reset (key) { await this.#call('x', key, 1) }

  /** An express-rate-limit Store over this limiter (lib/rate-limiter-common.js). */
  store () { return storeOf(this) }
}

module.exports = { RateLimiter }
