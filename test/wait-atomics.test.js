'use strict'
// sabsync.wait / waitAsync / notify against the built-in Atomics, side by
// side: for every argument combination below both are called on fresh,
// identical state and must give the same answer (or throw the same error
// type), calling user code (valueOf, toString, @@toPrimitive) in the same
// order. Where V8 deviates from the ECMAScript specification the test
// asserts the SPEC's behaviour for sabsync, with the step cited.
//
// Deliberate differences, not tested here as equalities: sabsync waiters are
// woken only by sabsync.notify (so each side wakes its own), and waitAsync
// takes a 5th `options` argument.

const t = require('tap')
const vm = require('vm')
const sabsync = require('..')

const LIBS = { Atomics, sabsync }
const NAMES = ['Atomics', 'sabsync']
const FNS = ['wait', 'waitAsync', 'notify']

const { taTag, detach, HAS_RESIZABLE, HAS_GROWABLE, noteMissingBuffers, Poison, fixture, message, lotWaiters } = require('./helpers')
const isBig = ta => taTag.call(ta) === 'BigInt64Array'
noteMissingBuffers(t)

// A result made comparable: -0 stays distinguishable, result objects are
// described with their prototype, own keys in order and value kind.
function show (v) {
  if (typeof v === 'number') return Object.is(v, -0) ? '-0' : v
  if (v !== null && typeof v === 'object') {
    return {
      plain: Object.getPrototypeOf(v) === Object.prototype,
      keys: Reflect.ownKeys(v),
      async: v.async,
      value: v.value instanceof Promise ? 'Promise' : v.value
    }
  }
  return v
}

function outcome (fn) {
  try {
    return { result: show(fn()) }
  } catch (e) {
    return { error: e instanceof Poison ? 'Poison:' + e.tag : e.constructor.name }
  }
}

// Objects that log their conversion, and ones that throw from it.
const logged = (log, name, value, effect) => ({
  valueOf () {
    log.push(name)
    if (effect) effect()
    return value
  }
})
const poison = (log, name) => ({
  valueOf () {
    log.push(name)
    throw new Poison(name)
  }
})

// Node does not keep its event loop alive for Atomics.waitAsync: hold it
// open with a timer while a promise settles.
async function settle (p) {
  const keep = setTimeout(() => {}, 60000)
  try {
    return await p
  } finally {
    clearTimeout(keep)
  }
}

// A Proxy that logs every trap it sees.
function trapLogger (log, target) {
  const handler = {}
  for (const trap of Object.getOwnPropertyNames(Reflect)) {
    handler[trap] = (...args) => {
      log.push(trap + (trap === 'get' || trap === 'has' ? ' ' + String(args[1]) : ''))
      return Reflect[trap](...args)
    }
  }
  return new Proxy(target, handler)
}

// Pending waits created by a case; each side's are woken by its own notify
// and checked to settle.
let pending = []

// Runs call(lib, env) on a fresh env = setup(log, lib) for each library.
// env.cleanup(lib) (if any) runs afterwards.
function sideBySide (setup, call) {
  const out = {}
  for (const name of NAMES) {
    const lib = LIBS[name]
    const log = []
    const env = setup(log, lib)
    const o = outcome(() => call(lib, env, log))
    o.log = log
    if (env && env.cleanup) env.cleanup(lib)
    out[name] = o
  }
  return out
}

function same (t, setup, call, msg) {
  const { Atomics: a, sabsync: s } = sideBySide(setup, call)
  t.strictSame(s, a, msg)
  return s
}

// Asserts sabsync's outcome only (where V8 is not the reference).
function spec (t, setup, call, expected, msg) {
  const log = []
  const env = setup(log, sabsync)
  const o = outcome(() => call(sabsync, env, log))
  o.log = log
  if (env && env.cleanup) env.cleanup(sabsync)
  t.strictSame(o, expected, msg)
}

const sab32 = (n = 4) => {
  const ta = new Int32Array(new SharedArrayBuffer(4 * n))
  for (let i = 0; i < n; i++) ta[i] = i
  return ta
}
const sab64 = (n = 4) => {
  const ta = new BigInt64Array(new SharedArrayBuffer(8 * n))
  for (let i = 0; i < n; i++) ta[i] = BigInt(i)
  return ta
}

t.test('function objects', async t => {
  const expectedLength = { wait: 4, waitAsync: 4, notify: 3 }
  for (const fn of FNS) {
    const f = sabsync[fn]
    t.equal(typeof f, 'function', fn)
    t.equal(f.length, Atomics[fn].length, `${fn}.length as the built-in`)
    t.equal(f.length, expectedLength[fn], `${fn}.length`)
    t.equal(f.name, Atomics[fn].name, `${fn}.name as the built-in`)
    t.equal(f.name, fn, `${fn}.name`)
    t.strictSame(Object.getOwnPropertyDescriptor(f, 'length'),
      Object.getOwnPropertyDescriptor(Atomics[fn], 'length'), `${fn}.length descriptor`)
    t.strictSame(Object.getOwnPropertyDescriptor(f, 'name'),
      Object.getOwnPropertyDescriptor(Atomics[fn], 'name'), `${fn}.name descriptor`)
    // Built-in functions that are not constructors (ECMA-262 clause 18).
    t.notOk(Object.hasOwn(f, 'prototype'), `${fn} has no own prototype`)
    t.throws(() => new f(), TypeError, `new ${fn}() throws TypeError`) // eslint-disable-line new-cap
    t.throws(() => Reflect.construct(function () {}, [], f), TypeError, `${fn} is not a constructor`)
    t.equal(Object.getPrototypeOf(f), Function.prototype, `${fn}'s prototype is Function.prototype`)
  }
})

// typedArray: everything ValidateIntegerTypedArray(typedArray, true) and the
// IsSharedArrayBuffer check of DoWait see.
const typedArrays = {
  undefined: () => undefined,
  null: () => null,
  number: () => 0,
  string: () => 'Int32Array',
  boolean: () => true,
  symbol: () => Symbol('ta'),
  bigint: () => 1n,
  'plain object': () => ({}),
  array: () => [0, 0, 0, 0],
  function: () => function () {},
  ArrayBuffer: () => new ArrayBuffer(16),
  SharedArrayBuffer: () => new SharedArrayBuffer(16),
  'DataView over SAB': () => new DataView(new SharedArrayBuffer(16)),
  'Proxy of a shared Int32Array': () => new Proxy(sab32(), {}),
  'Proxy logging its traps': log => trapLogger(log, sab32()),
  'object with a constructor getter that throws': log => ({ get constructor () { log.push('constructor'); throw new Poison('constructor') } }),
  'non-shared Int32Array with a constructor getter that throws': log => Object.defineProperty(new Int32Array(4), 'constructor', {
    get () { log.push('constructor'); throw new Poison('constructor') }
  }),
  'shared Float64Array with a constructor getter that throws': log => Object.defineProperty(new Float64Array(new SharedArrayBuffer(16)), 'constructor', {
    get () { log.push('constructor'); throw new Poison('constructor') }
  }),
  'object inheriting from Int32Array.prototype': () => Object.create(Int32Array.prototype),
  'array-like pretending to be one': () => ({ buffer: new SharedArrayBuffer(16), length: 4, byteOffset: 0, [Symbol.toStringTag]: 'Int32Array' }),
  'shared Int8Array': () => new Int8Array(new SharedArrayBuffer(16)),
  'shared Uint8Array': () => new Uint8Array(new SharedArrayBuffer(16)),
  'shared Uint8ClampedArray': () => new Uint8ClampedArray(new SharedArrayBuffer(16)),
  'shared Int16Array': () => new Int16Array(new SharedArrayBuffer(16)),
  'shared Uint16Array': () => new Uint16Array(new SharedArrayBuffer(16)),
  'shared Uint32Array': () => new Uint32Array(new SharedArrayBuffer(16)),
  'shared Float32Array': () => new Float32Array(new SharedArrayBuffer(16)),
  'shared Float64Array': () => new Float64Array(new SharedArrayBuffer(16)),
  'shared BigUint64Array': () => new BigUint64Array(new SharedArrayBuffer(32)),
  'shared Int32Array': () => sab32(),
  'shared BigInt64Array': () => sab64(),
  'shared Int32Array at an offset': () => new Int32Array(new SharedArrayBuffer(32), 8, 4),
  'shared Int32Array of length 0': () => new Int32Array(new SharedArrayBuffer(16), 16),
  'shared Int32Array subclass': () => new (class extends Int32Array {})(new SharedArrayBuffer(16)),
  'shared Int32Array from another realm': () => vm.runInNewContext('new Int32Array(new SharedArrayBuffer(16))'),
  'shared Int32Array with Float64Array.prototype': () => Object.setPrototypeOf(sab32(), Float64Array.prototype),
  'shared Float64Array with Int32Array.prototype': () => Object.setPrototypeOf(new Float64Array(new SharedArrayBuffer(16)), Int32Array.prototype),
  'shared Int32Array with own length/buffer': () => Object.defineProperties(sab32(), { length: { value: 100 }, buffer: { value: new ArrayBuffer(8) } }),
  'non-shared Int32Array': () => new Int32Array(4),
  'non-shared BigInt64Array': () => new BigInt64Array(4),
  'non-shared Uint32Array': () => new Uint32Array(4),
  'non-shared Float64Array': () => new Float64Array(4),
  'detached Int32Array': () => { const ta = new Int32Array(4); detach(ta.buffer); return ta },
  'detached BigInt64Array': () => { const ta = new BigInt64Array(4); detach(ta.buffer); return ta },
  'detached Float64Array': () => { const ta = new Float64Array(4); detach(ta.buffer); return ta },
  ...(typeof ArrayBuffer.prototype.transfer === 'function'
    ? {
        'Int32Array detached by ArrayBuffer.prototype.transfer': () => { const ta = new Int32Array(4); ta.buffer.transfer(); return ta },
        'BigInt64Array detached by ArrayBuffer.prototype.transfer': () => { const ta = new BigInt64Array(4); ta.buffer.transfer(); return ta }
      }
    : {}),
  ...(HAS_RESIZABLE
    ? {
        'resizable, length-tracking Int32Array': () => new Int32Array(new ArrayBuffer(16, { maxByteLength: 32 })),
        'resizable, fixed Int32Array out of bounds': () => {
          const rab = new ArrayBuffer(16, { maxByteLength: 32 })
          const ta = new Int32Array(rab, 0, 4)
          rab.resize(8)
          return ta
        },
        'resizable, length-tracking Int32Array out of bounds': () => {
          const rab = new ArrayBuffer(16, { maxByteLength: 32 })
          const ta = new Int32Array(rab, 12)
          rab.resize(8)
          return ta
        },
        'resizable, length-tracking BigInt64Array out of bounds': () => {
          const rab = new ArrayBuffer(16, { maxByteLength: 32 })
          const ta = new BigInt64Array(rab, 8)
          rab.resize(0)
          return ta
        }
      }
    : {}),
  ...(HAS_GROWABLE
    ? {
        'growable SAB, fixed Int32Array': () => new Int32Array(new SharedArrayBuffer(16, { maxByteLength: 64 }), 0, 4),
        'growable SAB, length-tracking Int32Array': () => new Int32Array(new SharedArrayBuffer(16, { maxByteLength: 64 })),
        'growable SAB, length-tracking Int32Array after grow': () => {
          const g = new SharedArrayBuffer(4, { maxByteLength: 64 })
          const ta = new Int32Array(g)
          g.grow(16)
          return ta
        },
        'growable SAB, length-tracking BigInt64Array': () => new BigInt64Array(new SharedArrayBuffer(16, { maxByteLength: 64 })),
        'growable SAB, length-tracking Int32Array at its end': () => new Int32Array(new SharedArrayBuffer(16, { maxByteLength: 64 }), 16)
      }
    : {})
}

t.test('typedArray argument: validation and the shared check', async t => {
  for (const [label, make] of Object.entries(typedArrays)) {
    const setup = log => {
      const ta = make(log)
      const zero = taTag.call(ta) === 'BigInt64Array' ? 0n : 0
      return {
        ta,
        index: logged(log, 'index', 0),
        value: logged(log, 'value', zero),
        timeout: logged(log, 'timeout', 0),
        count: logged(log, 'count', 1)
      }
    }
    same(t, setup, (lib, e) => lib.wait(e.ta, e.index, e.value, e.timeout), `wait: ${label}`)
    same(t, setup, (lib, e) => lib.waitAsync(e.ta, e.index, e.value, e.timeout), `waitAsync: ${label}`)
    same(t, setup, (lib, e) => lib.notify(e.ta, e.index, e.count), `notify: ${label}`)
  }

  // The spec's answers, spelled out for the important ones.
  const nothingRead = log => ({ ta: new Int32Array(4), i: poison(log, 'index'), v: poison(log, 'value'), to: poison(log, 'timeout'), c: poison(log, 'count') })
  for (const fn of ['wait', 'waitAsync']) {
    // DoWait step 3: IsSharedArrayBuffer is checked before the index (step 4).
    spec(t, nothingRead, (lib, e) => lib[fn](e.ta, e.i, e.v, e.to), { error: 'TypeError', log: [] },
      `${fn}: non-shared array throws TypeError before index is converted`)
    spec(t, log => ({ i: poison(log, 'index') }), (lib, e) => lib[fn]({}, e.i, e.i, e.i), { error: 'TypeError', log: [] },
      `${fn}: not a typed array throws TypeError before any conversion`)
    spec(t, log => ({ ta: new Float64Array(new SharedArrayBuffer(16)), i: poison(log, 'index') }), (lib, e) => lib[fn](e.ta, e.i, e.i, e.i),
      { error: 'TypeError', log: [] }, `${fn}: Float64Array throws TypeError before any conversion`)
  }
  // Atomics.notify: index and count are converted, then a non-shared buffer answers +0.
  spec(t, log => ({ ta: new Int32Array(4), i: logged(log, 'index', 3), c: logged(log, 'count', 1) }),
    (lib, e) => lib.notify(e.ta, e.i, e.c), { result: 0, log: ['index', 'count'] }, 'notify: non-shared answers 0 after converting index and count')
  spec(t, log => ({ ta: new BigInt64Array(4), c: poison(log, 'count') }),
    (lib, e) => lib.notify(e.ta, 0, e.c), { error: 'Poison:count', log: ['count'] }, 'notify: non-shared still converts count (abrupt)')
  spec(t, log => ({ ta: new Int32Array(4), i: poison(log, 'index') }),
    (lib, e) => lib.notify(e.ta, e.i, 0), { error: 'Poison:index', log: ['index'] }, 'notify: non-shared still converts index (abrupt)')
  spec(t, log => ({ ta: new Int32Array(4), c: poison(log, 'count') }),
    (lib, e) => lib.notify(e.ta, 4, e.c), { error: 'RangeError', log: [] }, 'notify: non-shared, index out of range is a RangeError before count')
  spec(t, log => ({ ta: new Int32Array(4) }), (lib, e) => lib.notify(e.ta, 0, Symbol('c')), { error: 'TypeError', log: [] },
    'notify: non-shared, Symbol count is a TypeError')
})

// index: ToIndex then the bounds check, against a 4-element array whose cell
// k holds k. wait / waitAsync look for the value 1, so 'timed-out' means the
// index resolved to 1. notify has one waiter (of its own library) on cell 1.
const indexes = {
  '-1': () => -1,
  '-0': () => -0,
  0: () => 0,
  0.5: () => 0.5,
  1: () => 1,
  1.9: () => 1.9,
  3: () => 3,
  '4 (= length)': () => 4,
  '-0.5': () => -0.5,
  '-0.999': () => -0.999,
  '-1.5': () => -1.5,
  NaN: () => NaN,
  Infinity: () => Infinity,
  '-Infinity': () => -Infinity,
  '2**53': () => 2 ** 53,
  '2**53 - 1': () => 2 ** 53 - 1,
  1e300: () => 1e300,
  '-1e300': () => -1e300,
  '2**32 + 1': () => 2 ** 32 + 1,
  '2**31 + 1': () => 2 ** 31 + 1,
  1e-300: () => 1e-300,
  "'1'": () => '1',
  "' 1 '": () => ' 1 ',
  "'0x1'": () => '0x1',
  "'1e0'": () => '1e0',
  "'-0'": () => '-0',
  "''": () => '',
  "'abc'": () => 'abc',
  "'Infinity'": () => 'Infinity',
  undefined: () => undefined,
  null: () => null,
  true: () => true,
  false: () => false,
  '[]': () => [],
  '[1]': () => [1],
  "['1']": () => ['1'],
  '[1, 2]': () => [1, 2],
  '{}': () => ({}),
  'new Date(1)': () => new Date(1),
  'Object(1)': () => Object(1),
  Symbol: () => Symbol('i'),
  BigInt: () => 1n,
  'Object(1n)': () => Object(1n),
  'Object(Symbol())': () => Object(Symbol('i')),
  'valueOf -> 1': log => logged(log, 'valueOf', 1),
  "valueOf -> '1'": log => logged(log, 'valueOf', '1'),
  'valueOf -> -1': log => logged(log, 'valueOf', -1),
  'valueOf -> 1n': log => logged(log, 'valueOf', 1n),
  'valueOf -> Symbol': log => logged(log, 'valueOf', Symbol('x')),
  'valueOf -> object, toString -> 1': log => ({
    valueOf () { log.push('valueOf'); return {} },
    toString () { log.push('toString'); return '1' }
  }),
  'valueOf not callable, toString -> 1': log => ({ valueOf: 1, toString () { log.push('toString'); return '1' } }),
  'valueOf and toString -> objects': log => ({
    valueOf () { log.push('valueOf'); return {} },
    toString () { log.push('toString'); return {} }
  }),
  '@@toPrimitive -> 1': log => ({
    [Symbol.toPrimitive] (hint) { log.push('toPrimitive:' + hint); return 1 },
    valueOf () { log.push('valueOf'); return 2 }
  }),
  '@@toPrimitive not callable': log => ({ [Symbol.toPrimitive]: 1, valueOf () { log.push('valueOf'); return 1 } }),
  '@@toPrimitive -> object': log => ({ [Symbol.toPrimitive] () { log.push('toPrimitive'); return {} } }),
  'valueOf throws': log => poison(log, 'index'),
  'Proxy logging its traps, valueOf -> 1': log => trapLogger(log, { valueOf: () => 1 }),
  'Proxy logging its traps, valueOf -> 9': log => trapLogger(log, { valueOf: () => 9 }),
  'Proxy logging its traps, valueOf -> -1': log => trapLogger(log, { valueOf: () => -1 }),
  'constructor getter that throws, valueOf -> 9': log => ({
    valueOf () { log.push('valueOf'); return 9 },
    get constructor () { log.push('constructor'); throw new Poison('constructor') }
  })
}

function withOneWaiter (ta, lib, cell) {
  const expected = isBig(ta) ? BigInt(cell) : cell
  const r = lib === Atomics ? Atomics.waitAsync(ta, cell, expected) : sabsync.waitAsync(ta, cell, expected)
  if (r.async !== true) throw new Error('could not set up a waiter')
  pending.push(r.value)
}

t.test('index argument: ToIndex and ValidateAtomicAccess', async t => {
  for (const [mk, kind] of [[sab32, 'Int32Array'], [sab64, 'BigInt64Array']]) {
    for (const [label, make] of Object.entries(indexes)) {
      const one = kind === 'Int32Array' ? 1 : 1n
      const setup = log => ({ ta: mk(), index: make(log) })
      same(t, setup, (lib, e) => lib.wait(e.ta, e.index, one, 0), `${kind} wait index ${label}`)
      same(t, setup, (lib, e) => lib.waitAsync(e.ta, e.index, one, 0), `${kind} waitAsync index ${label}`)
      same(t, (log, lib) => {
        const e = setup(log)
        withOneWaiter(e.ta, lib, 1)
        e.cleanup = lib => lib.notify(e.ta, 1)
        return e
      }, (lib, e) => lib.notify(e.ta, e.index, 1), `${kind} notify index ${label}`)
    }
  }
  const out = []
  for (const p of pending) out.push(await settle(p))
  pending = []
  t.ok(out.every(r => r === 'ok'), 'every waiter was woken with ok')
})

// value: ToInt32 for Int32Array, ToBigInt64 for BigInt64Array. Cell 0 holds 1
// (1n); 'timed-out' means the value converted to 1, with a timeout of 0.
const int32Values = {
  1: () => 1,
  0: () => 0,
  '-0': () => -0,
  1.9: () => 1.9,
  '-1': () => -1,
  '2**32 + 1': () => 2 ** 32 + 1,
  '-(2**32) + 1': () => -(2 ** 32) + 1,
  '2**31': () => 2 ** 31,
  NaN: () => NaN,
  Infinity: () => Infinity,
  "'1'": () => '1',
  "'0x1'": () => '0x1',
  "' 1 '": () => ' 1 ',
  "'1n'": () => '1n',
  "'abc'": () => 'abc',
  "''": () => '',
  true: () => true,
  false: () => false,
  null: () => null,
  undefined: () => undefined,
  '[1]': () => [1],
  '{}': () => ({}),
  BigInt: () => 1n,
  'Object(1n)': () => Object(1n),
  Symbol: () => Symbol('v'),
  'valueOf -> 1': log => logged(log, 'value', 1),
  'valueOf -> 1n': log => logged(log, 'value', 1n),
  'valueOf throws': log => poison(log, 'value')
}
const bigint64Values = {
  '1n': () => 1n,
  '0n': () => 0n,
  '2n**64n + 1n': () => 2n ** 64n + 1n,
  '-(2n**64n) + 1n': () => -(2n ** 64n) + 1n,
  '2n**63n': () => 2n ** 63n,
  1: () => 1,
  0: () => 0,
  NaN: () => NaN,
  "'1'": () => '1',
  "'0x1'": () => '0x1',
  "' 1 '": () => ' 1 ',
  "'1n'": () => '1n',
  "'1.5'": () => '1.5',
  "'abc'": () => 'abc',
  "''": () => '',
  true: () => true,
  false: () => false,
  null: () => null,
  undefined: () => undefined,
  '[]': () => [],
  "['1']": () => ['1'],
  '{}': () => ({}),
  'Object(1n)': () => Object(1n),
  Symbol: () => Symbol('v'),
  'valueOf -> 1n': log => logged(log, 'value', 1n),
  'valueOf -> 1': log => logged(log, 'value', 1),
  "valueOf -> '1'": log => logged(log, 'value', '1'),
  'valueOf throws': log => poison(log, 'value')
}

t.test('value argument: ToInt32 / ToBigInt64', async t => {
  for (const [kind, values, mk] of [['Int32Array', int32Values, () => { const ta = sab32(); ta[0] = 1; return ta }],
    ['BigInt64Array', bigint64Values, () => { const ta = sab64(); ta[0] = 1n; return ta }]]) {
    for (const [label, make] of Object.entries(values)) {
      const setup = log => ({ ta: mk(), value: make(log), timeout: logged(log, 'timeout', 0) })
      same(t, setup, (lib, e) => lib.wait(e.ta, 0, e.value, e.timeout), `${kind} wait value ${label}`)
      same(t, setup, (lib, e) => lib.waitAsync(e.ta, 0, e.value, e.timeout), `${kind} waitAsync value ${label}`)
    }
  }
  // BigInt64 cells compare as 64-bit: -1n matches a cell holding 2n**64n - 1n.
  same(t, () => { const ta = sab64(); ta[0] = -1n; return { ta } }, (lib, e) => lib.wait(e.ta, 0, 2n ** 64n - 1n, 0), 'BigInt64Array wraps the value')
})

// timeout: ToNumber, then NaN / +Infinity mean forever, -Infinity and
// negatives mean 0. With a value that differs, every timeout is converted
// and the answer is 'not-equal' at once.
const anyTimeouts = {
  0: () => 0,
  '-0': () => -0,
  '-1': () => -1,
  '-Infinity': () => -Infinity,
  NaN: () => NaN,
  Infinity: () => Infinity,
  1e300: () => 1e300,
  1: () => 1,
  undefined: () => undefined,
  null: () => null,
  true: () => true,
  false: () => false,
  "'10'": () => '10',
  "'abc'": () => 'abc',
  '[]': () => [],
  '{}': () => ({}),
  BigInt: () => 1n,
  'Object(1n)': () => Object(1n),
  Symbol: () => Symbol('t'),
  'valueOf -> 5': log => logged(log, 'timeout', 5),
  'valueOf -> 1n': log => logged(log, 'timeout', 1n),
  'valueOf throws': log => poison(log, 'timeout')
}
// Timeouts that convert to 0 (or below): answered without waiting.
const zeroTimeouts = {
  0: () => 0,
  '-0': () => -0,
  '-1': () => -1,
  '-0.5': () => -0.5,
  '-Infinity': () => -Infinity,
  '-(2**53)': () => -(2 ** 53),
  null: () => null,
  false: () => false,
  "''": () => '',
  "'-5'": () => '-5',
  '[]': () => [],
  'valueOf -> -Infinity': log => logged(log, 'timeout', -Infinity)
}
// Small positive timeouts: a real (1 ms) wait that times out.
const smallTimeouts = {
  1: () => 1,
  0.5: () => 0.5,
  true: () => true,
  "'1'": () => '1',
  '[1]': () => [1],
  'valueOf -> 1': log => logged(log, 'timeout', 1)
}

t.test('timeout argument: ToNumber and DoWait step 9', async t => {
  for (const [kind, mk, differ, equal] of [['Int32Array', sab32, 7, 0], ['BigInt64Array', sab64, 7n, 0n]]) {
    for (const [label, make] of Object.entries(anyTimeouts)) {
      const setup = log => ({ ta: mk(), timeout: make(log) })
      same(t, setup, (lib, e) => lib.wait(e.ta, 0, differ, e.timeout), `${kind} wait not-equal, timeout ${label}`)
      same(t, setup, (lib, e) => lib.waitAsync(e.ta, 0, differ, e.timeout), `${kind} waitAsync not-equal, timeout ${label}`)
    }
    for (const [label, make] of Object.entries(zeroTimeouts)) {
      const setup = log => ({ ta: mk(), timeout: make(log) })
      const w = same(t, setup, (lib, e) => lib.wait(e.ta, 0, equal, e.timeout), `${kind} wait equal, timeout ${label}`)
      t.equal(w.result, 'timed-out', `${kind} wait timeout ${label} is timed-out`)
      const a = same(t, setup, (lib, e) => lib.waitAsync(e.ta, 0, equal, e.timeout), `${kind} waitAsync equal, timeout ${label}`)
      t.strictSame(a.result, { plain: true, keys: ['async', 'value'], async: false, value: 'timed-out' }, `${kind} waitAsync timeout ${label} answers synchronously`)
    }
    for (const [label, make] of Object.entries(smallTimeouts)) {
      const setup = log => ({ ta: mk(), timeout: make(log) })
      const w = same(t, setup, (lib, e) => lib.wait(e.ta, 0, equal, e.timeout), `${kind} wait equal, timeout ${label}`)
      t.equal(w.result, 'timed-out', `${kind} wait timeout ${label} times out`)
    }
    // Timeouts that wait for real: waitAsync answers {async: true, value: Promise}.
    for (const [label, make] of Object.entries({ NaN: () => NaN, undefined: () => undefined, Infinity: () => Infinity, 1e300: () => 1e300, "'abc'": () => 'abc', '{}': () => ({}), 5000: () => 5000 })) {
      const results = {}
      for (const name of NAMES) {
        const lib = LIBS[name]
        const ta = mk()
        const r = lib.waitAsync(ta, 0, equal, make([]))
        const woken = lib.notify(ta, 0)
        results[name] = { shape: show(r), woken, settled: await settle(r.value) }
      }
      t.strictSame(results.sabsync, results.Atomics, `${kind} waitAsync equal, timeout ${label}, woken by notify`)
      t.strictSame(results.sabsync, { shape: { plain: true, keys: ['async', 'value'], async: true, value: 'Promise' }, woken: 1, settled: 'ok' })
    }
    // A finite timeout that runs out.
    for (const name of NAMES) {
      const ta = mk()
      const r = LIBS[name].waitAsync(ta, 0, equal, 5)
      t.equal(r.async, true, `${name} ${kind} waitAsync 5 ms is async`)
      t.equal(await settle(r.value), 'timed-out', `${name} ${kind} waitAsync 5 ms resolves timed-out`)
      t.equal(LIBS[name].notify(ta, 0), 0, `${name} ${kind} nothing left to wake`)
    }
  }
})

// count: undefined is +Infinity, else max(ToIntegerOrInfinity(count), 0).
// Three waiters (each library's own) on cell 0; the answer is how many woke.
const counts = {
  missing: null,
  undefined: () => undefined,
  NaN: () => NaN,
  '-1': () => -1,
  '-Infinity': () => -Infinity,
  '-0': () => -0,
  0: () => 0,
  0.9: () => 0.9,
  1: () => 1,
  1.9: () => 1.9,
  2: () => 2,
  Infinity: () => Infinity,
  1e300: () => 1e300,
  "'2'": () => '2',
  "' 2 '": () => ' 2 ',
  "'abc'": () => 'abc',
  "'Infinity'": () => 'Infinity',
  null: () => null,
  true: () => true,
  false: () => false,
  '[]': () => [],
  '[2]': () => [2],
  '{}': () => ({}),
  BigInt: () => 1n,
  'Object(1n)': () => Object(1n),
  Symbol: () => Symbol('c'),
  'valueOf -> 2': log => logged(log, 'count', 2),
  'valueOf -> 1n': log => logged(log, 'count', 1n),
  'valueOf throws': log => poison(log, 'count')
}

t.test('count argument: notify', async t => {
  for (const [kind, mk] of [['Int32Array', sab32], ['BigInt64Array', sab64]]) {
    for (const [label, make] of Object.entries(counts)) {
      const results = {}
      for (const name of NAMES) {
        const lib = LIBS[name]
        const ta = mk()
        const promises = []
        for (let k = 0; k < 3; k++) {
          const r = lib.waitAsync(ta, 0, isBig(ta) ? 0n : 0)
          promises.push(r.value)
        }
        const log = []
        const o = outcome(() => make === null ? lib.notify(ta, 0) : lib.notify(ta, 0, make(log)))
        o.log = log
        o.rest = lib.notify(ta, 0)
        o.settled = await settle(Promise.all(promises))
        results[name] = o
      }
      t.strictSame(results.sabsync, results.Atomics, `${kind} notify count ${label}`)
    }
  }
  // Waiters on other cells and on other arrays are not counted.
  for (const name of NAMES) {
    const lib = LIBS[name]
    const ta = sab32(4)
    const other = sab32(4)
    const p = [lib.waitAsync(ta, 1, 1).value, lib.waitAsync(other, 0, 0).value]
    t.equal(lib.notify(ta, 0), 0, `${name}: no waiter on cell 0`)
    t.equal(lib.notify(ta, 1), 1, `${name}: one on cell 1`)
    t.equal(lib.notify(other, 0), 1, `${name}: one on the other array`)
    t.strictSame(await settle(Promise.all(p)), ['ok', 'ok'])
  }
})

t.test('order of conversions and of checks', async t => {
  // DoWait: index (step 4), value (6-7), timeout (8), in that order; an
  // abrupt conversion ends it, so an index that throws wins over a value
  // that throws, and a value that throws wins over a timeout that throws.
  for (const fn of ['wait', 'waitAsync']) {
    for (const [kind, mk, zero] of [['Int32Array', sab32, 0], ['BigInt64Array', sab64, 0n]]) {
      const cases = [
        ['all converted in order', log => [logged(log, 'index', 0), logged(log, 'value', zero), logged(log, 'timeout', 0)],
          { result: fn === 'wait' ? 'timed-out' : show({ async: false, value: 'timed-out' }), log: ['index', 'value', 'timeout'] }],
        ['index throws first', log => [poison(log, 'index'), poison(log, 'value'), poison(log, 'timeout')],
          { error: 'Poison:index', log: ['index'] }],
        ['value throws before timeout', log => [logged(log, 'index', 0), poison(log, 'value'), poison(log, 'timeout')],
          { error: 'Poison:value', log: ['index', 'value'] }],
        ['timeout throws last', log => [logged(log, 'index', 0), logged(log, 'value', zero), poison(log, 'timeout')],
          { error: 'Poison:timeout', log: ['index', 'value', 'timeout'] }],
        ['index out of range before value', log => [logged(log, 'index', 4), poison(log, 'value'), poison(log, 'timeout')],
          { error: 'RangeError', log: ['index'] }],
        ['index -1 before value', log => [logged(log, 'index', -1), poison(log, 'value'), poison(log, 'timeout')],
          { error: 'RangeError', log: ['index'] }],
        ['Symbol index before value', log => [Symbol('i'), poison(log, 'value'), poison(log, 'timeout')],
          { error: 'TypeError', log: [] }],
        ['bad value type before timeout', log => [logged(log, 'index', 0), zero === 0 ? 1n : 1, poison(log, 'timeout')],
          { error: 'TypeError', log: ['index'] }],
        ['Symbol timeout after value', log => [logged(log, 'index', 0), logged(log, 'value', zero), Symbol('t')],
          { error: 'TypeError', log: ['index', 'value'] }]
      ]
      for (const [label, args, expected] of cases) {
        const setup = log => ({ ta: mk(), args: args(log) })
        same(t, setup, (lib, e) => lib[fn](e.ta, ...e.args), `${fn} ${kind}: ${label}`)
        spec(t, setup, (lib, e) => lib[fn](e.ta, ...e.args), expected, `${fn} ${kind}: ${label} (spec)`)
      }
    }
  }

  // Atomics.notify: index (step 1), then count (step 3), then the shared
  // check (step 6).
  for (const [kind, mk, nonShared] of [['Int32Array', sab32, () => new Int32Array(4)], ['BigInt64Array', sab64, () => new BigInt64Array(4)]]) {
    for (const [where, make] of [['shared', mk], ['non-shared', nonShared]]) {
      const cases = [
        ['index then count', log => [logged(log, 'index', 0), logged(log, 'count', 1)], { result: 0, log: ['index', 'count'] }],
        ['index throws first', log => [poison(log, 'index'), poison(log, 'count')], { error: 'Poison:index', log: ['index'] }],
        ['count throws', log => [logged(log, 'index', 0), poison(log, 'count')], { error: 'Poison:count', log: ['index', 'count'] }],
        ['index out of range before count', log => [logged(log, 'index', 4), poison(log, 'count')], { error: 'RangeError', log: ['index'] }],
        ['BigInt count', log => [logged(log, 'index', 0), 1n], { error: 'TypeError', log: ['index'] }]
      ]
      for (const [label, args, expected] of cases) {
        const setup = log => ({ ta: make(), args: args(log) })
        same(t, setup, (lib, e) => lib.notify(e.ta, ...e.args), `notify ${where} ${kind}: ${label}`)
        spec(t, setup, (lib, e) => lib.notify(e.ta, ...e.args), expected, `notify ${where} ${kind}: ${label} (spec)`)
      }
    }
  }

  // Side effects of the conversions on the cell: the value is read after
  // every conversion (DoWait step 20).
  for (const fn of ['wait', 'waitAsync']) {
    const setup = log => {
      const ta = sab32()
      return { ta, index: logged(log, 'index', 0, () => { ta[0] = 5 }), timeout: logged(log, 'timeout', 0, () => { ta[0] = 6 }) }
    }
    same(t, setup, (lib, e) => lib[fn](e.ta, e.index, 5, e.timeout), `${fn}: the cell is read after the timeout's valueOf changed it`)
    same(t, setup, (lib, e) => lib[fn](e.ta, e.index, 6, e.timeout), `${fn}: ... so the value it stored is the one compared`)
    if (HAS_GROWABLE) {
      const grow = log => {
        const g = new SharedArrayBuffer(16, { maxByteLength: 64 })
        const ta = new Int32Array(g)
        return { ta, value: logged(log, 'value', 0, () => { g.grow(32) }) }
      }
      same(t, grow, (lib, e) => lib[fn](e.ta, 3, e.value, 0), `${fn}: growing the SAB in value's valueOf`)
    }
  }
  // Detaching the buffer while converting count: no revalidation in
  // Atomics.notify; a non-shared buffer answers 0.
  same(t, log => { const ta = new Int32Array(4); return { ta, count: logged(log, 'count', 1, () => detach(ta.buffer)) } },
    (lib, e) => lib.notify(e.ta, 3, e.count), 'notify: buffer detached by count')
  if (HAS_RESIZABLE) {
    same(t, log => { const rab = new ArrayBuffer(16, { maxByteLength: 32 }); return { ta: new Int32Array(rab), count: logged(log, 'count', 1, () => rab.resize(0)) } },
      (lib, e) => lib.notify(e.ta, 3, e.count), 'notify: resizable buffer shrunk by count')
  }

  // Re-entrancy: a conversion that calls the same function on another array
  // does not disturb the outer call.
  for (const fn of FNS) {
    const setup = (log, lib) => {
      const ta = sab32(4)
      const small = sab32(1)
      return {
        ta,
        index: logged(log, 'index', 3, () => { log.push(outcome(() => lib.notify(small, 0, 1))) }),
        value: logged(log, 'value', 0, () => { log.push(outcome(() => lib.wait(small, 0, 0, 0))) })
      }
    }
    same(t, setup, (lib, e) => fn === 'notify' ? lib.notify(e.ta, e.index, e.value) : lib[fn](e.ta, e.index, e.value, 0),
      `${fn}: re-entered from a conversion`)
  }
})

t.test('where V8 deviates from the spec, sabsync follows the spec', async t => {
  // ValidateAtomicAccess step 1 reads TypedArrayLength BEFORE step 2 converts
  // the index with ToIndex; step 4 checks the index against that length.
  // V8 reads the length after converting the index.

  // A growable SAB grown by the index's valueOf: the index is checked
  // against the old length -> RangeError (V8 accepts it).
  if (HAS_GROWABLE) {
    for (const fn of FNS) {
      for (const tracking of [true, false]) {
        const setup = log => {
          const g = new SharedArrayBuffer(16, { maxByteLength: 64 })
          const ta = tracking ? new Int32Array(g) : new Int32Array(g, 0, 4)
          return { ta, index: logged(log, 'index', 5, () => g.grow(32)), rest: [logged(log, 'value', 0), logged(log, 'timeout', 0)] }
        }
        spec(t, setup, (lib, e) => lib[fn](e.ta, e.index, ...e.rest), { error: 'RangeError', log: ['index'] },
          `${fn}: index 5 of a 4-element growable array grown to 8 by valueOf is out of range`)
        // ... and one below the old length is fine either way.
        same(t, log => {
          const g = new SharedArrayBuffer(16, { maxByteLength: 64 })
          return { ta: new Int32Array(g), index: logged(log, 'index', 3, () => g.grow(32)) }
        }, (lib, e) => lib[fn](e.ta, e.index, 0, 0), `${fn}: index 3 with the same grow`)
      }
    }
  }

  // Atomics.notify on a non-shared resizable buffer shrunk by the index's
  // valueOf: index 3 < old length 4 passes ValidateAtomicAccess, count is
  // converted (step 3), then step 6 answers +0 for a non-shared buffer.
  // (V8 throws a RangeError.)
  if (HAS_RESIZABLE) {
    spec(t, log => {
      const rab = new ArrayBuffer(16, { maxByteLength: 32 })
      return { ta: new Int32Array(rab), index: logged(log, 'index', 3, () => rab.resize(4)), count: logged(log, 'count', 1) }
    }, (lib, e) => lib.notify(e.ta, e.index, e.count), { result: 0, log: ['index', 'count'] },
    'notify: resizable buffer shrunk by the index valueOf answers 0')
  }
  // The same with the buffer detached by the index's valueOf.
  spec(t, log => {
    const ta = new Int32Array(4)
    return { ta, index: logged(log, 'index', 1, () => detach(ta.buffer)), count: logged(log, 'count', 1) }
  }, (lib, e) => lib.notify(e.ta, e.index, e.count), { result: 0, log: ['index', 'count'] },
  'notify: buffer detached by the index valueOf answers 0')
  // ... while an index at or past the old length is still a RangeError.
  spec(t, log => {
    const ta = new Int32Array(4)
    return { ta, index: logged(log, 'index', 4, () => detach(ta.buffer)), count: poison(log, 'count') }
  }, (lib, e) => lib.notify(e.ta, e.index, e.count), { error: 'RangeError', log: ['index'] },
  'notify: detached by valueOf, index 4 of 4 is out of range')
})

t.test('waitAsync result objects', async t => {
  const describeObject = o => ({
    proto: Object.getPrototypeOf(o) === Object.prototype,
    keys: Reflect.ownKeys(o),
    descriptors: Object.fromEntries(Reflect.ownKeys(o).map(k => {
      const d = Object.getOwnPropertyDescriptor(o, k)
      return [k, { ...d, value: d.value instanceof Promise ? 'Promise' : d.value }]
    })),
    extensible: Object.isExtensible(o)
  })
  for (const [kind, mk, one, zero] of [['Int32Array', sab32, 1, 0], ['BigInt64Array', sab64, 1n, 0n]]) {
    const got = {}
    for (const name of NAMES) {
      const lib = LIBS[name]
      const ta = mk()
      const ne = lib.waitAsync(ta, 0, one, 0)
      const to = lib.waitAsync(ta, 0, zero, 0)
      const neForever = lib.waitAsync(ta, 0, one)
      const wait = lib.waitAsync(ta, 0, zero)
      const isPromise = wait.value instanceof Promise
      const woken = lib.notify(ta, 0, 1)
      got[name] = { ne: describeObject(ne), to: describeObject(to), neForever: describeObject(neForever), wait: describeObject(wait), isPromise, woken, settled: await settle(wait.value) }
    }
    t.strictSame(got.sabsync, got.Atomics, `${kind}: the same result objects as Atomics.waitAsync`)
    const dataProp = value => ({ value, writable: true, enumerable: true, configurable: true })
    t.strictSame(got.sabsync.ne, { proto: true, keys: ['async', 'value'], descriptors: { async: dataProp(false), value: dataProp('not-equal') }, extensible: true }, `${kind}: not-equal`)
    t.strictSame(got.sabsync.to, { proto: true, keys: ['async', 'value'], descriptors: { async: dataProp(false), value: dataProp('timed-out') }, extensible: true }, `${kind}: timed-out`)
    t.strictSame(got.sabsync.wait.descriptors, { async: dataProp(true), value: dataProp('Promise') }, `${kind}: async`)
    t.equal(got.sabsync.isPromise, true, `${kind}: value is a Promise`)
    t.equal(got.sabsync.settled, 'ok', `${kind}: resolves to ok`)
  }
})

t.test('wait answers ok when another thread notifies', async t => {
  for (const big of [false, true]) {
    const sab = new SharedArrayBuffer(32)
    const ta = big ? new BigInt64Array(sab) : new Int32Array(sab)
    const w = fixture('wait-atomics/notifier', { sab, big })
    const answer = message(w)
    await new Promise(resolve => w.once('online', resolve))
    const r = sabsync.wait(ta, 1, big ? 0n : 0, 10000)
    t.equal(r, 'ok', `${big ? 'BigInt64Array' : 'Int32Array'}: wait answers ok`)
    t.equal(await answer, 1, 'notify counted the one waiter')
    await w.exited
  }
})

// sabsync.wait takes a shortcut for the array that notify or wait saw last
// (lib/atomics.js): the same answers and errors as Atomics.wait there, for
// arguments that take it and for ones that must not.
t.test('wait on the array seen last: the same answers as Atomics.wait', async t => {
  const arrays = { Atomics: new Int32Array(new SharedArrayBuffer(16)), sabsync: new Int32Array(new SharedArrayBuffer(16)) }
  for (const ta of Object.values(arrays)) Atomics.store(ta, 1, 7)
  const indexes = [0, 1, 3, -0, 1.5, -1, 4, 2 ** 31, NaN, '1', undefined]
  const values = [0, 7, 7.9, -0, 2 ** 32 + 7, NaN, '7', undefined, 7n]
  const timeouts = [undefined, 0, -0, -1, NaN, 1, 0.5, '0', null]
  let cases = 0
  for (const index of indexes) {
    for (const value of values) {
      for (const timeout of timeouts) {
        // NaN and undefined would wait forever where the value is equal.
        if ((timeout === undefined || Number.isNaN(timeout)) && index !== 0.5) {
          const cell = Number.isNaN(Number(index)) ? 0 : Math.trunc(Number(index))
          if (cell >= 0 && cell < 4 && (Number(value) | 0) === (cell === 1 ? 7 : 0)) continue
        }
        const got = {}
        for (const name of NAMES) {
          const ta = arrays[name]
          LIBS[name].notify(ta, 3, 0) // the array seen last
          got[name] = outcome(() => LIBS[name].wait(ta, index, value, timeout))
        }
        t.strictSame(got.sabsync, got.Atomics, `wait(ta, ${String(index)}, ${String(value)}, ${String(timeout)})`)
        cases++
      }
    }
  }
  t.ok(cases > 500, `${cases} combinations`)
})

t.test('nothing is left waiting', async t => {
  // The parking lot's per-bucket waiter counters (see lib/lot.js).
  const onLot = lotWaiters()
  if (onLot !== null) t.equal(onLot, 0, 'every bucket of the parking lot is empty')
  t.equal(pending.length, 0)
})
