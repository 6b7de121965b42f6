'use strict'
// AbortSignal checks that need no native code: lib/abort.js (native waits)
// and lib/redis/ (which must load without the addon) both use them.

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

module.exports = { isAbortSignal, ownSignal }
