'use strict'
// What the RateLimiter of every tier shares (lib/rate-limiter.js in memory,
// lib/redis/rate-limiter.js on Redis): argument checks and the
// express-rate-limit Store. Nothing here loads the addon.

const { invalidType, outOfRange } = require('./errors')

function intOption (name, v, min, max) {
  if (typeof v !== 'number') throw invalidType(name, 'an integer', v)
  if (!Number.isInteger(v) || v < min || v > max) throw outOfRange(name, `an integer >= ${min} and <= ${max}`, v)
  return v
}

// Keys are strings; a number is the key of its decimal string (1 and '1'
// are one client), as in express-rate-limit and rate-limiter-flexible.
function keyString (key) {
  if (typeof key === 'string') return key
  if (typeof key === 'number') {
    if (!Number.isFinite(key)) throw outOfRange('key', 'a string or a finite number', key)
    return String(key)
  }
  throw invalidType('key', 'a string or a finite number', key)
}

function checkPoints (points, burst) {
  if (points === 1) return 1
  if (typeof points !== 'number') throw invalidType('points', 'a positive integer', points)
  if (!Number.isInteger(points) || points < 1 || points > burst) {
    throw outOfRange('points', `an integer >= 1 and <= burst (${burst})`, points)
  }
  return points
}

// f(x) now, or once x resolves: the in-memory tiers answer synchronously,
// Redis with promises, and the store answers as its limiter does.
const then = (x, f) => (x instanceof Promise ? x.then(f) : f(x))

// The Store interface of express-rate-limit (v7, v8), whose `limit` and
// `windowMs` become its RateLimit-Policy header (q and w): a policy "q per
// w" says at most q in any w. init() checks that the limit it is given is
// at least limiter.mostIn(windowMs), the most the limiter allows in any
// windowMs, so the header describes what is enforced (by default burst +
// limit a window; limit with { exact: true }), and refuses one that is
// smaller with a RangeError naming the limit to pass. The limiter decides:
// a refused hit counts as limit + 1 hits (express-rate-limit answers 429),
// an allowed one as limit - remaining (its RateLimit header's r is the
// points left now). resetTime is when the client may try again (refused)
// or when its bucket is full (allowed). decrement refunds a point
// (skipSuccessfulRequests, skipFailedRequests).
function storeOf (limiter) {
  const until = ms => new Date(Date.now() + ms)
  let limit = limiter.mostIn(limiter.window)
  const hits = r => Math.max(0, limit - r.remaining)
  return {
    localKeys: false,
    prefix: undefined,
    init (options) {
      if (options === null || typeof options !== 'object') return
      const { limit: asked, windowMs } = options
      if (typeof asked !== 'number' || typeof windowMs !== 'number') return // a function: the caller's to get right
      const most = limiter.mostIn(windowMs)
      if (asked < most) {
        throw outOfRange('rateLimit({ limit })',
          `at least ${most}, the most this limiter allows in any ${windowMs} ms (limiter.mostIn(${windowMs})): ` +
          `its RateLimit-Policy header says q=${asked};w=${windowMs / 1000}` +
          (limiter.exact ? '' : `; or make the limiter with { exact: true } for at most ${limiter.limit} in any ${limiter.window} ms`),
          asked)
      }
      limit = asked
    },
    get (key) {
      return then(limiter.peek(key), r => ({ totalHits: hits(r), resetTime: until(r.resetAfter) }))
    },
    increment (key) {
      return then(limiter.consume(key), r => ({
        totalHits: r.allowed ? hits(r) : limit + 1,
        resetTime: until(r.allowed ? r.resetAfter : r.retryAfter)
      }))
    },
    decrement (key) { return limiter.refund(key) },
    resetKey (key) { return limiter.reset(key) }
  }
}

// The most points of `p`'s bucket in any interval of `ms` ms: burst +
// floor(ms / T) (T in units of `perMs` a ms). GCRA's bound: each grant in
// an interval [a, a + t] raises the tat by T from at least a, and the last
// one leaves it at most tau = burst × T past its time.
function mostIn (p, ms, perMs, T) {
  if (typeof ms !== 'number' || !(ms >= 0) || ms === Infinity) throw outOfRange('ms', 'a finite number >= 0', ms)
  return p.burst + Math.floor(ms * perMs / T)
}

module.exports = { intOption, keyString, checkPoints, storeOf, mostIn }
