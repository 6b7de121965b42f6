'use strict'
// What every shared primitive uses: its memory ({ buffer, byteOffset }),
// option parsing for { timeout, signal, ref }, and parking on the lot
// through the backend of their memory (lib/backend.js), without the
// Atomics-exact argument handling of lib/atomics.js (the primitives pass
// arguments they made themselves).

const { isSharedArrayBuffer, isAnyArrayBuffer } = require('util').types
const native = require('./native')
const { invalidType, notCallOptions, outOfRange, SabsyncError } = require('./errors')
const { isAbortSignal, ownSignal } = require('./abort')
const { backendOf, isMemory } = require('./backend')

// Result codes of native.wait / native.waitAsync, and the flags of
// native.waitAsync (src/napi/binding.c exports the core's values).
const { OK, NOT_EQUAL, TIMED_OUT, OWNER_DEAD, WATCH_ANY, ASYNC_REF, ASYNC_HANDLE } = native.constants

// Objects made by a primitive's constructor (the limiter function of
// RateLimit aside), with their kind: such an object passed as a
// constructor's options is a mistake that would re-initialise its memory.
const made = new WeakMap()
function madeAs (obj, kind) {
  made.set(obj, kind)
}

// `options` of a constructor, when it is something else that a caller may
// mean as memory: a buffer, a typed array, a primitive. Passing it on would
// ignore it (a fresh buffer: the workers attached to `sab` would then use
// another primitive, and mutual exclusion would be silently lost) or reset
// a primitive in use. Answers the TypeError to throw, or undefined.
function notOptions (who, options) {
  let what, fix
  if (isSharedArrayBuffer(options)) {
    what = 'a SharedArrayBuffer where options were expected'
    fix = `To make ${article(who)} in it, pass { buffer: sab, byteOffset }; to attach to one made elsewhere, use ${who}.from({ buffer, byteOffset })`
  } else if (isAnyArrayBuffer(options)) {
    what = 'an ArrayBuffer where options were expected'
    fix = `A ${who} lives in shared memory: pass { buffer: sab, byteOffset } with sab a SharedArrayBuffer, or leave options out`
  } else if (ArrayBuffer.isView(options)) {
    what = 'a typed array or DataView where options were expected'
    fix = `To make ${article(who)} in its memory, pass { buffer: view.buffer, byteOffset } (8-byte aligned); to attach to one made elsewhere, use ${who}.from({ buffer, byteOffset })`
  } else if (made.has(options)) {
    const kind = made.get(options)
    what = `${article(kind)} where options were expected: the constructor would make a new ${who} over its memory`
    fix = kind === who
      ? `To attach to it, use ${who}.from(it)`
      : `Give ${article(who)} memory of its own ({ buffer, byteOffset }), or leave options out`
  } else if (Array.isArray(options)) {
    what = 'an array where options were expected'
    fix = `Pass { buffer, byteOffset } to make ${article(who)} there, or leave options out`
  } else {
    return undefined
  }
  const err = new TypeError(`${who}: the "options" argument must be an object like { buffer, byteOffset }. Received ${what}. ${fix}.`)
  err.code = 'ERR_INVALID_ARG_TYPE'
  return err
}

const article = kind => (kind === 'AtomicFlag' ? 'an ' : 'a ') + kind

// The memory of a primitive needing `byteLength` bytes: a fresh
// SharedArrayBuffer, or options.buffer at options.byteOffset (8-aligned,
// in range). Answers { buffer, byteOffset, i32 } with i32 an Int32Array
// over exactly those bytes. `name` names the argument in errors: 'options'
// for a constructor, 'handle' for from().
function memoryOf (who, byteLength, options, name = 'options') {
  if (options === undefined || options === null) options = {}
  else if (typeof options !== 'object') throw invalidType(name, 'an object', options)
  else if (name === 'options') {
    const err = notOptions(who, options)
    if (err !== undefined) throw err
  }
  let { buffer, byteOffset } = options
  if (buffer === undefined) {
    if (byteOffset !== undefined && byteOffset !== 0) {
      throw outOfRange(`${name}.byteOffset`, '0 (or left out) when no buffer is given', byteOffset)
    }
    buffer = new SharedArrayBuffer(byteLength)
    byteOffset = 0
  } else {
    if (!isMemory(buffer)) {
      throw invalidType(`${name}.buffer`, 'a SharedArrayBuffer', buffer)
    }
    if (byteOffset === undefined) byteOffset = 0
    if (typeof byteOffset !== 'number' || !Number.isInteger(byteOffset) || byteOffset < 0) {
      throw outOfRange(`${name}.byteOffset`, 'a non-negative integer', byteOffset)
    }
    if (byteOffset % 8 !== 0) {
      throw outOfRange(`${name}.byteOffset`, `a multiple of 8 (${who} memory is 8-byte aligned)`, byteOffset)
    }
    if (byteLength > buffer.byteLength) {
      const err = new RangeError(`The "${name}.byteOffset" argument is out of range: ${article(who)} needs ${byteLength} bytes, ` +
        `more than the whole buffer (${buffer.byteLength} bytes). Received ${byteOffset}`)
      err.code = 'ERR_OUT_OF_RANGE'
      throw err
    }
    if (byteOffset + byteLength > buffer.byteLength) {
      throw outOfRange(`${name}.byteOffset`,
        `<= ${buffer.byteLength - byteLength} (${who} needs ${byteLength} bytes; the buffer has ${buffer.byteLength})`,
        byteOffset)
    }
  }
  return { buffer, byteOffset, i32: new Int32Array(buffer, byteOffset, byteLength / 4) }
}

// A handle received from another thread ({ buffer, byteOffset }), for
// X.from(): the buffer must be a SharedArrayBuffer (a fresh one would
// attach to nothing). The error says what the handle is instead.
function handleOf (who, handle) {
  if (handle === null || typeof handle !== 'object') {
    throw invalidType('handle', `${article(who)} or an object with its buffer and byteOffset`, handle)
  }
  const { buffer, byteOffset, byteLength } = handle
  if (!isMemory(buffer)) {
    const err = invalidType('handle.buffer', 'a SharedArrayBuffer', buffer)
    err.message += '. ' + (isAnyArrayBuffer(buffer) ? spaceHint(who) : handleHint(who, handle))
    throw err
  }
  // byteLength: the size the maker posted, where the size is a parameter
  // (lib/kind.js, sizeAgrees).
  return { buffer, byteOffset, byteLength }
}

// A plain ArrayBuffer where a handle's buffer should be: what a space's
// object becomes when posted to another thread (a space's memory is mapped
// per thread, and postMessage copies it).
function spaceHint (who) {
  const method = who === 'RWLock' ? 'rwlock' : who[0].toLowerCase() + who.slice(1)
  return `If it is ${article(who)} of a shared space (openShared), it cannot be posted to another thread: ` +
    'postMessage copies the space\'s memory. Open the space in that thread and get the object by its key: ' +
    `openShared(name).${method}(key, ...). Otherwise make the ${who} over a SharedArrayBuffer`
}

// What to pass instead of a handle without a buffer.
function handleHint (who, handle) {
  const plain = `Pass the ${who} itself (postMessage and workerData copy its buffer and byteOffset) or { buffer, byteOffset }`
  if (isAnyArrayBuffer(handle)) {
    return `${who}.from() takes the ${who} or { buffer, byteOffset }, not the bare buffer: pass { buffer: sab, byteOffset } with the byteOffset the ${who} was made at`
  }
  // A handle one level down ({ pool } posted where pool was meant)? Looking
  // must not throw over the error being reported: a Proxy or a getter may.
  try {
    for (const key of Object.keys(handle)) {
      const v = handle[key]
      if (v !== null && typeof v === 'object' && !ArrayBuffer.isView(v) && isSharedArrayBuffer(v.buffer)) {
        return `handle.${key} looks like one: did you mean ${who}.from(handle.${key})? ${plain}`
      }
    }
  } catch {}
  return plain
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
  if (options === null || typeof options !== 'object') throw notCallOptions(options)
  const { timeout, signal, ref = true } = options
  if (signal !== undefined && !isAbortSignal(signal)) {
    throw invalidType('options.signal', 'an AbortSignal', signal)
  }
  if (typeof ref !== 'boolean') throw invalidType('options.ref', 'a boolean', ref)
  const t = parseTimeout(timeout, 'options.timeout')
  return { timeout: t, signal: signal === undefined ? undefined : ownSignal(signal), ref }
}

module.exports = {
  backendOf,
  isMemory,
  OK,
  NOT_EQUAL,
  TIMED_OUT,
  OWNER_DEAD,
  WATCH_ANY,
  ASYNC_REF,
  ASYNC_HANDLE,
  memoryOf,
  notOptions,
  madeAs,
  article,
  handleOf,
  parseTimeout,
  parseAsyncOptions,
  isAbortSignal,
  ownSignal,
  SabsyncError,
  invalidType,
  outOfRange
}
