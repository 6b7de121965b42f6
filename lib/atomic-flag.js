'use strict'
// AtomicFlag: C++20 std::atomic_flag across threads.
//
// Memory: one Int32 cell, 0 (clear) or 1 (set); 8 bytes reserved so that
// the next primitive in the same buffer stays 8-aligned.
//
// As in C++, testAndSet() and clear() do not wake anyone: a waiter is woken
// by notifyOne() / notifyAll() and returns once the flag differs from the
// value it waited on (wakes that find it unchanged park again).

const { memoryOf, parseTimeout, parseAsyncOptions, invalidType } = require('./shared')
const { attachTo, PARK, Wait, settleSync, settleAsync, waker } = require('./waiting')

const BYTES = 8
const ATTACH = Symbol('attach')

function attemptFlag (w) {
  if (Atomics.load(w.i32, 0) !== w.value) return true
  const wait = w.remaining()
  if (wait === 0) return false
  w.wait = wait
  return PARK
}

function oldValue (old) {
  if (typeof old !== 'boolean') throw invalidType('old', 'a boolean', old)
  return old ? 1 : 0
}

function newWait (i32, old, timeout) {
  const w = new Wait(i32, timeout)
  w.value = old
  w.watch = 0 // a flag has no owner: deaths are not its business
  return w
}

class AtomicFlag {
  #i32
  #wake

  static get byteLength () { return BYTES }

  static from (handle) {
    return new AtomicFlag(attachTo('AtomicFlag', handle), ATTACH)
  }

  constructor (options, attach) {
    const { buffer, byteOffset, i32 } = memoryOf('AtomicFlag', BYTES, options)
    if (attach !== ATTACH) Atomics.store(i32, 0, 0)
    this.buffer = buffer
    this.byteOffset = byteOffset
    this.#i32 = i32
    this.#wake = waker(i32, 0)
  }

  // Sets the flag; answers its previous value.
  testAndSet () { return Atomics.exchange(this.#i32, 0, 1) === 1 }

  clear () { Atomics.store(this.#i32, 0, 0) }

  test () { return Atomics.load(this.#i32, 0) === 1 }

  // Blocks while the flag equals `old`: true once it differs (after a
  // notify), false when `timeout` ms passed.
  wait (old, timeout) {
    const v = oldValue(old)
    const t = timeout === undefined ? Infinity : parseTimeout(timeout)
    if (Atomics.load(this.#i32, 0) !== v) return true
    return settleSync(newWait(this.#i32, v, t), attemptFlag)
  }

  waitAsync (old, options) {
    const v = oldValue(old)
    const { timeout, signal, ref } = parseAsyncOptions(options)
    if (Atomics.load(this.#i32, 0) !== v) return Promise.resolve(true)
    const w = newWait(this.#i32, v, timeout)
    w.signal = signal
    w.ref = ref
    return settleAsync(w, attemptFlag)
  }

  // Wake one / every waiter; answers how many were woken.
  notifyOne () { return this.#wake(1) }
  notifyAll () { return this.#wake(Infinity) }
}

module.exports = { AtomicFlag }
