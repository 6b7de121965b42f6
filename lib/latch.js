'use strict'
// Latch: a single-use countdown (C++ std::latch). Waiters are released when
// the count reaches 0, and it stays 0.
//
// Memory, two Int32 cells (8 bytes): [0] TAG 'LAT1', the kind tag
// (lib/kind.js), read only by from(); [1] COUNT. countDown is a CAS loop so that a count below 0 is refused rather than stored. A latch has
// no owners: a thread that dies before counting down leaves it short, and
// waiters wait (use a timeout).

const { backendOf, memoryOf, madeAs, parseTimeout, parseAsyncOptions, outOfRange } = require('./shared')
const { PARK, Wait, settleSync, settleAsync } = require('./waiting')
const { attachTo, writeTag } = require('./kind')
const { WAIT, waitSync, waitAsync } = require('./inside')

const COUNT = 1
const BYTES = 8
const MAX = 0x7FFFFFFF
const ATTACH = Symbol('attach')

function countArg (name, n, min) {
  if (typeof n !== 'number' || !Number.isInteger(n) || n < min || n > MAX) {
    throw outOfRange(name, `an integer >= ${min} and <= ${MAX}`, n)
  }
  return n
}

function attemptLatch (w) {
  const c = Atomics.load(w.i32, COUNT)
  if (c === 0) return true
  const wait = w.remaining()
  if (wait === 0) return false
  w.value = c
  w.wait = wait
  return PARK
}

function newWait (i32, timeout, be) {
  const w = new Wait(i32, timeout, be)
  w.cell = COUNT
  w.watch = 0
  return w
}

class Latch {
  #i32
  #be // the backend of its memory (lib/backend.js)
  #wake

  static get byteLength () { return BYTES }

  static from (handle) {
    return new Latch(undefined, attachTo('Latch', handle), ATTACH)
  }

  constructor (count, options, attach) {
    if (attach !== ATTACH) countArg('count', count, 0)
    const { buffer, byteOffset, i32 } = memoryOf('Latch', BYTES, options, attach === ATTACH ? 'handle' : 'options')
    if (attach !== ATTACH) {
      Atomics.store(i32, COUNT, count)
      writeTag(i32, 'Latch')
    }
    this.buffer = buffer
    this.byteOffset = byteOffset
    this.#i32 = i32
    this.#be = backendOf(buffer)
    this.#wake = this.#be.waker(i32, COUNT)
    madeAs(this, 'Latch')
  }

  get count () { return Atomics.load(this.#i32, COUNT) }

  // Decrements by n; the decrement that reaches 0 releases every waiter.
  countDown (n = 1) {
    countArg('n', n, 0)
    const i32 = this.#i32
    let c = Atomics.load(i32, COUNT)
    for (let seen; ; c = seen) {
      if (n > c) throw outOfRange('n', `<= the latch's remaining count (${c})`, n)
      if ((seen = Atomics.compareExchange(i32, COUNT, c, c - n)) === c) break
    }
    // Waiters stay parked through decrements that leave the count above 0
    // (they parked on a value, and only a notify wakes them); the one that
    // reaches 0 wakes them all.
    if (c - n === 0 && n > 0) this.#wake(Infinity)
  }

  tryWait () { return Atomics.load(this.#i32, COUNT) === 0 }

  // Blocks until the count is 0: true, or false when `timeout` ms passed.
  wait (timeout) {
    const t = timeout === undefined ? Infinity : parseTimeout(timeout)
    if (Atomics.load(this.#i32, COUNT) === 0) return true
    return waitSync(WAIT, this, 'Latch', settleSync, newWait(this.#i32, t, this.#be), attemptLatch)
  }

  waitAsync (options) {
    const { timeout, signal, ref } = parseAsyncOptions(options)
    if (Atomics.load(this.#i32, COUNT) === 0) return Promise.resolve(true)
    const w = newWait(this.#i32, timeout, this.#be)
    w.signal = signal
    w.ref = ref
    return waitAsync(WAIT, this, 'Latch', settleAsync, w, attemptLatch)
  }

  // countDown(n) then wait(timeout).
  arriveAndWait (n = 1, timeout) {
    this.countDown(n)
    return this.wait(timeout)
  }

  /** How many wait() and waitAsync() calls are queued on it, in every thread. */
  nrWaiting () { return this.#be.waitersOf(this.#i32, COUNT) }
}

module.exports = { Latch }
