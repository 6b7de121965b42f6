'use strict'
// What every shared primitive uses: its memory ({ buffer, byteOffset }),
// option parsing for { timeout, signal, ref }, and parking on the lot
// without the Atomics-exact argument handling of lib/atomics.js (the
// primitives pass arguments they made themselves).

const { isSharedArrayBuffer } = require('util').types
const native = require('./native')
const { invalidType, outOfRange, SabsyncError } = require('./errors')
const { isAbortSignal, ownSignal, guard } = require('./abort')
const { spaceOf } = require('./space-registry')

// This thread's owner id: unique in the process, never reused, marked dead
// by the native side when the thread ends (see include/sabsync.h).
const selfId = native.envId()

// Owners as a primitive sees them: this thread's id, whether an id's
// thread lives, and the count of deaths (a primitive reads it before it
// looks at an owner, then parks with it). In this process's memory these
// are the process's own; in a shared space (lib/space.js), the space's,
// which mean the same in every process.
const LOCAL = Object.freeze({ self: selfId, alive: native.alive, deathEpoch: native.deathEpoch })

function ownersOf (buffer) {
  return spaceOf(buffer) ?? LOCAL
}

function isMemory (buffer) {
  return isSharedArrayBuffer(buffer) || spaceOf(buffer) !== undefined
}

// Result codes of native.wait / native.waitAsync, and the flags of
// native.waitAsync (src/napi/binding.c exports the core's values).
const { OK, NOT_EQUAL, TIMED_OUT, OWNER_DEAD, WATCH_ANY, ASYNC_REF, ASYNC_HANDLE } = native.constants

// The memory of a primitive needing `byteLength` bytes: a fresh
// SharedArrayBuffer, or options.buffer at options.byteOffset (8-aligned,
// in range). Answers { buffer, byteOffset, i32 } with i32 an Int32Array
// over exactly those bytes.
function memoryOf (who, byteLength, options) {
  if (options === undefined || options === null) options = {}
  else if (typeof options !== 'object') throw invalidType('options', 'an object', options)
  let { buffer, byteOffset } = options
  if (buffer === undefined) {
    if (byteOffset !== undefined && byteOffset !== 0) {
      throw outOfRange('options.byteOffset', '0 (or left out) when no buffer is given', byteOffset)
    }
    buffer = new SharedArrayBuffer(byteLength)
    byteOffset = 0
  } else {
    if (!isMemory(buffer)) {
      throw invalidType('options.buffer', 'a SharedArrayBuffer', buffer)
    }
    if (byteOffset === undefined) byteOffset = 0
    if (typeof byteOffset !== 'number' || !Number.isInteger(byteOffset) || byteOffset < 0) {
      throw outOfRange('options.byteOffset', 'a non-negative integer', byteOffset)
    }
    if (byteOffset % 8 !== 0) {
      throw outOfRange('options.byteOffset', `a multiple of 8 (${who} memory is 8-byte aligned)`, byteOffset)
    }
    if (byteOffset + byteLength > buffer.byteLength) {
      throw outOfRange('options.byteOffset',
        `<= ${buffer.byteLength - byteLength} (${who} needs ${byteLength} bytes; the buffer has ${buffer.byteLength})`,
        byteOffset)
    }
  }
  return { buffer, byteOffset, i32: new Int32Array(buffer, byteOffset, byteLength / 4) }
}

// A handle received from another thread ({ buffer, byteOffset }).
function handleOf (who, handle) {
  if (handle === null || typeof handle !== 'object') {
    throw invalidType('handle', `a ${who} or an object with its buffer and byteOffset`, handle)
  }
  return { buffer: handle.buffer, byteOffset: handle.byteOffset }
}

// A timeout in ms: undefined = forever; NaN is refused (say Infinity).
function parseTimeout (timeout, name = 'timeout') {
  if (timeout === undefined) return Infinity
  if (typeof timeout !== 'number' || Number.isNaN(timeout)) {
    throw invalidType(name, 'a number of milliseconds (or Infinity)', timeout)
  }
  return timeout > 0 ? timeout : 0
}

// { timeout, signal, ref } of every promise call.
function parseAsyncOptions (options) {
  if (options === undefined) return { timeout: Infinity, signal: undefined, ref: true }
  if (options === null || typeof options !== 'object') throw invalidType('options', 'an object', options)
  const { timeout, signal, ref = true } = options
  if (signal !== undefined && !isAbortSignal(signal)) {
    throw invalidType('options.signal', 'an AbortSignal', signal)
  }
  if (typeof ref !== 'boolean') throw invalidType('options.ref', 'a boolean', ref)
  const t = parseTimeout(timeout, 'options.timeout')
  return { timeout: t, signal: signal === undefined ? undefined : ownSignal(signal), ref }
}

// Park this thread on i32[index] while it holds `value`, up to `timeout`
// ms. With `watch` (an owner id, or WATCH_ANY) and the `epoch` read before
// the caller looked at that owner, the death of the owner wakes the wait,
// and OWNER_DEAD is answered if an owner died since `epoch`.
function parkSync (i32, index, value, timeout, watch, epoch) {
  const space = spaceOf(i32.buffer)
  if (space !== undefined) return space.parkSync(i32, index, value, timeout, watch, epoch)
  return native.wait(i32, index, value, timeout, watch, epoch)
}

// The same, asynchronous. Answers a code (NOT_EQUAL, OWNER_DEAD, or
// TIMED_OUT for a zero timeout) or a promise of 'ok' / 'timed-out' that
// an abort rejects with signal.reason.
function parkAsync (i32, index, value, timeout, signal, ref, watch, epoch) {
  if (timeout === 0) return Atomics.load(i32, index) !== value ? NOT_EQUAL : TIMED_OUT
  if (signal !== undefined && signal.aborted) return Promise.reject(signal.reason)
  const space = spaceOf(i32.buffer)
  if (space !== undefined) return space.parkAsync(i32, index, value, timeout, signal, ref, watch, epoch)
  const r = native.waitAsync(i32, index, value, timeout, (ref ? ASYNC_REF : 0) | (signal !== undefined ? ASYNC_HANDLE : 0), watch, epoch)
  if (typeof r === 'number' || signal === undefined) return r
  guard(signal, r[1], r[0])
  return r[0]
}

module.exports = {
  selfId,
  ownersOf,
  isMemory,
  OK,
  NOT_EQUAL,
  TIMED_OUT,
  OWNER_DEAD,
  WATCH_ANY,
  ASYNC_REF,
  ASYNC_HANDLE,
  alive: native.alive,
  deathEpoch: native.deathEpoch,
  memoryOf,
  handleOf,
  parseTimeout,
  parseAsyncOptions,
  isAbortSignal,
  ownSignal,
  parkSync,
  parkAsync,
  SabsyncError,
  invalidType,
  outOfRange
}
