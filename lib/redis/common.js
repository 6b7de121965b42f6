'use strict'
// What every sabsync/redis class uses: argument checks, errors, bounded
// round trips. Nothing here loads the addon or a Redis client.

const { invalidType, outOfRange, SabsyncError } = require('../errors')
const { isAbortSignal, ownSignal } = require('../signal')

const MAX_MS = 0x7FFFFFFF // setTimeout's limit

function checkClient (redis) {
  if (redis === null || typeof redis !== 'object' || typeof redis.defineCommand !== 'function' ||
      typeof redis.duplicate !== 'function') {
    throw invalidType('redis', 'an ioredis client (new Redis(...) or new Redis.Cluster(...))', redis)
  }
}

function checkKey (key) {
  if (typeof key !== 'string') throw invalidType('key', 'a non-empty string', key)
  if (key.length === 0) throw outOfRange('key', 'a non-empty string', key)
}

function checkCount (name, n) {
  if (typeof n !== 'number') throw invalidType(name, 'a positive integer', n)
  if (!Number.isInteger(n) || n < 1 || n > MAX_MS) throw outOfRange(name, `an integer >= 1 and <= ${MAX_MS}`, n)
}

// A whole number of milliseconds in [min, MAX_MS], or the default.
function msOption (options, name, fallback, min) {
  const v = options[name]
  if (v === undefined) return fallback
  if (typeof v !== 'number') throw invalidType('options.' + name, 'a number of milliseconds', v)
  if (!Number.isInteger(v) || v < min || v > MAX_MS) {
    throw outOfRange('options.' + name, `an integer >= ${min} and <= ${MAX_MS} (milliseconds)`, v)
  }
  return v
}

function objectOptions (options) {
  if (options === undefined || options === null) return {}
  if (typeof options !== 'object') throw invalidType('options', 'an object', options)
  return options
}

// The prefix of every key (default 'sabsync'); braces would move the hash tag.
function prefixOption (options) {
  const p = options.prefix
  if (p === undefined) return 'sabsync'
  if (typeof p !== 'string') throw invalidType('options.prefix', 'a string', p)
  if (p.length === 0 || /[{}]/.test(p)) throw outOfRange('options.prefix', 'a non-empty string without { or }', p)
  return p
}

// options.unsafeAllowEviction: true skips the check that the server does
// not evict keys in use (hub.js, checkEviction): the user accepts that an
// eviction can grant a lock or token twice.
function unsafeAllowEvictionOption (options) {
  const v = options.unsafeAllowEviction
  if (v === undefined) return false
  if (typeof v !== 'boolean') throw invalidType('options.unsafeAllowEviction', 'a boolean', v)
  return v
}

// { timeout, signal } of a waiting call. timeout: ms, Infinity when left out.
function waitOptions (options) {
  if (options === undefined) return { timeout: Infinity, signal: undefined }
  if (options === null || typeof options !== 'object') throw invalidType('options', 'an object', options)
  const { timeout, signal } = options
  let t = Infinity
  if (timeout !== undefined) {
    if (typeof timeout !== 'number' || Number.isNaN(timeout)) {
      throw invalidType('options.timeout', 'a number of milliseconds (or Infinity)', timeout)
    }
    // Beyond setTimeout's reach (~24.8 days) is no limit at all.
    t = timeout >= MAX_MS ? Infinity : timeout > 0 ? timeout : 0
  }
  if (signal !== undefined && !isAbortSignal(signal)) throw invalidType('options.signal', 'an AbortSignal', signal)
  return { timeout: t, signal: signal === undefined ? undefined : ownSignal(signal) }
}

function redisError (message, cause) {
  const err = new SabsyncError('ERR_SABSYNC_REDIS', message)
  if (cause !== undefined) Object.defineProperty(err, 'cause', { value: cause, writable: true, configurable: true })
  return err
}

// The error a failed command becomes: parameters that disagree with the
// object on the server are ERR_SABSYNC_SHARED_MISMATCH (as with
// openShared), anything else ERR_SABSYNC_REDIS; the client's error is the
// cause either way.
function commandError (err, what) {
  const msg = err && typeof err.message === 'string' ? err.message : String(err)
  if (msg.startsWith('SABSYNC_MISMATCH ')) {
    const e = new SabsyncError('ERR_SABSYNC_SHARED_MISMATCH', msg.slice('SABSYNC_MISMATCH '.length))
    Object.defineProperty(e, 'cause', { value: err, writable: true, configurable: true })
    return e
  }
  return redisError(`sabsync: Redis failed (${what}): ${msg}`, err)
}

function noReply (ms, what, redis) {
  const status = redis && typeof redis.status === 'string' ? `; the client is ${redis.status}` : ''
  const cause = new Error(`no reply within ${Math.round(ms)} ms${status}`)
  cause.noReply = true
  return redisError(`sabsync: no reply from Redis within ${Math.round(ms)} ms (${what})${status}`, cause)
}

// Whether the client is connected: a reply that is late from a connected
// client means a slow or paused server, or a timeout shorter than a round
// trip, and a caller's timeout then answers as a timeout; from a client
// that is not, it means Redis cannot be reached, an error.
function connected (redis) {
  return redis.status === 'ready'
}

// The reply of `promise` (a command), or ERR_SABSYNC_REDIS when none came
// within `ms`. A reply that comes later is dropped, never unhandled.
// `what` names the call in its errors: a string, or a function that makes
// it (so a call that succeeds builds no message).
function within (promise, ms, what, redis) {
  const name = () => typeof what === 'function' ? what() : what
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(noReply(ms, name(), redis)), Math.min(Math.max(ms, 1), MAX_MS))
    promise.then(v => { clearTimeout(timer); resolve(v) }, err => { clearTimeout(timer); reject(commandError(err, name())) })
  })
}

const quiet = () => {}

module.exports = {
  MAX_MS,
  checkClient,
  checkKey,
  checkCount,
  msOption,
  objectOptions,
  prefixOption,
  unsafeAllowEvictionOption,
  waitOptions,
  redisError,
  commandError,
  within,
  noReply,
  connected,
  quiet,
  invalidType,
  outOfRange,
  SabsyncError
}
