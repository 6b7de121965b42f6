'use strict'
// The JS mirror of the native parking lot (src/core/lot.c): a cell's
// address (its key in the lot), the bucket that address hashes to, and the
// per-bucket counters of queued waiters that let a notify with nobody
// waiting skip the native call. The hash and the counters' layout are the
// addon's: JS asks for a bucket (memoized), never computes one.

const native = require('./native')

const TypedArrayPrototype = Object.getPrototypeOf(Int32Array.prototype)
const taByteOffset = Object.getOwnPropertyDescriptor(TypedArrayPrototype, 'byteOffset').get

// SharedArrayBuffer -> address of its byte 0, fetched once per buffer. Only
// shared buffers are ever keys, so a hit also answers IsSharedArrayBuffer.
const bases = new WeakMap()

// The lot's per-bucket waiter counters (see include/sabsync.h), or null.
// notify skips the native call when its bucket has no waiter. Ordering: a
// waiter raises its bucket's counter (seq-cst) before it loads the cell under
// the bucket lock. A notifier that stored to the cell reads the counter with
// a read-modify-write (Atomics.add of 0, a full barrier), so either it sees
// the raised counter and takes the lock, or the waiter's load sees its store
// and the waiter never sleeps. The RMW, not a plain load, keeps this true
// after a plain (non-atomic) store to the cell, as with Atomics.notify.
const counts = native.counts

// A direct-mapped memo in front of a native hash of a key (an address or
// an offset, < 2^53, a multiple of 4): the hash stays the core's, and a
// repeated key costs two typed-array loads instead of a native call.
// Entries are per thread; a miss only costs the call.
const MEMO = 4096
function memoized (hash) {
  const keys = new Float64Array(MEMO).fill(-1)
  const values = new Int32Array(MEMO)
  return key => {
    const k = (key >>> 2) & (MEMO - 1)
    if (keys[k] === key) return values[k]
    const v = hash(key)
    keys[k] = key
    values[k] = v
    return v
  }
}

// The index in `counts` of the counter of the bucket of `addr`
// (sab_bucket_of, through the addon).
const bucketOf = memoized(native.bucketOf)

// The address of element i (of `size` bytes) of `typedArray` over the
// shared `buffer`.
function addressOf (typedArray, buffer, i, size) {
  let base = bases.get(buffer)
  if (base === undefined) {
    base = native.base(typedArray)
    bases.set(buffer, base)
  }
  return base + taByteOffset.call(typedArray) + i * size
}

// Whether `buffer` is one addressOf has seen (so, shared).
function seen (buffer) {
  return bases.has(buffer)
}

module.exports = { counts, bucketOf, memoized, addressOf, seen }
