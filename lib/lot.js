'use strict'
// The JS mirror of the native parking lot (src/core/lot.c): a cell's
// address (its key in the lot), the bucket that address hashes to, and the
// per-bucket counters of queued waiters that let a notify with nobody
// waiting skip the native call. The hash and the counters' layout come
// from the addon's constants.

const native = require('./native')
const { BUCKET_BITS, COUNT_STRIDE } = native.constants

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
const COUNT_SHIFT = 32 - BUCKET_BITS
const GOLDEN = 0x9E3779B1 | 0

// The index in `counts` of the counter of the bucket of `addr`.
function bucketOf (addr) {
  // Must match sab_bucket_of(): the low 32 bits of addr / 4, times the
  // golden ratio, top bits. addr < 2^53 and a multiple of 4: exact.
  return (Math.imul((addr / 4) >>> 0, GOLDEN) >>> COUNT_SHIFT) * COUNT_STRIDE
}

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

module.exports = { counts, bucketOf, addressOf, seen }
