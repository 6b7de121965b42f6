'use strict'
// What every sabsync/redis class uses: argument checks, errors, bounded
// round trips. Nothing here loads the addon or a Redis client.

const { invalidType, notCallOptions, outOfRange, SabsyncError } = require('../errors')
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

// A prefix of keys, checked the same way by every class: a non-empty
// string without braces, which would move the hash tag (a prefix that
// starts with '}' leaves an empty tag, and Redis Cluster hashes the whole
// key: CROSSSLOT at call time).
function checkPrefix (name, p) {
  if (typeof p !== 'string') throw invalidType(name, 'a non-empty string without { or }', p)
  if (p.length === 0 || /[{}]/.test(p)) throw outOfRange(name, 'a non-empty string without { or }', JSON.stringify(p))
  return p
}

// The prefix of every key (default 'sabsync').
function prefixOption (options) {
  const p = options.prefix
  return p === undefined ? 'sabsync' : checkPrefix('options.prefix', p)
}

// Names as Redis sees them. ioredis sends a string as UTF-8, where a lone
// surrogate has no form: each becomes U+FFFD, and '\uD800' and '\uDBFF'
// would name one lock. A string with a lone surrogate is sent as WTF-8
// instead (a lone surrogate as its 3-byte generalized UTF-8 form, which no
// well-formed string's UTF-8 contains), a Buffer: one name, one key, and a
// well-formed name is sent as before.
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/

function wtf8 (s) {
  const out = []
  for (let i = 0; i < s.length; i++) {
    let c = s.charCodeAt(i)
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const d = s.charCodeAt(i + 1)
      if (d >= 0xdc00 && d <= 0xdfff) {
        c = 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00)
        i++
      }
    }
    if (c < 0x80) out.push(c)
    else if (c < 0x800) out.push(0xc0 | (c >> 6), 0x80 | (c & 63))
    else if (c < 0x10000) out.push(0xe0 | (c >> 12), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63))
    else out.push(0xf0 | (c >> 18), 0x80 | ((c >> 12) & 63), 0x80 | ((c >> 6) & 63), 0x80 | (c & 63))
  }
  return Buffer.from(out)
}

// s as a command argument: itself, or its WTF-8 bytes when it holds a lone
// surrogate.
function redisName (s) {
  return LONE_SURROGATE.test(s) ? wtf8(s) : s
}

// options.unsafeAllowEviction: true skips the checks that the server does
// not evict keys in use (hub.js, checkEviction, and the scripts' own,
// scripts.js, evictionGuard): the user accepts that an eviction can grant
// a lock or token twice.
function unsafeAllowEvictionOption (options) {
  const v = options.unsafeAllowEviction
  if (v === undefined) return false
  if (typeof v !== 'boolean') throw invalidType('options.unsafeAllowEviction', 'a boolean', v)
  return v
}

// { timeout, signal } of a waiting call. timeout: ms, Infinity when left out.
// No options: no limit, no signal (one object for every such call).
const UNBOUNDED = Object.freeze({ timeout: Infinity, signal: undefined })

function waitOptions (options) {
  if (options === undefined) return UNBOUNDED
  if (options === null || typeof options !== 'object') throw notCallOptions(options)
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

// How often an object asks its script to read the eviction policy again
// (scripts.js, evictionGuard), in ms, when it has no lease whose renewal
// period would say: RateLimit and RateLimiter.
const POLICY_RECHECK_MS = 1000

// The errors of a server that may evict a key in use, or whose policy
// cannot be read; refusals() tells them from others (a holder that meets
// one has lost its lease: the server may evict it).
const refusals = new WeakSet()

function evictionError (policy, cause) {
  const err = redisError('sabsync: this Redis evicts any key under memory pressure ' +
    `(maxmemory-policy ${policy}): a held lock or token could be evicted and granted twice. Set ` +
    'maxmemory-policy to noeviction or a volatile-* policy (sabsync keys in use have no TTL), or ' +
    'use a server without maxmemory; or pass unsafeAllowEviction: true to accept the risk', cause)
  refusals.add(err)
  return err
}

function noPolicyError (why, cause) {
  const err = redisError(`sabsync: could not read maxmemory_policy (${why}), so ` +
    'sabsync cannot tell whether this server may evict a held lock (and grant it twice). Allow INFO to ' +
    'this client, or pass unsafeAllowEviction: true if the server never evicts (maxmemory 0, or policy ' +
    'noeviction or volatile-*)', cause)
  refusals.add(err)
  return err
}

const isRefusal = err => refusals.has(err)

// The error a failed command becomes: parameters that disagree with the
// object on the server are ERR_SABSYNC_SHARED_MISMATCH (as with
// openShared), a server that may evict keys in use ERR_SABSYNC_REDIS naming
// its policy, anything else ERR_SABSYNC_REDIS; the client's error is the
// cause in every case.
function commandError (err, what) {
  const msg = err && typeof err.message === 'string' ? err.message : String(err)
  if (msg.startsWith('SABSYNC_MISMATCH ')) {
    const e = new SabsyncError('ERR_SABSYNC_SHARED_MISMATCH', msg.slice('SABSYNC_MISMATCH '.length))
    Object.defineProperty(e, 'cause', { value: err, writable: true, configurable: true })
    return e
  }
  if (msg.startsWith('SABSYNC_EVICTION ')) return evictionError(msg.slice('SABSYNC_EVICTION '.length), err)
  if (msg.startsWith('SABSYNC_NOPOLICY ')) return noPolicyError('INFO memory in a script: ' + msg.slice('SABSYNC_NOPOLICY '.length), err)
  return redisError(`sabsync: Redis failed (${what}): ${msg}`, err)
}

// A command that failed because the client cannot reach its server: a
// closed client (quit(), disconnect()), a refused or lost connection, or
// ioredis giving up on a command after its retries. Said before anything
// else (a policy check that fails this way blames the connection).
const UNREACHABLE = /Connection is closed|ECONNREFUSED|ECONNRESET|ENOTFOUND|EHOSTUNREACH|ENETUNREACH|ETIMEDOUT|EPIPE|max retries per request|Stream isn't writeable|enableOfflineQueue/i
const unreachables = new WeakSet()

function unreachableError (err, what, redis) {
  const msg = err && typeof err.message === 'string' ? err.message : String(err)
  const status = redis && typeof redis.status === 'string' ? redis.status : 'unknown'
  const closed = status === 'end' || status === 'close' || /Connection is closed/i.test(msg)
  const e = redisError(`sabsync: cannot reach Redis (${what}): ` +
    (closed
      ? `the client's connection is closed (status ${status}: ${msg}). Was quit() or disconnect() called on it, or did the server go away? Pass a connected client`
      : `the client is ${status} (${msg}). Check that a server runs at the address the client was given and that this host can reach it`),
  err)
  unreachables.add(e)
  return e
}

const isUnreachable = err => unreachables.has(err)

function unreachable (err, redis) {
  const msg = err && typeof err.message === 'string' ? err.message : String(err)
  if (UNREACHABLE.test(msg) || (err && UNREACHABLE.test(String(err.code)))) return true
  return redis !== undefined && redis !== null && (redis.status === 'end' || redis.status === 'close')
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

// Deadlines of one length, `ms`, under one timer. Each entry is due `ms`
// after it was added (performance.now() then), so entries fall due in the
// order they were added, and the timer waits for the oldest alone: adding
// and deleting an entry is a few pointer writes on a list. A timer set for
// each command and cleared at its reply cost this process about 10 µs of
// CPU a command here (an uncontended lock+unlock set three), more than the
// rest of sabsync's code on that path. `ref`: whether a pending entry
// keeps the process alive, as a timer of its own would; the timer is
// unref'd whenever nothing is pending, so idle objects never hold the
// process. An entry is { due, prev, next, expire () } (prev and next: its
// neighbours while listed, else null); expire() runs once, after it was
// taken off.
class Deadlines {
  constructor (ms, ref) {
    this.ms = ms
    this.ref = ref
    this.head = null // the oldest entry
    this.tail = null // the newest
    this.timer = null
    this.refd = false // the timer keeps the process alive
  }

  add (entry, now) {
    entry.due = now + this.ms
    entry.prev = this.tail
    entry.next = null
    if (this.tail === null) this.head = entry
    else this.tail.next = entry
    this.tail = entry
    if (this.timer === null) this.arm(this.ms)
    else if (this.ref && !this.refd) {
      this.timer.ref()
      this.refd = true
    }
  }

  delete (entry) {
    if (entry.prev === null && this.head !== entry) return // not listed
    if (entry.prev === null) this.head = entry.next
    else entry.prev.next = entry.next
    if (entry.next === null) this.tail = entry.prev
    else entry.next.prev = entry.prev
    entry.prev = entry.next = null
    if (this.head === null && this.refd) {
      this.timer.unref()
      this.refd = false
    }
  }

  arm (ms) {
    this.timer = setTimeout(fire, Math.min(Math.max(ms, 1), MAX_MS), this)
    this.refd = this.ref
    if (!this.ref) this.timer.unref()
  }
}

function fire (d) {
  d.timer = null
  d.refd = false
  const now = performance.now()
  const due = []
  while (d.head !== null && d.head.due <= now) {
    const e = d.head
    d.delete(e)
    due.push(e)
  }
  // Armed for the oldest left before any expire() runs: one that adds an
  // entry finds the timer set, for an earlier time than its own.
  if (d.head !== null) d.arm(d.head.due - now)
  for (const e of due) e.expire()
}

// The reply bounds (ref'd Deadlines) by their length: an object's
// commandTimeout is one of few. Other lengths get a timer of their own.
const bounds = new Map()

function boundsOf (ms) {
  let d = bounds.get(ms)
  if (d === undefined && bounds.size < 16 && Number.isInteger(ms) && ms >= 1 && ms <= MAX_MS) {
    d = new Deadlines(ms, true)
    bounds.set(ms, d)
  }
  return d
}

// A bound of `ms` on something pending: expire() runs if stop() is not
// called within ms. Returns stop().
function bound (ms, expire) {
  const entry = { due: 0, prev: null, next: null, timer: null, expire }
  const d = bind(ms, entry, performance.now())
  return () => unbind(d, entry)
}

// bound() on an entry the caller made, { due, prev, next, timer,
// expire () }, counted from `now` (performance.now() at this call, or
// earlier in the same turn: entries fall due in the order they were
// added): a call in flight that is its own entry costs no closure and no
// object of the bound's. Returns what unbind() needs: the Deadlines the
// entry is listed in, or null when it got a timer of its own (its timer
// field).
function bind (ms, entry, now) {
  const d = boundsOf(ms)
  if (d !== undefined) {
    d.add(entry, now)
    return d
  }
  entry.timer = setTimeout(expireEntry, Math.min(Math.max(ms, 1), MAX_MS), entry)
  return null
}

function unbind (d, entry) {
  if (d !== null) {
    d.delete(entry)
  } else if (entry.timer !== null) {
    clearTimeout(entry.timer)
    entry.timer = null
  }
}

function expireEntry (entry) {
  entry.timer = null
  entry.expire()
}

// The reply of `promise` (a command), or ERR_SABSYNC_REDIS when none came
// within `ms`. A reply that comes later is dropped, never unhandled.
// `what` names the call in its errors: a string, or a function that makes
// it (so a call that succeeds builds no message).
function within (promise, ms, what, redis) {
  return new Promise((resolve, reject) => {
    const stop = bound(ms, () => reject(noReply(ms, typeof what === 'function' ? what() : what, redis)))
    promise.then(v => { stop(); resolve(v) }, err => {
      stop()
      reject(failure(err, what, redis))
    })
  })
}

// The error of a call `what` (a string, or a function that makes it)
// that failed with `err`, as its caller sees it.
function failure (err, what, redis) {
  // A refusal already said (an eviction check before the command, as a
  // LockManager's renewal makes) stays one: its holders lose their locks
  // now, not at the lease's end.
  if (isRefusal(err)) return err
  const name = typeof what === 'function' ? what() : what
  return unreachable(err, redis) && !String(err && err.message).startsWith('SABSYNC_')
    ? unreachableError(err, name, redis)
    : commandError(err, name)
}

const quiet = () => {}

module.exports = {
  MAX_MS,
  checkClient,
  checkKey,
  checkCount,
  msOption,
  objectOptions,
  checkPrefix,
  prefixOption,
  redisName,
  POLICY_RECHECK_MS,
  evictionError,
  noPolicyError,
  isUnreachable,
  isRefusal,
  unsafeAllowEvictionOption,
  waitOptions,
  redisError,
  commandError,
  within,
  failure,
  bound,
  bind,
  unbind,
  Deadlines,
  noReply,
  connected,
  quiet,
  invalidType,
  outOfRange,
  SabsyncError
}
