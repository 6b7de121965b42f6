'use strict'
// AtomicFlag: C++20 std::atomic_flag across threads.
//
// Memory, two Int32 cells (8 bytes):
//
//   [0] TAG   'FLG1', the kind tag (lib/kind.js), read only by from()
//   [1] FLAG  0 (clear) or 1 (set)
//
// As in C++, testAndSet() and clear() do not wake anyone: a waiter is woken
// by notifyOne() / notifyAll() and returns once the flag differs from the
// value it waited on (wakes that find it unchanged park again).

const { backendOf, memoryOf, madeAs, parseTimeout, parseAsyncOptions, invalidType } = require('./shared')
const { PARK, Wait, settleSync, settleAsync } = require('./waiting')
const { attachTo, writeTag } = require('./kind')
const { WAIT, waitSync, waitAsync } = require('./inside')

const FLAG = 1
const BYTES = 8
const ATTACH = Symbol('attach')

function attemptFlag (w) {
  if (Atomics.load(w.i32, FLAG) !== w.value) return true
  const wait = w.remaining()
  if (wait === 0) return false
  w.wait = wait
  return PARK
}

function oldValue (old) {
  if (typeof old !== 'boolean') throw invalidType('old', 'a boolean', old)
  return old ? 1 : 0
}

function newWait (i32, old, timeout, be) {
  const w = new Wait(i32, timeout, be)
  w.cell = FLAG
  w.value = old
  w.watch = 0 // a flag has no owner: deaths are not its business
  return w
}

class AtomicFlag {
  #i32
  #be // the backend of its memory (lib/backend.js)
  #wake

  static get byteLength () { return BYTES }

  static from (handle) {
    return new AtomicFlag(attachTo('AtomicFlag', handle), ATTACH)
  }

  constructor (options, attach) {
    const { buffer, byteOffset, i32 } = memoryOf('AtomicFlag', BYTES, options, attach === ATTACH ? 'handle' : 'options')
    if (attach !== ATTACH) {
      Atomics.store(i32, FLAG, 0)
      writeTag(i32, 'AtomicFlag')
    }
    this.buffer = buffer
    this.byteOffset = byteOffset
    this.#i32 = i32
    this.#be = backendOf(buffer)
    this.#wake = this.#be.waker(i32, FLAG)
    madeAs(this, 'AtomicFlag')
  }

  // Sets the flag; answers its previous value.
  testAndSet () { return Atomics.exchange(this.#i32, FLAG, 1) === 1 }

  clear () { Atomics.store(this.#i32, FLAG, 0) }

  test () { return Atomics.load(this.#i32, FLAG) === 1 }

  // Blocks while the flag equals `old`: true once it differs (after a
  // notify), false when `timeout` ms passed.
  wait (old, timeout) {
    const v = oldValue(old)
    const t = timeout === undefined ? Infinity : parseTimeout(timeout)
    if (Atomics.load(this.#i32, FLAG) !== v) return true
    return waitSync(WAIT, this, 'AtomicFlag', settleSync, newWait(this.#i32, v, t, this.#be), attemptFlag)
  }

  waitAsync (old, options) {
    const v = oldValue(old)
    const { timeout, signal, ref } = parseAsyncOptions(options)
    if (Atomics.load(this.#i32, FLAG) !== v) return Promise.resolve(true)
    const w = newWait(this.#i32, v, timeout, this.#be)
    w.signal = signal
    w.ref = ref
    return waitAsync(WAIT, this, 'AtomicFlag', settleAsync, w, attemptFlag)
  }

  // Wake one / every waiter; answers how many were woken.
  notifyOne () { return this.#wake(1) }
  notifyAll () { return this.#wake(Infinity) }

  /** How many wait() and waitAsync() calls are queued on it, in every thread. */
  nrWaiting () { return this.#be.waitersOf(this.#i32, FLAG) }
}

module.exports = { AtomicFlag }
