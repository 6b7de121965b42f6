'use strict'
// CondVar: a condition variable used with a sabsync Mutex.
//
// Memory, two Int32 cells (8 bytes): [0] TAG 'CDV1', the kind tag
// (lib/kind.js), read only by from(); [1] SEQ, a sequence number. Every
// notify adds 1 to SEQ before waking. A waiter reads it while it still holds
// the mutex, unlocks, and parks expecting the value it read: a notify that
// lands between the unlock and the park changes the value, so the park
// answers not-equal at once instead of sleeping through it (no lost
// wake-up). The price is spurious wake-ups: a notifyOne can release every
// waiter that was between its unlock and its park. Callers loop on their
// predicate, as with every condition variable.

const { backendOf, memoryOf, madeAs, parseTimeout, parseAsyncOptions, TIMED_OUT, SabsyncError, invalidType } = require('./shared')
const { attachTo, writeTag } = require('./kind')
const { internals } = require('./mutex')
const { WAIT, waitSync, waitAsync } = require('./inside')

const SEQ = 1
const BYTES = 8
const ATTACH = Symbol('attach')

function holdsIt (mutex) {
  if (!internals.isMutex(mutex)) throw invalidType('mutex', 'a sabsync Mutex', mutex)
  if (!internals.heldByMe(mutex)) {
    throw new SabsyncError('ERR_SABSYNC_NOT_OWNER', 'CondVar wait: this thread does not hold the mutex')
  }
}

// A blocking wait for a notify: the park CondVar.wait makes.
function parkOn (be, i32, seq, timeout) {
  return be.park(i32, SEQ, seq, timeout, 0, 0)
}

class CondVar {
  #i32
  #be // the backend of its memory (lib/backend.js)
  #wake

  static get byteLength () { return BYTES }

  static from (handle) {
    return new CondVar(attachTo('CondVar', handle), ATTACH)
  }

  constructor (options, attach) {
    const { buffer, byteOffset, i32 } = memoryOf('CondVar', BYTES, options, attach === ATTACH ? 'handle' : 'options')
    if (attach !== ATTACH) {
      Atomics.store(i32, SEQ, 0)
      writeTag(i32, 'CondVar')
    }
    this.buffer = buffer
    this.byteOffset = byteOffset
    this.#i32 = i32
    this.#be = backendOf(buffer)
    this.#wake = this.#be.waker(i32, SEQ)
    madeAs(this, 'CondVar')
  }

  // Unlocks `mutex`, waits for a notify (or `timeout` ms), locks it again.
  // true: notified (or spuriously woken); false: timed out. The mutex is
  // held again on return either way.
  wait (mutex, timeout) {
    const t = timeout === undefined ? Infinity : parseTimeout(timeout)
    holdsIt(mutex)
    const seq = Atomics.load(this.#i32, SEQ)
    mutex.unlock()
    // In a worker being terminated this returns with the termination
    // pending: the thread never runs JS again, and holds nothing.
    const code = waitSync(WAIT, this, 'CondVar', parkOn, this.#be, this.#i32, seq, t)
    mutex.lock()
    return code !== TIMED_OUT
  }

  // The same on the event loop: the mutex is re-taken with lockAsync before
  // the promise settles, also when it rejects (abort).
  waitAsync (mutex, options) {
    const { timeout, signal, ref } = parseAsyncOptions(options)
    holdsIt(mutex)
    if (signal !== undefined && signal.aborted) return Promise.reject(signal.reason)
    const seq = Atomics.load(this.#i32, SEQ)
    mutex.unlock()
    const parked = this.#be.parkAsync(this.#i32, SEQ, seq, timeout, signal, ref, 0, 0)
    return waitAsync(WAIT, this, 'CondVar', async () => {
      let timedOut
      try {
        timedOut = typeof parked === 'number' ? parked === TIMED_OUT : (await parked) === 'timed-out'
      } catch (err) {
        await mutex.lockAsync({ ref })
        throw err
      }
      await mutex.lockAsync({ ref })
      return !timedOut
    })
  }

  // Wake one / every waiter; answer how many were woken.
  notifyOne () {
    Atomics.add(this.#i32, SEQ, 1)
    return this.#wake(1)
  }

  notifyAll () {
    Atomics.add(this.#i32, SEQ, 1)
    return this.#wake(Infinity)
  }

  /** How many wait() and waitAsync() calls are queued for a notify, in every thread. */
  nrWaiting () { return this.#be.waitersOf(this.#i32, SEQ) }
}

module.exports = { CondVar }
