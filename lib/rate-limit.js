'use strict'
// RateLimit: at most `rps` grants in any window of `timeUnit` ms, across
// every thread attached to it. The times of the last rps grants live in
// shared memory and change only under a native lock (src/core/rate.c): a
// caller either is granted (its time recorded) or learns how long to wait
// before it asks again. No grant is ever handed back, so a thread that ends
// at any point leaks no capacity.
//
// Callers are served in arrival order across threads: a caller first takes
// the limiter's turn, a Sema of one token that follows the grant ring in
// the same memory, and only the turn's holder asks for grants (and sleeps
// until one is due). A free turn and a free grant cost one tryAcquire, one
// rateTake and one release; otherwise the caller queues FIFO on the turn.
// The turn of a thread that dies comes back as any Sema token does, and an
// abort or timeout gives it up at once.

const native = require('./native')
const { Sema, FAIRNESS } = require('./sema')
const { backendOf, memoryOf, isMemory, parseTimeout, parseAsyncOptions, SabsyncError, invalidType, outOfRange } = require('./shared')
const { attachTo, sizeAgrees } = require('./kind')
const { ACQUIRE, waitAsync, partOf } = require('./inside')

const { RATE_MAX: MAX, RATE_MAGIC: MAGIC, RATE_W_RPS: W_RPS, RATE_HEADER_BYTES: HEADER_BYTES, OK } = native.constants
// A grant's time, or the ms to wait, after a grant() (src/napi/results.h).
const OUT = native.out

// The bytes of a limiter: its grant ring, then its turn (a Sema of 1).
const bytesFor = rps => native.rateBytes(rps) + Sema.byteLengthFor(1)

function checkRps (rps) {
  if (typeof rps !== 'number') throw invalidType('rps', 'a positive integer', rps)
  if (!Number.isInteger(rps) || rps < 1 || rps > MAX) {
    throw outOfRange('rps', `an integer >= 1 and <= ${MAX}`, rps)
  }
}

function parseOptions (options) {
  if (options === undefined || options === null) return { timeUnit: 1000, uniformDistribution: false }
  if (typeof options !== 'object') throw invalidType('options', 'an object', options)
  const { timeUnit = 1000, uniformDistribution = false } = options
  if (typeof timeUnit !== 'number') throw invalidType('options.timeUnit', 'a positive number of milliseconds', timeUnit)
  if (!(timeUnit > 0 && timeUnit < 1e12)) {
    throw outOfRange('options.timeUnit', 'a number of milliseconds > 0 and < 1e12', timeUnit)
  }
  if (typeof uniformDistribution !== 'boolean') {
    throw invalidType('options.uniformDistribution', 'a boolean', uniformDistribution)
  }
  return { timeUnit, uniformDistribution }
}

// Blocking sleep for .sync(): Atomics.wait on a cell nobody notifies.
const sleeper = new Int32Array(new SharedArrayBuffer(4))

function limiterOver (mem, turn) {
  const i32 = mem.i32
  // grant(false), by the turn's holder: OK with the grant's time in
  // OUT[0], or TIMED_OUT with the ms to wait in OUT[0]. In-process, the
  // turn's holder takes grants under the lot's lock of the ring, and a
  // caller without the turn never does. In a shared space, grants are
  // ordered by the turn's lock in every process, and a caller that finds
  // the turn free with nobody queued for it is granted without taking the
  // turn (grantIfTurnFree: PENDING when it is not):
  // it is first in line, and a turn taken and given back across processes
  // costs hand-offs to processes that may not be running (a convoy when
  // there are more processes than CPUs). In-process there is no such
  // function, so the hot path makes no call that could only say "no".
  // Both come from the backend of the memory (lib/backend.js).
  const { grant, grantIfTurnFree } = backendOf(mem.buffer).rate(i32, turn.byteOffset)

  /**
   * Resolves when a call may proceed, with the grant's time (ms on the
   * monotonic clock of process.hrtime); undefined when no grant comes
   * within options.timeout ms. options.signal: an abort rejects with
   * signal.reason (nothing was recorded for that caller).
   */
  async function take (options) {
    const { timeout, signal } = parseAsyncOptions(options)
    if (signal !== undefined && signal.aborted) throw signal.reason
    if (timeout === 0) return tryNow()
    const end = timeout === Infinity ? Infinity : native.now() + timeout
    if (grantIfTurnFree !== undefined) {
      if (grantIfTurnFree(true) === OK) return OUT[0]
    }
    // undefined while others wait: no barging
    const token = turn.tryAcquire()
    if (token !== undefined) {
      // The turn, and a grant due now: no wait.
      let granted
      try {
        granted = grant(false) === OK
      } catch (err) {
        turn.release(token)
        throw err
      }
      if (granted) {
        const at = OUT[0]
        turn.release(token)
        return at
      }
    }
    // It waits: for the turn, or for its grant (traced, lib/inside.js).
    return waitAsync(ACQUIRE, limit, 'RateLimit', wait, token, end, timeout, signal)
  }

  async function wait (token, end, timeout, signal) {
    if (token === undefined) {
      const opts = {}
      if (signal !== undefined) opts.signal = signal
      if (timeout !== Infinity) opts.timeout = timeout
      token = await turn.acquire(opts)
      if (token === undefined) return undefined
    }
    // Every path out, a throw from rateTake included (memory that is not a
    // RateLimit now: ERR_SABSYNC_BAD_MEMORY), gives the turn back: a turn
    // kept by a live thread is never reclaimed, and every caller on every
    // thread would wait for it forever.
    try {
      for (;;) {
        if (signal !== undefined && signal.aborted) throw signal.reason
        if (grant(false) === OK) return OUT[0]
        const wait = OUT[0]
        // The turn is ours: nobody else is granted before us, so a grant
        // due after the deadline is not coming within it (in a space, one
        // granted meanwhile without the turn only moves it later).
        if (wait > end - native.now()) return undefined
        await sleep(wait, signal)
      }
    } finally {
      turn.release(token)
    }
  }

  /**
   * A grant now if the limit has room and nobody waits for it, else
   * undefined: what limit({ timeout: 0 }) resolves with, synchronously.
   */
  function tryNow () {
    if (grantIfTurnFree !== undefined) return grantIfTurnFree(true) === OK ? OUT[0] : undefined
    const token = turn.tryAcquire()
    if (token === undefined) return undefined
    try {
      return grant(false) === OK ? OUT[0] : undefined
    } finally {
      turn.release(token)
    }
  }

  /** Blocks this thread until a call may proceed (for workers). */
  function sync (timeout) {
    const ms = parseTimeout(timeout)
    const end = ms === Infinity ? Infinity : native.now() + ms
    if (grantIfTurnFree !== undefined) {
      if (grantIfTurnFree(true) === OK) return OUT[0]
    }
    const token = turn.acquireSync(ms)
    if (token === undefined) return undefined
    try {
      for (;;) {
        if (grant(false) === OK) return OUT[0]
        const wait = OUT[0]
        const left = end - native.now()
        if (left <= 0) return undefined
        Atomics.wait(sleeper, 0, 0, Math.min(wait, left))
      }
    } finally {
      turn.release(token)
    }
  }

  /** How many callers wait for their turn, on every thread. */
  function nrWaiting () {
    return turn.nrWaiting()
  }

  // A function cannot be posted to a worker: postMessage(limit) throws a
  // DataCloneError that quotes the function's source. So the limiter is
  // this short function, whose source says what to post instead.
  // (V8 shortens a long source in that message: the advice comes first.)
  const limit = function limit (options) { /* cannot be posted: post limit.handle, then RateLimit.from(it) */
    return take(options)
  }
  // Its turn's waits are its own (traced by take, lib/inside.js).
  partOf(turn, limit, 'RateLimit', true)
  Object.defineProperty(limit, 'sync', { value: sync, writable: true, configurable: true })
  Object.defineProperty(limit, 'try', { value: tryNow, writable: true, configurable: true })
  Object.defineProperty(limit, 'nrWaiting', { value: nrWaiting, writable: true, configurable: true })
  // Own enumerable, as on every primitive: { buffer, byteOffset } is the
  // handle another thread passes to RateLimit.from().
  Object.defineProperty(limit, 'buffer', { value: mem.buffer, enumerable: true })
  Object.defineProperty(limit, 'byteOffset', { value: mem.byteOffset, enumerable: true })
  Object.defineProperty(limit, 'byteLength', { value: mem.i32.byteLength, enumerable: true })
  // What to post: RateLimit.from(limit.handle) attaches in the worker.
  Object.defineProperty(limit, 'handle', {
    value: Object.freeze({ buffer: mem.buffer, byteOffset: mem.byteOffset, byteLength: mem.i32.byteLength })
  })
  native.rateOpen(i32)
  const rps = OUT[0]
  const timeUnit = OUT[1]
  const uniformDistribution = OUT[2] === 1
  Object.defineProperty(limit, 'rps', { value: rps })
  Object.defineProperty(limit, 'timeUnit', { value: timeUnit })
  Object.defineProperty(limit, 'uniformDistribution', { value: uniformDistribution })
  return limit
}

// The turn's holder sleeps until its grant is due. setTimeout counts whole
// milliseconds from the loop's cached time, so it fires up to a millisecond
// early or late: a timer rounded up would make every grant late (a uniform
// 4 ms spacing lost about 15% of its grants that way), one rounded down can
// fire early. So the timer is set for the whole milliseconds, and what is
// left (under 1 ms, rateTake says how much) is waited out by turns of the
// event loop (setImmediate), which let I/O and other callbacks run. The
// loop around this also covers waits beyond setTimeout's limit of 2^31-1 ms
// (a longer delay fires after 1 ms, with a warning: found by the API fuzz,
// test/fuzz-primitives.test.js).
function sleep (ms, signal) {
  return new Promise((resolve, reject) => {
    const whole = Math.min(0x7FFFFFFF, Math.floor(ms))
    const timer = whole >= 1 ? setTimeout(done, whole) : setImmediate(done)
    function done () {
      if (signal !== undefined) signal.removeEventListener('abort', aborted)
      resolve()
    }
    function aborted () {
      if (whole >= 1) clearTimeout(timer)
      else clearImmediate(timer)
      reject(signal.reason)
    }
    if (signal !== undefined) signal.addEventListener('abort', aborted, { once: true })
  })
}

/**
 * A rate limiter shared by every thread that attaches to it: `await limit()`
 * resolves when a call may proceed, at most `rps` per `timeUnit` ms.
 */
function RateLimit (rps, options) {
  checkRps(rps)
  const { timeUnit, uniformDistribution } = parseOptions(options)
  const mem = memoryOf('RateLimit', bytesFor(rps), options)
  native.rateInit(mem.i32, rps, timeUnit, uniformDistribution)
  const turn = new Sema(1, { buffer: mem.buffer, byteOffset: mem.byteOffset + native.rateBytes(rps), [FAIRNESS]: 0 })
  return limiterOver(mem, turn)
}

// Bytes that hold a RateLimit of up to 64 per time unit (API.md: every
// primitive has a static byteLength); byteLengthFor(rps) for the exact size.
Object.defineProperty(RateLimit, 'byteLength', { value: bytesFor(64), enumerable: true })

/** Bytes a RateLimit of `rps` needs in shared memory (8-byte aligned). */
RateLimit.byteLengthFor = function byteLengthFor (rps) {
  checkRps(rps)
  return bytesFor(rps)
}

/** Attach to a RateLimit made in another thread (or its { buffer, byteOffset }). */
RateLimit.from = function from (handle) {
  // A limiter is a function (with its buffer and byteOffset): from(limit)
  // attaches to it, as API.md and index.d.ts say (it threw a TypeError:
  // found by the API fuzz, test/fuzz-primitives.test.js).
  if (typeof handle === 'function' && isMemory(handle.buffer)) handle = { buffer: handle.buffer, byteOffset: handle.byteOffset, byteLength: handle.byteLength }
  // Its first word is SAB_RATE_MAGIC, its kind tag: memory of another kind,
  // or none, is refused here, before any native call.
  const { buffer, byteOffset, byteLength } = attachTo('RateLimit', handle)
  const head = memoryOf('RateLimit', HEADER_BYTES, { buffer, byteOffset }, 'handle')
  const rps = Atomics.load(head.i32, W_RPS)
  if (Atomics.load(head.i32, 0) !== MAGIC || !(rps >= 1 && rps <= MAX)) {
    throw new SabsyncError('ERR_SABSYNC_BAD_MEMORY', `sabsync: no RateLimit at byteOffset ${head.byteOffset} of this buffer`)
  }
  sizeAgrees('RateLimit', head.byteOffset, byteLength, bytesFor(rps), `a RateLimit of ${rps} a time unit`)
  const mem = memoryOf('RateLimit', bytesFor(rps), { buffer, byteOffset }, 'handle')
  // The turn is a Sema(1) whatever its memory says (its size is held to it).
  const turn = Sema.from({ buffer: mem.buffer, byteOffset: mem.byteOffset + native.rateBytes(rps), byteLength: Sema.byteLengthFor(1) }, { [FAIRNESS]: 0 })
  return limiterOver(mem, turn)
}

module.exports = { RateLimit }
