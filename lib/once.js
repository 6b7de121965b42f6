'use strict'
// Once: fn runs exactly once across every thread (C++ std::call_once).
//
// Memory, two Int32 cells (8 bytes):
//
//   [0] TAG    'ONC1', the kind tag (lib/kind.js), read only by from()
//   [1] STATE  0               not run yet
//              id (bits 0-29)  running in thread `id`
//              DONE (bit 31)   has run to completion
//
// A caller that finds it running waits; when the runner's fn throws the
// cell goes back to 0 and the waiters are woken, one of them runs fn. When
// the runner's thread dies, a waiter (or a later caller) finds its id dead
// and runs fn itself. Waiters watch every owner (WATCH_ANY), so that the
// death wakes them.

const { backendOf, memoryOf, madeAs, parseTimeout, parseAsyncOptions, SabsyncError, invalidType } = require('./shared')
const { PARK, Wait, settleSync, settleAsync } = require('./waiting')
const { attachTo, writeTag } = require('./kind')
const { WAIT, waitSync, waitAsync, ownerDied } = require('./inside')

const STATE = 1
const OWNER = 0x3FFFFFFF
const DONE = 0x80000000 | 0
const BYTES = 8
const ATTACH = Symbol('attach')
const RUN = Symbol('run')

function attemptOnce (w) {
  const i32 = w.i32
  const { self, alive, deathEpoch } = w.own
  for (;;) {
    const epoch = deathEpoch()
    const s = Atomics.load(i32, STATE)
    if (s === DONE) return false
    const owner = s & OWNER
    if (owner === 0 || (owner !== self && !alive(owner))) {
      if (Atomics.compareExchange(i32, STATE, s, self) === s) {
        if (owner !== 0) ownerDied(w.object, 'Once', owner) // its runner died running fn
        return RUN
      }
      continue
    }
    if (owner === self && !w.async) {
      throw new SabsyncError('ERR_SABSYNC_DEADLOCK', 'Once: run() called from within its own fn')
    }
    const wait = w.remaining()
    if (wait === 0) return undefined
    w.cell = STATE
    w.value = s
    w.wait = wait
    w.epoch = epoch
    return PARK
  }
}

class Once {
  #i32
  #be // the backend of its memory (lib/backend.js)
  #wake

  static get byteLength () { return BYTES }

  static from (handle) {
    return new Once(attachTo('Once', handle), ATTACH)
  }

  constructor (options, attach) {
    const { buffer, byteOffset, i32 } = memoryOf('Once', BYTES, options, attach === ATTACH ? 'handle' : 'options')
    if (attach !== ATTACH) {
      Atomics.store(i32, STATE, 0)
      writeTag(i32, 'Once')
    }
    this.buffer = buffer
    this.byteOffset = byteOffset
    this.#i32 = i32
    this.#be = backendOf(buffer)
    this.#wake = this.#be.waker(i32, STATE)
    madeAs(this, 'Once')
  }

  get done () { return Atomics.load(this.#i32, STATE) === DONE }

  // Runs fn unless it has run: true if this call ran it, false if it had
  // run, undefined if `timeout` ms passed while another thread ran it.
  // fn's exception propagates (and another caller will run fn). A promise
  // returned by fn is not awaited: use runAsync for async work.
  run (fn, timeout) {
    if (typeof fn !== 'function') throw invalidType('fn', 'a function', fn)
    const t = timeout === undefined ? Infinity : parseTimeout(timeout)
    if (Atomics.load(this.#i32, STATE) === DONE) return false
    const w = new Wait(this.#i32, t, this.#be)
    w.async = false
    w.object = this
    // Traced only when another thread runs fn (this call may wait).
    const r = (Atomics.load(this.#i32, STATE) & OWNER) === 0
      ? settleSync(w, attemptOnce)
      : waitSync(WAIT, this, 'Once', settleSync, w, attemptOnce)
    if (r !== RUN) return r
    try {
      fn()
    } catch (err) {
      this.#release(0)
      throw err
    }
    this.#release(DONE)
    return true
  }

  // The same for fn that may return a promise: done when it resolves.
  async runAsync (fn, options) {
    if (typeof fn !== 'function') throw invalidType('fn', 'a function', fn)
    const { timeout, signal, ref } = parseAsyncOptions(options)
    if (Atomics.load(this.#i32, STATE) === DONE) return false
    if (signal !== undefined && signal.aborted) throw signal.reason
    const w = new Wait(this.#i32, timeout, this.#be)
    w.async = true
    w.signal = signal
    w.ref = ref
    w.object = this
    const r = (Atomics.load(this.#i32, STATE) & OWNER) === 0
      ? await settleAsync(w, attemptOnce)
      : await waitAsync(WAIT, this, 'Once', settleAsync, w, attemptOnce)
    if (r !== RUN) return r
    try {
      await fn()
    } catch (err) {
      this.#release(0)
      throw err
    }
    this.#release(DONE)
    return true
  }

  #release (state) {
    Atomics.store(this.#i32, STATE, state)
    this.#wake(Infinity)
  }

  /** How many run() and runAsync() calls wait for a running fn, in every thread. */
  nrWaiting () { return this.#be.waitersOf(this.#i32, STATE) }
}

module.exports = { Once }
