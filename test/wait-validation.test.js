'use strict'
// Argument errors: every TypeError / RangeError sabsync throws for a bad
// argument names it. Then a seeded fuzz: thousands of calls of notify, wait
// (timeouts that convert to 0 or throw only, so nothing blocks) and waitAsync
// with random arguments, including objects whose conversion throws or
// mutates the array, compared with the built-in Atomics and with a reference
// model written from the spec's steps: same answer (or same error type), same
// user code called in the same order. Afterwards nothing is left waiting.

const t = require('tap')
const { isSharedArrayBuffer } = require('util').types
const sabsync = require('..')

const { TA_PROTO, taGetter, taTag, detach, HAS_RESIZABLE, HAS_GROWABLE, noteMissingBuffers, Poison, lotWaiters } = require('./helpers')
const taBuffer = taGetter('buffer')
const taLength = taGetter('length')
noteMissingBuffers(t)

function named (t, fn, type, arg, msg) {
  let err
  try {
    fn()
  } catch (e) {
    err = e
  }
  t.ok(err instanceof type, `${msg}: throws ${type.name}` + (err ? ` (got ${err.constructor.name}: ${err.message})` : ' (nothing thrown)'))
  if (err) t.match(err.message, `"${arg}"`, `${msg}: the message names "${arg}"`)
}

const shared32 = () => new Int32Array(new SharedArrayBuffer(16))
const shared64 = () => new BigInt64Array(new SharedArrayBuffer(32))

t.test('argument errors name the argument', async t => {
  const badArrays = {
    undefined: () => undefined,
    null: () => null,
    number: () => 1,
    symbol: () => Symbol('x'),
    'plain object': () => ({}),
    array: () => [1, 2],
    SharedArrayBuffer: () => new SharedArrayBuffer(16),
    Float64Array: () => new Float64Array(new SharedArrayBuffer(16)),
    Uint32Array: () => new Uint32Array(new SharedArrayBuffer(16)),
    BigUint64Array: () => new BigUint64Array(new SharedArrayBuffer(16)),
    Uint8Array: () => new Uint8Array(new SharedArrayBuffer(16)),
    Proxy: () => new Proxy(shared32(), {}),
    'detached Int32Array': () => { const ta = new Int32Array(4); detach(ta.buffer); return ta },
    ...(HAS_RESIZABLE
      ? {
          'out-of-bounds Int32Array': () => {
            const rab = new ArrayBuffer(16, { maxByteLength: 32 })
            const ta = new Int32Array(rab, 8, 2)
            rab.resize(4)
            return ta
          }
        }
      : {}),
    'object whose constructor getter throws': () => ({ get constructor () { throw new Poison('constructor') } })
  }
  for (const [label, make] of Object.entries(badArrays)) {
    named(t, () => sabsync.wait(make(), 0, 0, 0), TypeError, 'typedArray', `wait(${label})`)
    named(t, () => sabsync.waitAsync(make(), 0, 0, 0), TypeError, 'typedArray', `waitAsync(${label})`)
    named(t, () => sabsync.notify(make(), 0), TypeError, 'typedArray', `notify(${label})`)
    named(t, () => sabsync.waiters(make(), 0), TypeError, 'typedArray', `waiters(${label})`)
  }
  const nonShared = [() => new Int32Array(4), () => new BigInt64Array(4)]
  if (HAS_RESIZABLE) nonShared.push(() => new Int32Array(new ArrayBuffer(16, { maxByteLength: 32 })))
  for (const make of nonShared) {
    named(t, () => sabsync.wait(make(), 0, 0, 0), TypeError, 'typedArray', `wait(non-shared ${taTag.call(make())})`)
    named(t, () => sabsync.waitAsync(make(), 0, 0, 0), TypeError, 'typedArray', `waitAsync(non-shared ${taTag.call(make())})`)
  }

  const ranges = { '-1': -1, 4: 4, 100: 100, '2**53': 2 ** 53, Infinity, '-Infinity': -Infinity, '-1.5': -1.5, "'4'": '4', 'valueOf -> 9': { valueOf: () => 9 } }
  const indexTypes = { Symbol: Symbol('i'), BigInt: 1n, 'Object(1n)': Object(1n), 'valueOf -> Symbol': { valueOf: () => Symbol('i') }, 'valueOf -> {}, toString -> {}': { valueOf: () => ({}), toString: () => ({}) }, '@@toPrimitive not callable': { [Symbol.toPrimitive]: 1 }, '@@toPrimitive -> {}': { [Symbol.toPrimitive]: () => ({}) } }
  for (const [kind, mk, zero] of [['Int32Array', shared32, 0], ['BigInt64Array', shared64, 0n]]) {
    for (const [label, index] of Object.entries(ranges)) {
      named(t, () => sabsync.wait(mk(), index, zero, 0), RangeError, 'index', `${kind} wait index ${label}`)
      named(t, () => sabsync.waitAsync(mk(), index, zero, 0), RangeError, 'index', `${kind} waitAsync index ${label}`)
      named(t, () => sabsync.notify(mk(), index), RangeError, 'index', `${kind} notify index ${label}`)
      named(t, () => sabsync.notify(kind === 'Int32Array' ? new Int32Array(4) : new BigInt64Array(4), index), RangeError, 'index', `${kind} non-shared notify index ${label}`)
      named(t, () => sabsync.waiters(mk(), index), RangeError, 'index', `${kind} waiters index ${label}`)
    }
    for (const [label, index] of Object.entries(indexTypes)) {
      named(t, () => sabsync.wait(mk(), index, zero, 0), TypeError, 'index', `${kind} wait index ${label}`)
      named(t, () => sabsync.waitAsync(mk(), index, zero, 0), TypeError, 'index', `${kind} waitAsync index ${label}`)
      named(t, () => sabsync.notify(mk(), index), TypeError, 'index', `${kind} notify index ${label}`)
      named(t, () => sabsync.waiters(mk(), index), TypeError, 'index', `${kind} waiters index ${label}`)
    }
    const timeouts = { Symbol: Symbol('t'), BigInt: 1n, 'valueOf -> 1n': { valueOf: () => 1n }, 'valueOf -> {}, toString -> {}': { valueOf: () => ({}), toString: () => ({}) } }
    for (const [label, timeout] of Object.entries(timeouts)) {
      named(t, () => sabsync.wait(mk(), 0, zero, timeout), TypeError, 'timeout', `${kind} wait timeout ${label}`)
      named(t, () => sabsync.waitAsync(mk(), 0, zero, timeout), TypeError, 'timeout', `${kind} waitAsync timeout ${label}`)
    }
    const counts = { Symbol: Symbol('c'), BigInt: 1n, 'valueOf -> Symbol': { valueOf: () => Symbol('c') }, '@@toPrimitive -> {}': { [Symbol.toPrimitive]: () => ({}) } }
    for (const [label, count] of Object.entries(counts)) {
      named(t, () => sabsync.notify(mk(), 0, count), TypeError, 'count', `${kind} notify count ${label}`)
      named(t, () => sabsync.notify(kind === 'Int32Array' ? new Int32Array(4) : new BigInt64Array(4), 0, count), TypeError, 'count', `${kind} non-shared notify count ${label}`)
    }
  }
  const int32Values = { BigInt: 1n, Symbol: Symbol('v'), 'valueOf -> 1n': { valueOf: () => 1n }, 'Object(1n)': Object(1n), 'no primitive': { valueOf: () => ({}), toString: () => ({}) } }
  for (const [label, value] of Object.entries(int32Values)) {
    named(t, () => sabsync.wait(shared32(), 0, value, 0), TypeError, 'value', `Int32Array wait value ${label}`)
    named(t, () => sabsync.waitAsync(shared32(), 0, value, 0), TypeError, 'value', `Int32Array waitAsync value ${label}`)
  }
  const bigValues = { 0: 0, NaN, undefined, null: null, Symbol: Symbol('v'), 'valueOf -> 1': { valueOf: () => 1 }, 'Object(1)': Object(1), 'no primitive': { valueOf: () => ({}), toString: () => ({}) } }
  for (const [label, value] of Object.entries(bigValues)) {
    named(t, () => sabsync.wait(shared64(), 0, value, 0), TypeError, 'value', `BigInt64Array wait value ${label}`)
    named(t, () => sabsync.waitAsync(shared64(), 0, value, 0), TypeError, 'value', `BigInt64Array waitAsync value ${label}`)
  }
  // A String that is no BigInt literal is ToBigInt's SyntaxError, as in Atomics.
  t.throws(() => sabsync.wait(shared64(), 0, 'abc', 0), SyntaxError, 'BigInt64Array value "abc" is a SyntaxError')

  // waitAsync's own 5th argument.
  const options = {
    null: null,
    number: 1,
    string: 'ref',
    true: true,
    symbol: Symbol('o'),
    function: () => {}
  }
  for (const [label, o] of Object.entries(options)) {
    named(t, () => sabsync.waitAsync(shared32(), 0, 1, 0, o), TypeError, 'options', `waitAsync options ${label}`)
  }
  for (const [label, signal] of Object.entries({ null: null, number: 1, 'plain object': {}, EventTarget: new EventTarget(), AbortController: new AbortController() })) {
    named(t, () => sabsync.waitAsync(shared32(), 0, 1, 0, { signal }), TypeError, 'options.signal', `waitAsync options.signal ${label}`)
  }
  for (const [label, ref] of Object.entries({ null: null, number: 1, string: 'true', object: {}, symbol: Symbol('r') })) {
    named(t, () => sabsync.waitAsync(shared32(), 0, 1, 0, { ref }), TypeError, 'options.ref', `waitAsync options.ref ${label}`)
  }
  // Valid options change nothing about the synchronous answers.
  const ac = new AbortController()
  for (const o of [undefined, {}, { ref: false }, { ref: true }, { signal: ac.signal }, { signal: undefined, ref: undefined }]) {
    t.strictSame(sabsync.waitAsync(shared32(), 0, 1, 0, o), { async: false, value: 'not-equal' })
    t.strictSame(sabsync.waitAsync(shared32(), 0, 0, 0, o), { async: false, value: 'timed-out' })
  }
})

// ---------------------------------------------------------------- the fuzz

function mulberry32 (seed) {
  return function () {
    seed = (seed + 0x6D2B79F5) | 0
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

// Primitive tables. Timeouts only convert to 0 (or below), or throw.
const SYM = 'SYMBOL'
const prim = v => v === SYM ? Symbol('fuzz') : v
const INDEXES = [-1, -0, 0, 0.5, 1, 1.9, 2, 3, 4, 7, -0.5, -1.5, NaN, Infinity, -Infinity, 2 ** 53, 2 ** 53 - 1, 2 ** 32, 1e-7,
  '1', '', ' 2 ', '0x3', 'abc', '-0', '1e1', '-1', undefined, null, true, false, SYM, 1n, -1n]
const VALUES = [0, 1, -1, 2, 3, 0.5, 1.9, -0, NaN, Infinity, 2 ** 32 + 1, '0', '1', '', '0x1', 'abc', '1n', '2', '-1', ' 3 ',
  undefined, null, true, false, SYM, 0n, 1n, 2n, -1n, 2n ** 64n + 1n, 2n ** 64n, 2n ** 63n]
const TIMEOUTS = [0, -0, -1, -0.5, -Infinity, -1e300, null, false, '', '0', '-3', ' -1 ', SYM, 0n, 1n]
const COUNTS = [undefined, 0, 1, 2, -1, 0.9, 1.9, NaN, Infinity, -Infinity, '2', 'abc', '', null, true, false, SYM, 1n, 0n]

const WRAPPERS = ['valueOf', 'valueOf', 'valueOf', 'toString', 'valueOfObject', 'toPrimitive', 'toPrimitive', 'toPrimitiveNotCallable', 'noPrimitive', 'proxy', 'proxy', 'array']
const EFFECTS = ['none', 'none', 'throw', 'store', 'grow', 'shrink', 'growRab', 'detach', 'reenter']
  .filter(e => (HAS_GROWABLE || e !== 'grow') && (HAS_RESIZABLE || (e !== 'shrink' && e !== 'growRab')))
// Effects that change the array's length while the index is converted: there
// V8 checks the index against the new length, the spec against the old one
// (ValidateAtomicAccess step 1), so Atomics is not the reference.
const LENGTH_EFFECTS = new Set(['grow', 'shrink', 'growRab', 'detach'])
// The fuzz sees that deviation through a growable or resizable buffer, or
// through a detach, where V8 has it for detached buffers too (Node 18's V8
// checks a detached buffer's index against the old length, as the spec does).
const V8_DEVIATES_ON_DETACH = (() => {
  const ta = new Int32Array(4)
  try {
    Atomics.notify(ta, { valueOf () { detach(ta.buffer); return 0 } }, 0)
    return false
  } catch (e) {
    return e instanceof RangeError
  }
})()
const DEVIATION_SEEABLE = HAS_GROWABLE || HAS_RESIZABLE || V8_DEVIATES_ON_DETACH

const ARRAYS = {
  i32: () => ({ ta: new Int32Array(new SharedArrayBuffer(16)) }),
  i64: () => ({ ta: new BigInt64Array(new SharedArrayBuffer(32)) }),
  i32off: () => ({ ta: new Int32Array(new SharedArrayBuffer(32), 8, 4) }),
  i32empty: () => ({ ta: new Int32Array(new SharedArrayBuffer(16), 16) }),
  gi32fixed: () => { const gsab = new SharedArrayBuffer(16, { maxByteLength: 64 }); return { gsab, ta: new Int32Array(gsab, 0, 4) } },
  gi32track: () => { const gsab = new SharedArrayBuffer(16, { maxByteLength: 64 }); return { gsab, ta: new Int32Array(gsab) } },
  gi64track: () => { const gsab = new SharedArrayBuffer(32, { maxByteLength: 64 }); return { gsab, ta: new BigInt64Array(gsab) } },
  gi32trackoff: () => { const gsab = new SharedArrayBuffer(16, { maxByteLength: 64 }); return { gsab, ta: new Int32Array(gsab, 8) } },
  ni32: () => { const ab = new ArrayBuffer(16); return { ab, ta: new Int32Array(ab) } },
  ni64: () => { const ab = new ArrayBuffer(32); return { ab, ta: new BigInt64Array(ab) } },
  ri32track: () => { const rab = new ArrayBuffer(16, { maxByteLength: 32 }); return { ab: rab, rab, ta: new Int32Array(rab) } },
  ri32fixed: () => { const rab = new ArrayBuffer(16, { maxByteLength: 32 }); return { ab: rab, rab, ta: new Int32Array(rab, 0, 4) } },
  ri64fixedoff: () => { const rab = new ArrayBuffer(32, { maxByteLength: 32 }); return { ab: rab, rab, ta: new BigInt64Array(rab, 16, 2) } },
  det32: () => { const ab = new ArrayBuffer(16); const ta = new Int32Array(ab); detach(ab); return { ta, detached: true } },
  u32: () => ({ ta: new Uint32Array(new SharedArrayBuffer(16)) }),
  f64: () => ({ ta: new Float64Array(new SharedArrayBuffer(32)) }),
  u8: () => ({ ta: new Uint8Array(new SharedArrayBuffer(16)) }),
  bu64: () => ({ ta: new BigUint64Array(new SharedArrayBuffer(32)) }),
  nu32: () => ({ ta: new Uint32Array(4) }),
  plain: () => ({ ta: { length: 4 } }),
  undef: () => ({ ta: undefined }),
  num: () => ({ ta: 42 }),
  arr: () => ({ ta: [0, 0, 0, 0] }),
  dv: () => ({ ta: new DataView(new SharedArrayBuffer(16)) }),
  proxy: () => ({ ta: new Int32Array(new SharedArrayBuffer(16)), proxied: true })
}
const GROWABLE_ARRAYS = ['gi32fixed', 'gi32track', 'gi64track', 'gi32trackoff']
const RESIZABLE_ARRAYS = ['ri32track', 'ri32fixed', 'ri64fixedoff']
const available = k => (HAS_GROWABLE || !GROWABLE_ARRAYS.includes(k)) && (HAS_RESIZABLE || !RESIZABLE_ARRAYS.includes(k))
const ARRAY_KINDS = Object.keys(ARRAYS).filter(available)
// Valid arrays more often: most calls should get past the first check.
const VALID = ['i32', 'i64', 'i32off', 'gi32fixed', 'gi32track', 'gi64track', 'gi32trackoff'].filter(available)
const NON_SHARED = ['ni32', 'ni64', 'ri32track', 'ri32fixed', 'ri64fixedoff'].filter(available)
const BIG = new Set(['i64', 'gi64track', 'ni64', 'ri64fixedoff', 'bu64'])
const ARRAY_WEIGHTS = ARRAY_KINDS.flatMap(k => VALID.includes(k) ? Array(8).fill(k) : NON_SHARED.includes(k) ? [k, k, k] : [k])

function pick (rng, list) { return list[Math.floor(rng() * list.length)] }

// An argument plan: plain data, so that each run builds its own objects.
// Half of the time a plausible value (`good`), else anything from `table`;
// either one bare or wrapped in an object that converts to it.
function planArg (rng, table, good, { timeout = false } = {}) {
  const choose = () => rng() < 0.5 ? pick(rng, good) : pick(rng, table)
  if (rng() < 0.6) return { prim: choose() }
  let wrapper = pick(rng, WRAPPERS)
  if (timeout && (wrapper === 'array' || wrapper === 'proxy')) wrapper = 'valueOf'
  let ret = choose()
  if (wrapper === 'array' && ret === SYM) ret = 1 // [Symbol()].toString() throws from join
  return { wrapper, ret, effect: pick(rng, EFFECTS), k: Math.floor(rng() * 4), x: Math.floor(rng() * 4) - 1 }
}

function plan (rng) {
  const fn = pick(rng, ['notify', 'notify', 'wait', 'waitAsync', 'waitAsync'])
  const array = pick(rng, ARRAY_WEIGHTS)
  const p = {
    fn,
    array,
    cells: [0, 1, 2, 3].map(() => Math.floor(rng() * 4) - 1),
    index: planArg(rng, INDEXES, [0, 1, 2, 3]),
    value: planArg(rng, VALUES, BIG.has(array) ? [-1n, 0n, 1n, 2n] : [-1, 0, 1, 2]),
    timeout: planArg(rng, TIMEOUTS, [0, -1], { timeout: true }),
    count: planArg(rng, COUNTS, [undefined, 0, 1, Infinity]),
    countMissing: rng() < 0.1,
    options: pick(rng, [undefined, undefined, {}, { ref: false }, { ref: true }, 'signal'])
  }
  return p
}

function trapLogger (log, name, target) {
  const handler = {}
  for (const trap of Object.getOwnPropertyNames(Reflect)) {
    handler[trap] = (...args) => {
      log.push(`${name}:${trap}` + (trap === 'get' || trap === 'has' ? ' ' + String(args[1]) : ''))
      return Reflect[trap](...args)
    }
  }
  return new Proxy(target, handler)
}

function outcome (fn) {
  try {
    const r = fn()
    if (r !== null && typeof r === 'object') {
      return { result: { keys: Reflect.ownKeys(r), async: r.async, value: r.value instanceof Promise ? 'Promise' : r.value } }
    }
    return { result: Object.is(r, -0) ? '-0' : r }
  } catch (e) {
    if (e instanceof Poison) return { error: 'Poison:' + e.tag }
    return { error: e.constructor.name, message: e.message, arg: e.arg }
  }
}

// Builds the environment of one run: the array and the argument objects,
// whose conversions log to `log` and act on this run's array.
function materialize (p, lib, log) {
  const env = ARRAYS[p.array]()
  const raw = env.ta
  const isTA = taTag.call(raw) !== undefined
  if (isTA && !env.detached) {
    const big = taTag.call(raw).startsWith('Big')
    for (let k = 0; k < p.cells.length && k < raw.length; k++) raw[k] = big ? BigInt(p.cells[k]) : p.cells[k]
  }
  const ta = env.proxied ? trapLogger(log, 'ta', raw) : raw
  const other = new Int32Array(new SharedArrayBuffer(4))
  const effects = {
    none () {},
    throw (name) { throw new Poison(name) },
    store (name, a) {
      if (!isTA) return
      const big = taTag.call(raw).startsWith('Big')
      raw[a.k] = big ? BigInt(a.x) : a.x // an invalid index is ignored
    },
    grow () {
      if (env.gsab && env.gsab.byteLength < env.gsab.maxByteLength) env.gsab.grow(Math.min(env.gsab.byteLength + 16, env.gsab.maxByteLength))
    },
    shrink () {
      if (env.rab && !env.detached) env.rab.resize(Math.max(0, env.rab.byteLength - 12))
    },
    growRab () {
      if (env.rab && !env.detached) env.rab.resize(env.rab.maxByteLength)
    },
    detach () {
      if (env.ab && !env.detached) {
        env.detached = true
        detach(env.ab)
      }
    },
    reenter (name) {
      log.push(name + ' inner notify ' + JSON.stringify(outcome(() => lib.notify(other, 0, 1))))
      log.push(name + ' inner wait ' + JSON.stringify(outcome(() => lib.wait(other, 0, 1, 0))))
    }
  }
  const make = (name, a) => {
    if ('prim' in a) return prim(a.prim)
    const act = () => {
      effects[a.effect](name, a)
      return prim(a.ret)
    }
    switch (a.wrapper) {
      case 'valueOf': return { valueOf () { log.push(name + ' valueOf'); return act() } }
      case 'toString': return { valueOf: undefined, toString () { log.push(name + ' toString'); return act() } }
      case 'valueOfObject': return {
        valueOf () { log.push(name + ' valueOf'); return {} },
        toString () { log.push(name + ' toString'); return act() }
      }
      case 'toPrimitive': return {
        [Symbol.toPrimitive] (hint) { log.push(name + ' toPrimitive ' + hint); return act() },
        valueOf () { log.push(name + ' valueOf (not to be called)'); return 0 }
      }
      case 'toPrimitiveNotCallable': return { [Symbol.toPrimitive]: 1, valueOf () { log.push(name + ' valueOf'); return act() } }
      case 'noPrimitive': return {
        valueOf () { log.push(name + ' valueOf'); act(); return {} },
        toString () { log.push(name + ' toString'); return {} }
      }
      case 'proxy': return trapLogger(log, name, { valueOf () { log.push(name + ' valueOf'); return act() } })
      case 'array': return [prim(a.ret)]
    }
    throw new Error('unknown wrapper ' + a.wrapper)
  }
  return {
    raw,
    ta,
    index: make('index', p.index),
    value: make('value', p.value),
    timeout: make('timeout', p.timeout),
    count: make('count', p.count)
  }
}

// The reference: Atomics.wait / waitAsync / notify written from the spec's
// steps, with the engine's own ToNumber / ToBigInt. A timeout here never
// converts above 0, so no call waits and notify finds no waiter.
function as (arg, f) {
  try {
    return f()
  } catch (e) {
    if (e instanceof Poison) throw e
    e.arg = arg
    throw e
  }
}
function validateIntegerTypedArray (ta) { // waitable = true
  const name = taTag.call(ta)
  if (name === undefined) throw Object.assign(new TypeError(), { arg: 'typedArray' })
  try {
    TA_PROTO.entries.call(ta) // ValidateTypedArray: out of bounds or detached
  } catch {
    throw Object.assign(new TypeError(), { arg: 'typedArray' })
  }
  if (name !== 'Int32Array' && name !== 'BigInt64Array') throw Object.assign(new TypeError(), { arg: 'typedArray' })
  return name
}
function validateAtomicAccess (ta, index) {
  const length = taLength.call(ta) // step 1: before ToIndex
  const n = as('index', () => +index)
  const integer = Number.isNaN(n) ? 0 : Math.trunc(n)
  if (integer < 0 || integer > 2 ** 53 - 1) throw Object.assign(new RangeError(), { arg: 'index' })
  if (integer >= length) throw Object.assign(new RangeError(), { arg: 'index' })
  return integer
}
const model = {
  doWait (mode, ta, index, value, timeout) {
    const name = validateIntegerTypedArray(ta)
    if (!isSharedArrayBuffer(taBuffer.call(ta))) throw Object.assign(new TypeError(), { arg: 'typedArray' })
    const i = validateAtomicAccess(ta, index)
    const v = name === 'BigInt64Array' ? as('value', () => BigInt.asIntN(64, value)) : as('value', () => (+value) | 0)
    const q = as('timeout', () => +timeout)
    const t = Number.isNaN(q) || q === Infinity ? Infinity : q === -Infinity ? 0 : Math.max(q, 0)
    const w = Atomics.load(ta, i)
    if (v !== w) return mode === 'sync' ? 'not-equal' : { async: false, value: 'not-equal' }
    if (t !== 0) throw new Error('model: this call would wait')
    return mode === 'sync' ? 'timed-out' : { async: false, value: 'timed-out' }
  },
  wait (ta, index, value, timeout) { return model.doWait('sync', ta, index, value, timeout) },
  waitAsync (ta, index, value, timeout) { return model.doWait('async', ta, index, value, timeout) },
  notify (ta, index, count) {
    validateIntegerTypedArray(ta)
    validateAtomicAccess(ta, index)
    if (count !== undefined) {
      const n = as('count', () => +count)
      Math.max(Number.isNaN(n) ? 0 : Math.trunc(n), 0)
    }
    if (!isSharedArrayBuffer(taBuffer.call(ta))) return 0
    return 0 // nobody waits in the fuzz
  }
}

function run (p, who, lib) {
  const log = []
  const e = materialize(p, who === 'model' ? Atomics : lib, log)
  let call
  if (p.fn === 'notify') {
    call = p.countMissing ? () => lib.notify(e.ta, e.index) : () => lib.notify(e.ta, e.index, e.count)
  } else if (p.fn === 'waitAsync' && who === 'sabsync' && p.options !== undefined) {
    const options = p.options === 'signal' ? { signal: new AbortController().signal } : p.options
    call = () => lib.waitAsync(e.ta, e.index, e.value, e.timeout, options)
  } else {
    call = () => lib[p.fn](e.ta, e.index, e.value, e.timeout)
  }
  const o = outcome(call)
  o.log = log
  return { o, e }
}

const strip = o => ({ result: o.result, error: o.error, log: o.log })

t.test('fuzz: sabsync, Atomics and the spec agree', async t => {
  const SEED = 0x5AB5
  const N = 8000
  const rng = mulberry32(SEED)
  const failures = []
  let agreeWithAtomics = 0
  let deviations = 0
  let errorsSeen = 0
  let leftWaiting = 0
  const arrays = new Set()
  const tally = {}
  for (let n = 0; n < N; n++) {
    const p = plan(rng)
    const m = run(p, 'model', model).o
    const a = run(p, 'Atomics', Atomics).o
    const { o: s, e } = run(p, 'sabsync', sabsync)
    const key = p.fn + ' ' + (s.error || JSON.stringify(s.result))
    tally[key] = (tally[key] || 0) + 1

    if (JSON.stringify(strip(s)) !== JSON.stringify(strip(m))) {
      failures.push({ n, why: 'sabsync differs from the spec model', plan: p, sabsync: s, model: m, atomics: a })
    }
    // Atomics is the reference too, except where V8 checks the index against
    // the length after ToIndex (ValidateAtomicAccess step 1 reads it before).
    const v8deviates = p.index.effect !== undefined && LENGTH_EFFECTS.has(p.index.effect)
    if (JSON.stringify(strip(a)) === JSON.stringify(strip(m))) {
      agreeWithAtomics++
    } else if (v8deviates) {
      deviations++
    } else {
      failures.push({ n, why: 'the model differs from Atomics', plan: p, sabsync: s, model: m, atomics: a })
    }
    // An argument error names the argument.
    if (s.error === 'TypeError' || s.error === 'RangeError') {
      errorsSeen++
      if (!m.arg || !s.message.includes(`"${m.arg}"`)) {
        failures.push({ n, why: 'the message does not name the argument', plan: p, sabsync: s, model: m })
      }
    }
    // Nothing left behind on any cell of a shared array.
    const raw = e.raw
    if (taTag.call(raw) !== undefined && isSharedArrayBuffer(taBuffer.call(raw)) &&
        ['Int32Array', 'BigInt64Array'].includes(taTag.call(raw))) {
      arrays.add(raw)
      for (let k = 0; k < taLength.call(raw); k++) leftWaiting += sabsync.waiters(raw, k)
    }
    if (failures.length >= 10) break
  }
  t.comment(JSON.stringify(tally))
  t.strictSame(failures, [], `no disagreements in ${N} calls (seed ${SEED})`)
  t.ok(agreeWithAtomics > N * 0.9, `Atomics agreed with the model in ${agreeWithAtomics} calls`)
  t.ok(deviations > 0, `V8's length-after-ToIndex deviation seen ${deviations} times`,
    { skip: DEVIATION_SEEABLE ? false : 'no growable / resizable buffers, and this V8 follows the spec for detached ones' })
  t.ok(errorsSeen > N / 10, `${errorsSeen} argument errors checked for their message`)
  t.equal(leftWaiting, 0, `no waiter left on ${arrays.size} arrays`)
  // The parking lot's per-bucket waiter counters (see lib/lot.js).
  const onLot = lotWaiters()
  if (onLot !== null) t.equal(onLot, 0, 'every bucket of the parking lot is empty')
})
