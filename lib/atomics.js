'use strict'
// wait / waitAsync / notify / waiters: the Atomics waiting operations, on
// sabsync's parking lot.
//
// The ECMAScript specification is the contract (sections Atomics.wait,
// Atomics.waitAsync, Atomics.notify, DoWait, ValidateIntegerTypedArray,
// ValidateAtomicAccess). Each step below is done in the spec's order, with
// the spec's conversions, so that user code observes the same calls and the
// same errors. Typed-array facts are read through the intrinsic getters, so
// an own `buffer` or `length` property on the array cannot fool us.

const { isSharedArrayBuffer, isProxy } = require('util').types
const native = require('./native')
const errors = require('./errors')
const { addressOf, seen, counts, bucketOf } = require('./lot')
const { isAbortSignal, ownSignal } = require('./abort')
const { LOCAL, backendOf, isMemory, RESULTS } = require('./backend')

const TypedArrayPrototype = Object.getPrototypeOf(Int32Array.prototype)
const getter = name => Object.getOwnPropertyDescriptor(TypedArrayPrototype, name).get
const taTag = getter(Symbol.toStringTag)
const taBuffer = getter('buffer')
const taLength = getter('length')
const taAt = TypedArrayPrototype.at

// The errors name the argument and describe what was received. The spec's
// algorithms (ValidateTypedArray, ToIndex, ...) never read a property of the
// argument before they throw, so neither may the description: reading
// `constructor` would run a getter or a Proxy trap, an observable side effect
// (and a throwing getter would change the error). `received` hands errors.js
// a stand-in built from internal slots and plain data properties only.
function received (value) {
  if (value === null || typeof value !== 'object') return value
  let name = taTag.call(value) // a typed array's own kind, whatever its prototype
  if (name === undefined) name = ownConstructorName(value)
  return name ? { constructor: { name } } : Object.create(null)
}

function ownConstructorName (object) {
  try {
    for (let o = object, depth = 0; o !== null && depth < 8; depth++) {
      if (isProxy(o)) return ''
      const d = Object.getOwnPropertyDescriptor(o, 'constructor')
      if (d !== undefined) {
        const c = d.value // undefined for an accessor: not called
        if (typeof c !== 'function' || isProxy(c)) return ''
        const n = Object.getOwnPropertyDescriptor(c, 'name')
        return n !== undefined && typeof n.value === 'string' ? n.value : ''
      }
      o = Object.getPrototypeOf(o) // o is no Proxy: runs no user code
    }
  } catch {
    // an exotic object that throws on inspection (a namespace in its TDZ)
  }
  return ''
}

const invalidType = (name, expected, value) => errors.invalidType(name, expected, received(value))
const outOfRange = (name, expected, value) => errors.outOfRange(name, expected, received(value))

// The conversions, done here step by step so that a failing one throws an
// error that names the argument, while user code (@@toPrimitive, valueOf,
// toString) is called exactly as the spec's ToPrimitive calls it.
const { apply } = Reflect
const TO_PRIMITIVE = Symbol.toPrimitive
const isObject = value => value !== null && (typeof value === 'object' || typeof value === 'function')

// ToPrimitive(input, number) for an Object input (7.1.1), with
// OrdinaryToPrimitive (7.1.1.1) for hint number: valueOf, then toString.
function toPrimitive (name, input) {
  const exotic = input[TO_PRIMITIVE] // GetMethod: one Get
  if (exotic !== undefined && exotic !== null) {
    if (typeof exotic !== 'function') {
      throw invalidType(name, 'an object whose [Symbol.toPrimitive] is a function', input)
    }
    const result = apply(exotic, input, ['number'])
    if (isObject(result)) throw invalidType(name, 'convertible to a primitive', input)
    return result
  }
  const valueOf = input.valueOf
  if (typeof valueOf === 'function') {
    const result = apply(valueOf, input, [])
    if (!isObject(result)) return result
  }
  const toString = input.toString
  if (typeof toString === 'function') {
    const result = apply(toString, input, [])
    if (!isObject(result)) return result
  }
  throw invalidType(name, 'convertible to a primitive', input)
}

// ToNumber (7.1.4): a Symbol or a BigInt is a TypeError.
function toNumber (name, value) {
  if (isObject(value)) value = toPrimitive(name, value)
  if (typeof value === 'symbol' || typeof value === 'bigint') {
    throw invalidType(name, 'a number (or convertible to one)', value)
  }
  return +value
}

// RESULTS (lib/backend.js): result names by code. A copy: the addon's
// frozen array (made element by element through Node-API) is one whose
// indexed loads optimized code leaves to the keyed-load IC, a call per wait
// (2.9% of the one-CPU round trip's samples).
const { NOT_EQUAL, ASYNC_REF } = native.constants
const MAX_SAFE = Number.MAX_SAFE_INTEGER

// ValidateIntegerTypedArray(typedArray, waitable = true). Answers the
// element size; leaves the array's length (TypedArrayLength of the record)
// in `validLength`, read before any user code runs.
let validLength = 0
function validateWaitable (typedArray) {
  const tag = taTag.call(typedArray)
  if (tag !== 'Int32Array' && tag !== 'BigInt64Array') {
    throw invalidType('typedArray', 'an Int32Array or BigInt64Array', typedArray)
  }
  validLength = taLength.call(typedArray)
  if (validLength === 0) {
    // Length 0 is also what a detached or out-of-bounds array reports; the
    // spec's ValidateTypedArray rejects those with a TypeError. `at` runs
    // that same validation.
    try {
      taAt.call(typedArray, 0)
    } catch {
      throw invalidType('typedArray', 'an attached, in-bounds typed array', typedArray)
    }
  }
  return tag === 'Int32Array' ? 4 : 8
}

// A shared space's buffer (lib/space.js) counts as shared: its cells are
// waited on in the space's queues, from any process.
function isShared (buffer) {
  return seen(buffer) || isMemory(buffer)
}

// ToIndex, then the bounds check of ValidateAtomicAccess. `length` is the
// one read before ToIndex (ValidateAtomicAccess step 1): an index whose
// valueOf grows, shrinks or detaches the buffer is still checked against it.
// (V8's built-ins read the length after ToIndex; the spec is the contract.)
function toAccessIndex (index, length) {
  let n = toNumber('index', index) // ToIntegerOrInfinity: NaN is 0
  n = Number.isNaN(n) ? 0 : Math.trunc(n)
  if (n < 0 || n > MAX_SAFE) throw outOfRange('index', `an integer >= 0 and <= ${MAX_SAFE}`, n)
  if (n >= length) throw outOfRange('index', `< ${length} (the typed array's length)`, n)
  return n + 0 // -0 -> +0
}

// ToBigInt64 (7.1.16): ToBigInt (7.1.13), then modulo 2^64, as a
// BigInt64Array element store does it. ToBigInt: ToPrimitive(number), then
// undefined, null, a Number or a Symbol is a TypeError; a String that is no
// StringIntegerLiteral is a SyntaxError (the engine's, from the store).
const scratch64 = new BigInt64Array(1)
function toBigInt64 (value) {
  if (isObject(value)) value = toPrimitive('value', value)
  const type = typeof value
  if (value === undefined || value === null || type === 'number' || type === 'symbol') {
    throw invalidType('value', 'a BigInt (or convertible to one)', value)
  }
  scratch64[0] = value // a primitive: no user code runs here
  return scratch64[0]
}

// Step 9 of DoWait: NaN and +Infinity wait forever; below 0 is 0.
function toTimeout (timeout) {
  const q = toNumber('timeout', timeout)
  if (Number.isNaN(q)) return Infinity
  return q > 0 ? q : 0
}

// A one-entry cache of the last shared array notify or wait saw: a shared
// array's type, byte offset and buffer never change, so notify and wait on
// the same array can skip re-validating it and the WeakMap lookup of its
// base address.
const sabGrowable = (Object.getOwnPropertyDescriptor(SharedArrayBuffer.prototype, 'growable') || {}).get
let lastArray = Object.freeze({}) // no caller can pass this object
let lastSize = 0
let lastAddr0 = 0
let lastLength = 0
let lastTracks = false
let lastBackend = LOCAL // the backend of lastArray's buffer (lib/backend.js)

function remember (typedArray, buffer, size) {
  const addr0 = addressOf(typedArray, buffer, 0, size)
  lastArray = typedArray
  lastSize = size
  lastAddr0 = addr0
  lastBackend = backendOf(buffer)
  // A fixed-length array's length never changes; one on a growable buffer
  // may be length-tracking, so its length is read each time.
  // (A shared space's buffer may be an ArrayBuffer: never growable.)
  lastTracks = sabGrowable !== undefined && isSharedArrayBuffer(buffer) && sabGrowable.call(buffer)
  lastLength = taLength.call(typedArray)
  return addr0
}

// Steps 1-9 of DoWait. Answers [i, v, t, size].
function doWaitArgs (typedArray, index, value, timeout) {
  const size = validateWaitable(typedArray)
  const length = validLength
  if (!isShared(taBuffer.call(typedArray))) {
    throw invalidType('typedArray', 'backed by a SharedArrayBuffer', typedArray)
  }
  const i = toAccessIndex(index, length)
  const v = size === 4 ? toNumber('value', value) | 0 : toBigInt64(value) // ToInt32 / ToBigInt64
  const t = toTimeout(timeout)
  return [i, v, t]
}

function parseWaitAsyncOptions (options) {
  if (options === undefined) return { signal: undefined, ref: true }
  if (options === null || typeof options !== 'object') {
    throw invalidType('options', 'an object', options)
  }
  const { signal, ref = true } = options
  if (signal !== undefined && !isAbortSignal(signal)) {
    throw invalidType('options.signal', 'an AbortSignal', signal)
  }
  if (typeof ref !== 'boolean') throw invalidType('options.ref', 'a boolean', ref)
  return { signal: signal === undefined ? undefined : ownSignal(signal), ref }
}

// waitAsync, every case: steps 1-9 of DoWait, then the wait. A shared
// Int32Array not in a shared space is remembered (as notify does), for
// waitAsync's short path.
function waitAsyncFull (typedArray, index, value, timeout, options) {
  const [i, v, t] = doWaitArgs(typedArray, index, value, timeout)
  const { signal, ref } = parseWaitAsyncOptions(options)
  // Answered synchronously, as the spec does, when the value differs or
  // the timeout is 0. Reading here first is one more atomic load: the
  // answer is one the spec allows (the cell held another value then).
  if (Atomics.load(typedArray, i) !== v) return { async: false, value: 'not-equal' }
  if (t === 0) return { async: false, value: 'timed-out' }
  if (signal !== undefined && signal.aborted) {
    return { async: true, value: Promise.reject(signal.reason) }
  }
  const buffer = taBuffer.call(typedArray)
  const size = taTag.call(typedArray) === 'Int32Array' ? 4 : 8
  if (typedArray !== lastArray) remember(typedArray, buffer, size)
  const p = lastBackend.waitCellAsync(typedArray, i, size, v, t, signal, ref)
  return typeof p === 'string' ? { async: false, value: p } : { async: true, value: p }
}

const api = {
  wait (typedArray, index, value, timeout) {
    // The array notify or wait saw last (see `remember`), if it is a shared
    // Int32Array outside any space, with primitive arguments that need no
    // conversion that could run user code or throw: straight to the native
    // wait, which the steps below would reach with the same values.
    if (typedArray === lastArray && lastSize === 4 && lastBackend === LOCAL &&
        typeof index === 'number' && (index | 0) === index && index >= 0 &&
        index < (lastTracks ? taLength.call(typedArray) : lastLength) &&
        typeof value === 'number' && (timeout === undefined || typeof timeout === 'number')) {
      const t = timeout === undefined || Number.isNaN(timeout) ? Infinity : timeout > 0 ? timeout : 0
      return RESULTS[native.wait(typedArray, index + 0, value | 0, t)]
    }
    const [i, v, t] = doWaitArgs(typedArray, index, value, timeout)
    const buffer = taBuffer.call(typedArray)
    const size = taTag.call(typedArray) === 'Int32Array' ? 4 : 8
    if (typedArray !== lastArray) remember(typedArray, buffer, size)
    return lastBackend.waitCell(typedArray, i, size, v, t)
  },

  waitAsync (typedArray, index, value, timeout) {
    // The short path: the call most programs make, on the shared Int32Array
    // that notify or waitAsync saw last (not in a shared space), with a
    // number index in range and a number value, no timeout, no options.
    // Steps 1-9 of DoWait then run no user code and cannot throw, so they
    // reduce to these checks; and this function is small enough for the
    // engine to inline into a hot caller, where the result object is often
    // never made. Anything else takes waitAsyncFull.
    if (typedArray === lastArray && lastSize === 4 && lastBackend === LOCAL &&
        timeout === undefined && arguments.length < 5 &&
        typeof index === 'number' && typeof value === 'number' && (index | 0) === index && index >= 0 &&
        index < (lastTracks ? taLength.call(typedArray) : lastLength)) {
      const i = index + 0 // -0 -> +0
      const v = value | 0 // ToInt32
      if (Atomics.load(typedArray, i) !== v) return { async: false, value: 'not-equal' }
      const r = native.waitAsync(typedArray, i, v, Infinity, ASYNC_REF)
      if (r === NOT_EQUAL) return { async: false, value: 'not-equal' }
      return { async: true, value: r }
    }
    return waitAsyncFull(typedArray, index, value, timeout, arguments[4])
  },

  notify (typedArray, index, count) {
    let size, length, addr0
    if (typedArray === lastArray) {
      // Seen last time: a shared Int32Array/BigInt64Array, which can be
      // neither detached nor shrunk, so step 1 cannot throw and has no
      // other effect; only a length-tracking array's length can grow.
      size = lastSize
      addr0 = lastAddr0
      length = lastTracks ? taLength.call(typedArray) : lastLength
    } else {
      size = validateWaitable(typedArray)
      length = validLength
    }
    const i = typeof index === 'number' && (index | 0) === index && index >= 0 && index < length
      ? index + 0
      : toAccessIndex(index, length)
    let c = Infinity
    if (count !== undefined) {
      c = typeof count === 'number' ? count : toNumber('count', count) // ToIntegerOrInfinity
      c = Number.isNaN(c) ? 0 : Math.trunc(c)
      if (c < 0) c = 0
    }
    if (typedArray !== lastArray) {
      const buffer = taBuffer.call(typedArray)
      if (!isShared(buffer)) return 0
      addr0 = remember(typedArray, buffer, size)
    }
    const addr = addr0 + i * size
    // This process's memory, inline (LOCAL.notifyAt): nobody waiting in the
    // cell's bucket, no native call.
    if (lastBackend === LOCAL) {
      if (counts !== null && Atomics.add(counts, bucketOf(addr), 0) === 0) return 0
      return native.notify(addr, c)
    }
    return lastBackend.notifyAt(addr, c)
  },

  waiters (typedArray, index) {
    const size = validateWaitable(typedArray)
    const i = toAccessIndex(index, validLength)
    const buffer = taBuffer.call(typedArray)
    if (!isShared(buffer)) return 0
    return backendOf(buffer).waitersAt(addressOf(typedArray, buffer, i, size))
  }
}

module.exports = {
  wait: api.wait,
  waitAsync: api.waitAsync,
  notify: api.notify,
  waiters: api.waiters
}
