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

// The Store interface of express-rate-limit (v7, v8). A hit the bucket
// refuses counts as burst + 1 hits, so express-rate-limit (given
// limit: limiter.burst) answers 429; an allowed one as the points in use
// (burst - remaining). resetTime is when the client may try again
// (refused) or when its bucket is full (allowed). decrement refunds a
// point (skipSuccessfulRequests, skipFailedRequests).
function storeOf (limiter) {
  const until = ms => new Date(Date.now() + ms)
  return {
    localKeys: false,
    prefix: undefined,
    init () {},
    get (key) {
      return then(limiter.peek(key), r => ({ totalHits: limiter.burst - r.remaining, resetTime: until(r.resetAfter) }))
    },
    increment (key) {
      return then(limiter.consume(key), r => ({
        totalHits: r.allowed ? limiter.burst - r.remaining : limiter.burst + 1,
        resetTime: until(r.allowed ? r.resetAfter : r.retryAfter)
      }))
    },
    decrement (key) { return limiter.refund(key) },
    resetKey (key) { return limiter.reset(key) }
  }
}

module.exports = { intOption, keyString, checkPoints, storeOf }
