'use strict'
// sabsync's own errors carry a `code` starting ERR_SABSYNC_. Argument errors
// are plain TypeError/RangeError (the built-ins' types) whose message names
// the argument and what was expected.

function describe (value) {
  if (value === null) return 'null'
  switch (typeof value) {
    case 'undefined': return 'undefined'
    case 'function': return 'a function'
    case 'object': {
      const name = value.constructor && typeof value.constructor.name === 'string' ? value.constructor.name : ''
      return name ? 'an instance of ' + name : 'an object'
    }
    case 'string': return 'type string'
    case 'symbol': return 'a symbol'
    case 'bigint': return 'type bigint (' + value + 'n)'
    default: return 'type ' + typeof value + ' (' + String(value) + ')'
  }
}

function invalidType (name, expected, value) {
  const err = new TypeError(`The "${name}" argument must be ${expected}. Received ${describe(value)}`)
  err.code = 'ERR_INVALID_ARG_TYPE'
  return err
}

// The options of a promise call that is not an object. A number there is
// almost always a timeout written as the blocking form takes it
// (lock(100), acquireSync(1000)): the message says where it goes.
function notCallOptions (value, what = 'timeout') {
  if (typeof value === 'number') {
    return invalidType('options', `an object: a promise call takes its ${what} as { ${what}: ${value} }, not as a bare number`, value)
  }
  return invalidType('options', `an object such as { ${what}: 1000, signal }`, value)
}

// Options of other rate-limit libraries, given to a RateLimiter (or its
// store) in place of ours: an error that names ours, or undefined. Only
// when our own option is missing (limit is also express-rate-limit's name).
const PEER_OPTIONS = [
  ['windowMs', 'window', 'express-rate-limit', v => `window: ${v} (ms)`],
  ['max', 'limit', 'express-rate-limit', v => `limit: ${v}`],
  ['points', 'limit', 'rate-limiter-flexible', v => `limit: ${v}`],
  ['duration', 'window', 'rate-limiter-flexible', v => `window: ${typeof v === 'number' ? v * 1000 : v} (ms: its duration is in seconds)`],
  ['tokensPerInterval', 'limit', 'limiter', v => `limit: ${v}`],
  ['interval', 'window', 'limiter', v => `window: ${v} (ms)`]
]

function peerOptionError (options, name = 'options') {
  if (options === null || typeof options !== 'object') return undefined
  const found = PEER_OPTIONS.filter(([theirs, ours]) => options[theirs] !== undefined && options[ours] === undefined)
  if (found.length === 0) return undefined
  const says = found.map(([theirs, ours, lib, as]) => `${theirs} (${lib}'s) is ${ours} here: ${as(options[theirs])}`)
  const err = new TypeError(`The "${name}" argument has options of another library, which sabsync does not read: ` +
    `${says.join('; ')}. A RateLimiter takes { limit, window (ms), burst?, keys? }; pass limiter.store() to express-rate-limit as its store`)
  err.code = 'ERR_INVALID_ARG_VALUE'
  return err
}

function outOfRange (name, expected, value) {
  const err = new RangeError(`The "${name}" argument is out of range. It must be ${expected}. Received ${typeof value === 'number' ? value : describe(value)}`)
  err.code = 'ERR_OUT_OF_RANGE'
  return err
}

// The registry of sabsync's own error codes: each one, and when it is
// thrown. index.d.ts types `SabsyncError.code` as the union of these;
// test/layers.test.js checks that every code used in lib/ and src/ is here
// and that the union agrees.
const CODES = Object.freeze({
  ERR_SABSYNC_BAD_MEMORY: 'the memory does not hold a valid object of that kind now (overwritten, or never made one)',
  ERR_SABSYNC_BAD_TOKEN: 'a Sema token released that this thread does not hold',
  ERR_SABSYNC_BARRIER_BROKEN: 'a Barrier round was broken (a party died, timed out or aborted) and not reset()',
  ERR_SABSYNC_DEADLOCK: 'a blocking lock by the thread that already holds it',
  ERR_SABSYNC_NOT_OWNER: 'an unlock by a thread that does not hold the lock',
  ERR_SABSYNC_TIMEOUT: 'runExclusive() did not get the lock within its timeout',
  ERR_SABSYNC_WRONG_KIND: 'X.from() of memory that holds another kind of primitive (on a TypeError that names both kinds)',
  ERR_SABSYNC_NOT_BUILT: 'no native addon loads on this platform',
  ERR_SABSYNC_NAPI: 'a Node-API call failed inside the addon',
  ERR_SABSYNC_NOMEM: 'the addon ran out of memory',
  ERR_SABSYNC_UV: 'the addon could not set up its libuv handles',
  ERR_SABSYNC_REDIS: 'sabsync/redis: Redis failed a call, or did not answer within its timeout (the client\'s error is the cause)',
  ERR_SABSYNC_LEASE_LOST: 'sabsync/redis: a lease ran out or the server lost it (the reason of a `lost` signal)',
  ERR_SABSYNC_SHARED_MISMATCH: 'a key used with another kind or parameters; the message says what the key holds and what was asked (openShared: or a space opened with another size, and { versioned: true } for deploys that change parameters; sabsync/redis: a Sema of another nr, a RateLimit of another rps)',
  ERR_SABSYNC_SHARED_FULL: 'openShared: no room left in the space (heap, directory, thread slots or waiter records)',
  ERR_SABSYNC_SHARED_VERSION: 'openShared: the file (named in the message) is not a space of this layout version, or not of the size its header records (resized, or its header overwritten); a space is never initialised again',
  ERR_SABSYNC_SHARED_FOREIGN: 'openShared: the file at the name belongs to another user, has a mode wider than asked, or is not a regular file (a squatted name)',
  ERR_SABSYNC_SHARED_CLOSED: 'a shared space, or an object from it, used after close() in this thread (open the space again and get the object by its key); also the rejection of an async wait still pending when its space was closed',
  ERR_SABSYNC_SHARED_BUSY: 'a call with no timeout found a bookkeeping lock of the space held past its bound (250 ms) by a process that lives: stopped, in a debugger, or a co-tenant writing the space (timed calls answer their timeout instead)',
  ERR_SABSYNC_SHARED_NAME: 'openShared: a name the addon refused (JS checks names first)',
  ERR_SABSYNC_SHARED_KEY: 'a shared space key the addon refused (JS checks keys first)',
  ERR_SABSYNC_SHARED_SYSTEM: 'openShared: a system call failed (permissions, /dev/shm); the message says which',
  ERR_SABSYNC_UNSUPPORTED: 'openShared on a platform where processes cannot share the space',
  ERR_SABSYNC_LOCKS_FULL: 'locks.request: the most lock requests a tier holds at once (held or waiting) are in use; the request\'s promise rejects with it'
})

class SabsyncError extends Error {
  constructor (code, message) {
    super(message)
    if (!Object.hasOwn(CODES, code)) throw new TypeError(`sabsync: unregistered error code ${code} (lib/errors.js)`)
    this.code = code
  }

  get name () { return 'SabsyncError' }
}

module.exports = { describe, invalidType, notCallOptions, peerOptionError, outOfRange, SabsyncError, CODES }
