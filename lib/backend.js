'use strict'
// The memory a primitive lives in, as one interface. A primitive asks
// backendOf(buffer) once, in its constructor, and keeps the answer: every
// later call goes to that backend's own functions, with no per-call test of
// where the memory is. There are two implementations:
//
//   LOCAL     this process's memory (a SharedArrayBuffer): owner ids of
//             this process, the native parking lot, the native Sema and
//             rate limiter (src/napi/wait.c, sema.c, rate.c)
//   a space   a shared space's buffer (openShared): owner ids of the space,
//             its queues, Sema and rate limiter (src/napi/space.c); made
//             by lib/space.js and registered here with addSpace
//
// The interface (each backend has every member):
//
//   self, alive(id), deathEpoch()        owners: this thread's id, whether
//                                        an id's thread lives, the deaths
//                                        so far (read before looking at an
//                                        owner, then parked with)
//   park(i32, index, value, timeout, watch, epoch)
//                                        block this thread: a result code
//   parkAsync(i32, index, value, timeout, signal, ref, watch, epoch)
//                                        a code now, or a promise of 'ok' /
//                                        'timed-out' that an abort rejects
//   waker(i32, index)                    count => woken, the cell's address
//                                        and bucket computed once
//   waitCell(ta, i, size, value, timeout)          lib/atomics.js's wait:
//   waitCellAsync(ta, i, size, value, timeout, signal, ref)   by result
//   notifyAt(addr, count), waitersAt(addr)         name; cells by address
//   sema                                 a Sema's native operations and
//                                        `fast`: whether lib/sema.js may
//                                        take and give on the words itself:
//     view(i32, fairMs)                  what the others take as `v`
//     try(v), acquire(v, ms)             OK with the token in OUT[0], or
//                                        TIMED_OUT
//     acquireAsync(v, i32, timeout, signal, ref, fairMs)
//                                        a token (one was free), or a
//                                        promise of a token, SEMA_TIMED_OUT
//                                        or SEMA_NO_TOKEN (acquire again)
//     release(v, slot)                   OK with the info bits in OUT[0],
//                                        or BAD_TOKEN
//     waiting(v), available(v)           counts
//   rate(i32, turnByteOffset)            { grant, grantIfTurnFree } of a
//                                        RateLimit (lib/rate-limit.js)
//   tier                                 'thread' or 'space', for people
//                                        and diagnostics (lib/inside.js)
//   waitersOf(i32, index)                how many waits are queued on the
//                                        cell (nrWaiting)
//   party(id)                            { pid, threadId } of a live owner
//                                        id (threadId null when unknown),
//                                        or null: who holds, for a person
//
// Results are the codes of native.constants (OK, NOT_EQUAL, TIMED_OUT,
// OWNER_DEAD, ...) and, for the public calls, their names
// (native.resultNames); a second value is in OUT (native.out), read right
// after the call.

const { isSharedArrayBuffer } = require('util').types
const native = require('./native')
const { guard } = require('./abort')
const { counts, bucketOf, addressOf } = require('./lot')

const { threadId } = require('worker_threads')

const { NOT_EQUAL, TIMED_OUT, ASYNC_REF, ASYNC_HANDLE } = native.constants
// A copy: see lib/atomics.js (indexed loads of the addon's frozen array).
const RESULTS = [...native.resultNames]

const asyncFlags = (ref, signal) => (ref ? ASYNC_REF : 0) | (signal !== undefined ? ASYNC_HANDLE : 0)

// What every parkAsync answers before it queues anything: NOT_EQUAL or
// TIMED_OUT for a zero timeout, a rejection for an aborted signal; else
// undefined.
function parkNow (i32, index, value, timeout, signal) {
  if (timeout === 0) return Atomics.load(i32, index) !== value ? NOT_EQUAL : TIMED_OUT
  if (signal !== undefined && signal.aborted) return Promise.reject(signal.reason)
  return undefined
}

// A native async wait's answer ([promise, handle] with a signal, else a
// promise or a code), with the signal guarding it.
function guarded (r, signal) {
  if (typeof r === 'number' || signal === undefined) return r
  guard(signal, r[1], r[0])
  return r[0]
}

const LOCAL = Object.freeze({
  // This thread's owner id: unique in the process, never reused, marked
  // dead by the native side when the thread ends (see include/sabsync.h).
  self: native.envId(),
  alive: native.alive,
  deathEpoch: native.deathEpoch,

  park (i32, index, value, timeout, watch, epoch) {
    return native.wait(i32, index, value, timeout, watch, epoch)
  },

  parkAsync (i32, index, value, timeout, signal, ref, watch, epoch) {
    const now = parkNow(i32, index, value, timeout, signal)
    if (now !== undefined) return now
    return guarded(native.waitAsync(i32, index, value, timeout, asyncFlags(ref, signal), watch, epoch), signal)
  },

  // Skips the native call when no thread waits in the cell's bucket (the
  // ordering argument is in lib/lot.js), which makes an unlock with nobody
  // waiting cost one atomic read-modify-write of the bucket counter.
  waker (i32, index) {
    const addr = addressOf(i32, i32.buffer, index, 4)
    if (counts === null) return count => native.notify(addr, count)
    const bucket = bucketOf(addr)
    return count => Atomics.add(counts, bucket, 0) === 0 ? 0 : native.notify(addr, count)
  },

  waitCell (ta, i, size, value, timeout) {
    return RESULTS[native.wait(ta, i, value, timeout)]
  },

  waitCellAsync (ta, i, size, value, timeout, signal, ref) {
    const r = native.waitAsync(ta, i, value, timeout, asyncFlags(ref, signal))
    return r === NOT_EQUAL ? RESULTS[r] : guarded(r, signal)
  },

  notifyAt (addr, count) {
    if (counts !== null && Atomics.add(counts, bucketOf(addr), 0) === 0) return 0
    return native.notify(addr, count)
  },

  waitersAt: native.waiters,

  // A Sema in this process: its view is the native checked view
  // (src/napi/sema.c); its waiters' counter is readable (lib/lot.js), so
  // lib/sema.js takes and gives free slots itself.
  sema: Object.freeze({
    fast: counts !== null,
    view: (i32, fairMs) => native.semaView(i32, fairMs),
    try: v => native.semaTry(v),
    acquire: (v, ms) => native.semaAcquire(v, ms),
    acquireAsync: (v, i32, timeout, signal, ref, fairMs) =>
      guarded(native.semaAcquireAsync(i32, timeout, asyncFlags(ref, signal), fairMs), signal),
    release: (v, slot) => native.semaRelease(v, slot),
    waiting: v => native.semaWaiting(v),
    available: v => native.semaAvailable(v)
  }),

  // In-process, the turn's holder takes grants under the lot's lock of the
  // ring, and a caller without the turn never does: no grantIfTurnFree.
  rate (i32, turnByteOffset) {
    return { grant: () => native.rateTake(i32), grantIfTurnFree: undefined }
  },

  tier: 'thread',

  // The process's list of lock waits (src/core/lockwaits.c), which
  // deadlocks among its threads are found in (lib/inspect.js).
  lockWait: native.lockWaitEnter,
  lockWaitEnd: native.lockWaitLeave,

  waitersOf (i32, index) {
    return native.waiters(addressOf(i32, i32.buffer, index, 4))
  },

  party (id) {
    if (id === 0 || !native.alive(id)) return null
    const tid = native.ownerThread(id)
    return { pid: process.pid, threadId: tid === -1 ? null : tid }
  }
})

// Which thread this owner id is, for the holder of a lock (Mutex.holder):
// told once, when this thread loads the addon.
native.ownerThreadSet(LOCAL.self, threadId)

// The buffers of this thread's shared spaces -> their backends.
const spaces = new WeakMap()

function addSpace (buffer, backend) {
  spaces.set(buffer, backend)
}

// The backend of a primitive's (or a cell's) memory.
function backendOf (buffer) {
  return spaces.get(buffer) ?? LOCAL
}

// Whether `buffer` is memory a primitive can live in: a SharedArrayBuffer,
// or a shared space's buffer (an ArrayBuffer where Node cannot wrap foreign
// memory in a SharedArrayBuffer).
function isMemory (buffer) {
  return isSharedArrayBuffer(buffer) || spaces.has(buffer)
}

module.exports = { LOCAL, backendOf, addSpace, isMemory, parkNow, asyncFlags, guarded, RESULTS, OUT: native.out }
