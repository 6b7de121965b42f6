'use strict'
// AbortSignal plumbing for pending native waits: one 'abort' listener per
// signal, however many waits it guards (so no listener-leak warnings).
const native = require('./native')

function isAbortSignal (signal) {
  return signal instanceof AbortSignal ||
    (signal !== null && typeof signal === 'object' && typeof signal.aborted === 'boolean' &&
     typeof signal.addEventListener === 'function' && typeof signal.removeEventListener === 'function')
}

// The signal the library uses for `signal`, which isAbortSignal accepted:
// itself if it is an AbortSignal of this realm, else one of ours that
// follows it. Another realm's or a polyfill's signal runs its own code (its
// addEventListener, its aborted and reason getters) only here, on the
// caller's stack, where what it throws reaches the caller: the library
// never calls it later, from a timer or a wait's completion, where a throw
// would be an uncaught exception (found by the API fuzz, test/fuzz-primitives.test.js).
function ownSignal (signal) {
  if (signal instanceof AbortSignal) return signal
  if (signal.aborted) return AbortSignal.abort(signal.reason)
  const ac = new AbortController()
  signal.addEventListener('abort', () => ac.abort(signal.reason), { once: true })
  return ac.signal
}

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
