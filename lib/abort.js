'use strict'
// AbortSignal plumbing for pending native waits: one 'abort' listener per
// signal, however many waits it guards (so no listener-leak warnings).
const native = require('./native')
const { isAbortSignal, ownSignal } = require('./signal')

const guarded = new WeakMap()

// Cancel the native wait `handle` (rejecting its promise with the reason)
// when `signal` aborts, until `promise` settles.
function guard (signal, handle, promise) {
  let set = guarded.get(signal)
  if (set === undefined) {
    const s = set = new Set()
    guarded.set(signal, s)
    signal.addEventListener('abort', () => {
      guarded.delete(signal)
      for (const h of s) native.cancel(h, signal.reason)
      s.clear()
    }, { once: true })
  }
  set.add(handle)
  const forget = () => { set.delete(handle) }
  promise.then(forget, forget)
}

module.exports = { isAbortSignal, ownSignal, guard }
