'use strict'
// Fuzz of the primitives' API with bad input: in rounds, thousands of calls
// (seeded PRNG: FUZZ_SEED=n to change the seed, FUZZ_ROUNDS=n for more) of
// every constructor, static and method of Mutex, AtomicFlag, Once, Latch,
// CondVar, RWLock, Barrier, Sema, RateLimit and RateLimiter, with random
// types and values
// for every argument: huge, NaN, negative and fractional numbers, bigints,
// symbols, strings, objects whose valueOf / Symbol.toPrimitive / getters
// throw or call back into the library, option bags with wrong fields,
// foreign and garbage memory, foreign tokens and handles, wrong receivers,
// non-AbortSignal signals. Each call must answer (a value of the documented
// type, or a promise) or throw a TypeError, RangeError or a SabsyncError
// with an ERR_SABSYNC_ code; a promise must settle the same way (or with
// the reason of an abort, or with what the fuzz's own callbacks threw).
// Blocking calls get only tiny timeouts (the main thread must not block
// long). Primitives on garbage memory or on another kind's memory ("wild")
// get every call too, but their promise calls { timeout: 0 }: a waiter on
// such memory may wait forever by design. After each round everything is
// released: every promise settles, no waiter is left on any cell of any
// primitive (sabsync.waiters, Sema's nrWaiting) and the parking lot's bucket
// counters sum to 0. FUZZ_TRACE=1 prints every call (and slow ones) to
// stderr, to find the call that broke a round.

const t = require('tap')
const { inspect } = require('util')
const { isProxy } = require('util').types
const sabsync = require('..')
const { Mutex, AtomicFlag, Once, Latch, CondVar, RWLock, Barrier, Sema, RateLimit, RateLimiter, SabsyncError } = sabsync
const { TAGS } = require('../lib/kind')
const helpers = require('./helpers')
const { sleep } = helpers

const SEED = Number(process.env.FUZZ_SEED) || 20261129
const ROUNDS = Number(process.env.FUZZ_ROUNDS) || 40
const CALLS = 150

// Threads waiting on the parking lot; 0 where the addon keeps no counters.
const lotWaiters = () => helpers.lotWaiters() || 0

// ---- randomness ----

let state = SEED | 0
function rnd () { // mulberry32
  state = (state + 0x6D2B79F5) | 0
  let x = Math.imul(state ^ (state >>> 15), 1 | state)
  x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
  return ((x ^ (x >>> 14)) >>> 0) / 4294967296
}
const pick = a => a[Math.floor(rnd() * a.length)]
const chance = p => rnd() < p
const int = n => Math.floor(rnd() * n)

// What the fuzz's own code throws (a fresh error at each throw, so that a
// stack says where), and its abort reasons: expected to come back out
// unchanged.
const thrown = new WeakSet()
function poison (where) {
  const err = new Error('thrown by the fuzz on purpose: ' + where)
  thrown.add(err)
  return err
}
const REASON = new Error('aborted by the fuzz')
const isOurs = err => thrown.has(err) || err === REASON ||
  (err instanceof DOMException && (err.name === 'AbortError' || err.name === 'TimeoutError'))

// The verdict on a thrown error or a rejection: the kind, or null (wrong).
function verdict (err) {
  if (isOurs(err)) return 'ours'
  if (err instanceof TypeError) return 'TypeError'
  if (err instanceof RangeError) return 'RangeError'
  if (err instanceof SabsyncError && typeof err.code === 'string' && err.code.startsWith('ERR_SABSYNC_')) return err.code
  return null
}

// ---- the world of one round ----

const KINDS = ['Mutex', 'AtomicFlag', 'Once', 'Latch', 'CondVar', 'RWLock', 'Barrier', 'Sema', 'RateLimit', 'RateLimiter']
const CLASSES = { Mutex, AtomicFlag, Once, Latch, CondVar, RWLock, Barrier, Sema, RateLimiter }

class World {
  constructor () {
    this.items = [] // { kind, obj, buffer, byteOffset, bytes, wild, pending }
    this.byBuffer = new Map() // buffer -> items
    this.pending = new Set() // { p, what, item }
    this.guards = []
    this.cleanup = new AbortController() // aborted when the round ends
    this.depth = 0
    this.reentries = 0
    this.ended = false
    this.stats = new Map() // outcome -> count
    this.problems = []
  }

  add (kind, obj, wild) {
    if (obj === null || (typeof obj !== 'object' && typeof obj !== 'function')) return
    const item = { kind, obj, buffer: obj.buffer, byteOffset: obj.byteOffset, bytes: bytesOf(kind, obj), wild, pending: 0 }
    // Memory shared with another item (a constructor over it, or a from()
    // of another kind): both are wild from now on.
    const same = this.byBuffer.get(item.buffer) || []
    for (const o of same) {
      if (o.obj === obj) return
      if (overlaps(o, item) && !(o.kind === kind && o.byteOffset === item.byteOffset && o.bytes === item.bytes)) {
        o.wild = true
        item.wild = true
      }
    }
    same.push(item)
    this.byBuffer.set(item.buffer, same)
    this.items.push(item)
    if (process.env.FUZZ_TRACE) console.error(`TRACE item #${this.items.length - 1}: ${kind}${wild ? ' (wild)' : ''} at ${item.byteOffset} of a buffer of ${item.buffer && item.buffer.byteLength}`)
  }

  any (kind) {
    const list = kind ? this.items.filter(i => i.kind === kind) : this.items
    return list.length ? pick(list) : undefined
  }

  // May memory of this buffer be re-initialised or used as another kind?
  // Not while calls on it are pending: they could be left waiting forever
  // (as with pthread_mutex_init over a mutex with waiters).
  quiet (buffer) {
    for (const i of this.byBuffer.get(buffer) || []) if (i.pending > 0) return false
    return true
  }

  count (what) {
    this.stats.set(what, (this.stats.get(what) || 0) + 1)
  }

  problem (msg) {
    if (this.problems.length < 20) this.problems.push(msg)
  }
}

const RATE_SLOW = new WeakSet() // RateLimits whose limit() may wait long

function bytesOf (kind, obj) {
  switch (kind) {
    case 'RWLock': return RWLock.byteLengthFor(obj.readerSlots)
    case 'Barrier': return Barrier.byteLengthFor(obj.parties)
    case 'Sema': return Sema.byteLengthFor(obj.nr)
    case 'RateLimit': return RateLimit.byteLengthFor(obj.rps)
    case 'RateLimiter': return RateLimiter.byteLengthFor(obj.keys)
    default: return CLASSES[kind].byteLength
  }
}

function overlaps (a, b) {
  return a.buffer === b.buffer && a.byteOffset < b.byteOffset + b.bytes && b.byteOffset < a.byteOffset + a.bytes
}

// ---- argument generators ----

let world

const NUMBERS = [0, -0, 1, 2, 3, 7, 8, 9, 16, 63, 64, 65, 1024, 0x100000, 0x100001, 0xFFFFF, 65536, 65537, -1, -8, 0.5, 1.5, 1e-9,
  NaN, Infinity, -Infinity, 2 ** 31 - 1, 2 ** 31, 2 ** 32, 2 ** 53, 2 ** 53 + 2, -(2 ** 53), 1e12, 1e13, Number.MAX_VALUE,
  Number.MIN_VALUE, -Number.MAX_VALUE]

function number () {
  return chance(0.8) ? pick(NUMBERS) : (rnd() - 0.3) * 10 ** int(12)
}

function smallInt () {
  return chance(0.8) ? int(6) : number()
}

// An object that calls back into the library (a random call on the world)
// when it is read: a getter or valueOf that "mutates".
function reenter () {
  // Bounded: async fns re-enter later, and could otherwise chain forever.
  if (world.depth > 1 || world.ended || world.reentries++ > 40) return
  world.depth++
  try {
    call(world)
  } finally {
    world.depth--
  }
}

function tricky () {
  switch (int(9)) {
    case 0: return { valueOf () { throw poison('valueOf') } }
    case 1: return { [Symbol.toPrimitive] () { throw poison('toPrimitive') } }
    case 2: return { valueOf () { reenter(); return 1 } }
    case 3: return { toString () { throw poison('toString') }, valueOf: null }
    case 4: return new Proxy({}, { get () { throw poison('Proxy get') }, has () { throw poison('Proxy has') }, getPrototypeOf () { throw poison('Proxy getPrototypeOf') }, ownKeys () { throw poison('Proxy ownKeys') }, getOwnPropertyDescriptor () { throw poison('Proxy getOwnPropertyDescriptor') } })
    case 5: return Object.create(null)
    case 6: return new Proxy(world.any()?.obj || {}, {})
    case 7: return Object.freeze([1])
    default: return { get then () { throw poison('then getter') } }
  }
}

function weird () {
  switch (int(22)) {
    case 0: return undefined
    case 1: return null
    case 2: return true
    case 3: return false
    case 4: return ''
    case 5: return '1'
    case 6: return 'abc'
    case 7: return Symbol('s')
    case 8: return 1n
    case 9: return -(2n ** 70n)
    case 10: return {}
    case 11: return []
    case 12: return [8]
    case 13: return () => 1
    case 14: return new Date(0)
    case 15: return new Int32Array(new SharedArrayBuffer(8))
    case 16: return new SharedArrayBuffer(8)
    case 17: return world.any()?.obj
    case 18: return new Error('an error value')
    default: return tricky()
  }
}

const any = () => chance(0.5) ? number() : weird()

// A timeout for a blocking call: never long (nothing to wake us here).
function blockingTimeout () {
  return chance(0.6) ? pick([0, -0, 0.1, 0.5, 1, 2, -1, -Infinity, 1e-9, Number.MIN_VALUE, NaN]) : pick([null, '1', {}, 1n, Symbol('t'), true, tricky()])
}

function signal () {
  switch (int(12)) {
    case 0: return AbortSignal.abort(REASON)
    case 1: return AbortSignal.abort()
    case 2: return AbortSignal.timeout(int(3))
    case 3: {
      const ac = new AbortController()
      setTimeout(() => ac.abort(REASON), int(4))
      return ac.signal
    }
    case 4: return world.cleanup.signal
    // Not AbortSignals: duck-typed ones that misbehave, and others.
    case 5: return { aborted: false, reason: REASON, addEventListener () {}, removeEventListener () {} }
    case 6: return { aborted: false, reason: REASON, addEventListener (type, fn) { fn() }, removeEventListener () {} }
    case 7: return { aborted: false, reason: REASON, addEventListener () { throw poison('addEventListener') }, removeEventListener () { throw poison('removeEventListener') } }
    case 8: return { get aborted () { throw poison('aborted getter') }, addEventListener () {}, removeEventListener () {} }
    case 9: return { aborted: true, get reason () { throw poison('reason getter') }, addEventListener () {}, removeEventListener () {} }
    case 10: return new EventTarget()
    default: return any()
  }
}

// Options of a promise call: { timeout, signal, ref } with random fields.
function asyncOptions () {
  switch (int(8)) {
    case 0: return undefined
    case 1: return any()
    case 2: return {
      get timeout () { reenter(); return 1 },
      get signal () { throw poison('signal getter') }
    }
    default: {
      const o = {}
      if (chance(0.6)) o.timeout = chance(0.5) ? pick([0, 1, 2, 5, Infinity, 1e12, -1, NaN]) : any()
      if (chance(0.4)) o.signal = signal()
      if (chance(0.2)) o.ref = chance(0.5) ? pick([true, false]) : any()
      if (chance(0.1)) o.extra = any()
      return o
    }
  }
}

// Memory for a constructor: fresh, garbage, another primitive's, or wrong.
// For a from() of `kind`, garbage mostly begins with that kind's tag (else
// with another kind's, or none): from() refuses memory without its kind's
// tag, and the garbage behind a right tag is what a primitive must survive.
function garbageBuffer (bytes, kind) {
  const sab = new SharedArrayBuffer(bytes)
  const i32 = new Int32Array(sab)
  const values = [0, 1, 2, 3, -1, 0x40000001, 0x80000001 | 0, 0x7FFFFFFF, 0x53454D31, 0x52415431, 64, 7, 0x100000, 0xFFFFF]
  for (let i = 0; i < i32.length; i++) i32[i] = chance(0.5) ? pick(values) : (rnd() * 2 ** 32) | 0
  if (kind !== undefined && i32.length > 0) {
    if (chance(0.7)) i32[0] = TAGS[kind]
    else if (chance(0.5)) i32[0] = TAGS[pick(KINDS)]
  }
  return sab
}

function buffer () {
  switch (int(9)) {
    case 0: return new SharedArrayBuffer(pick([0, 4, 7, 8, 16, 24, 40, 64, 256, 1024, 4096, 65536]))
    case 1: return garbageBuffer(pick([8, 16, 64, 256, 1024]))
    case 2: return new ArrayBuffer(64)
    case 3: return new SharedArrayBuffer(8, { maxByteLength: 1024 })
    case 4: {
      const item = world.any()
      return item && world.quiet(item.buffer) ? item.buffer : new SharedArrayBuffer(1024)
    }
    case 5: return undefined
    default: return chance(0.5) ? new SharedArrayBuffer(1024) : any()
  }
}

function byteOffset () {
  return chance(0.7) ? pick([undefined, 0, 8, 16, 24, 64, 512, 1016, 1024, 4, 7, -8, NaN, 8.5, 2 ** 53, Infinity]) : any()
}

// Options of a constructor: memory, plus the kind's own fields.
function memoryOptions (extra) {
  switch (int(7)) {
    case 0: return undefined
    case 1: return any()
    case 2: return { get buffer () { throw poison('buffer getter') } }
    case 3: return { get buffer () { reenter(); return new SharedArrayBuffer(64) }, byteOffset: 0 }
    default: {
      const o = {}
      if (chance(0.6)) o.buffer = buffer()
      if (chance(0.5)) o.byteOffset = byteOffset()
      if (extra) extra(o)
      return o
    }
  }
}

// A handle for X.from(): an item of any kind, its { buffer, byteOffset },
// garbage memory, or not a handle at all.
function handle (kind) {
  // Mostly one of this kind (to attach for real), else of any kind.
  const item = (chance(0.5) && world.any(kind)) || world.any()
  switch (int(6)) {
    case 0:
    case 1:
      return item ? item.obj : any()
    case 2:
      return item ? { buffer: item.buffer, byteOffset: chance(0.7) ? item.byteOffset : byteOffset() } : any()
    case 3:
      return { buffer: garbageBuffer(pick([8, 32, 64, 256, 2048]), kind), byteOffset: chance(0.8) ? 0 : byteOffset() }
    case 4:
      return { get buffer () { throw poison('handle buffer getter') }, byteOffset: 0 }
    default:
      return any()
  }
}

// A function argument (fn, initFn, pauseFn, ...).
function fnArg () {
  switch (int(9)) {
    case 0: return () => 1
    case 1: return () => { throw poison('fn') }
    case 2: return async () => 2
    case 3: return async () => { throw poison('async fn') }
    case 4: return () => sleep(int(3))
    case 5: return () => { reenter(); return 3 }
    case 6: return async () => { await sleep(int(2)); reenter() }
    case 7: return slot => slot * 2
    default: return any()
  }
}

// ---- the API: per kind, the constructor, statics and methods ----

const GET = Symbol('getter')

// Argument lists, per member. `b` marks a blocking call (tiny timeouts).
const API = {
  Mutex: {
    ctor: () => [memoryOptions()],
    statics: { from: () => [handle('Mutex')], byteLength: GET },
    methods: {
      lock: () => [blockingTimeout()],
      tryLock: () => [],
      lockAsync: () => [asyncOptions()],
      unlock: () => [],
      runExclusive: () => [fnArg(), asyncOptions()],
      guard: () => [blockingTimeout()],
      guardAsync: () => [asyncOptions()],
      isLocked: GET,
      ownerDied: GET
    }
  },
  AtomicFlag: {
    ctor: () => [memoryOptions()],
    statics: { from: () => [handle('AtomicFlag')], byteLength: GET },
    methods: {
      testAndSet: () => [],
      clear: () => [],
      test: () => [],
      wait: () => [chance(0.8) ? pick([true, false]) : any(), blockingTimeout()],
      waitAsync: () => [chance(0.8) ? pick([true, false]) : any(), asyncOptions()],
      notifyOne: () => [],
      notifyAll: () => [any()]
    }
  },
  Once: {
    ctor: () => [memoryOptions()],
    statics: { from: () => [handle('Once')], byteLength: GET },
    methods: {
      run: () => [fnArg(), blockingTimeout()],
      runAsync: () => [fnArg(), asyncOptions()],
      done: GET
    }
  },
  Latch: {
    ctor: () => [smallInt(), memoryOptions()],
    statics: { from: () => [handle('Latch')], byteLength: GET },
    methods: {
      countDown: () => chance(0.2) ? [] : [smallInt()],
      tryWait: () => [],
      wait: () => [blockingTimeout()],
      waitAsync: () => [asyncOptions()],
      arriveAndWait: () => [smallInt(), blockingTimeout()],
      count: GET
    }
  },
  CondVar: {
    ctor: () => [memoryOptions()],
    statics: { from: () => [handle('CondVar')], byteLength: GET },
    methods: {
      wait: () => [mutexArg(), blockingTimeout()],
      waitAsync: () => [mutexArg(), asyncOptions()],
      notifyOne: () => [],
      notifyAll: () => []
    }
  },
  RWLock: {
    ctor: () => [memoryOptions(o => { if (chance(0.5)) o.readerSlots = chance(0.7) ? pick([1, 2, 3, 64, 65536, 65537, 0, -1, 1.5, NaN]) : any() })],
    statics: { from: () => [handle('RWLock')], byteLength: GET, byteLengthFor: () => [chance(0.5) ? smallInt() : any()] },
    methods: {
      readLock: () => [blockingTimeout()],
      tryReadLock: () => [],
      readLockAsync: () => [asyncOptions()],
      readUnlock: () => [],
      writeLock: () => [blockingTimeout()],
      tryWriteLock: () => [],
      writeLockAsync: () => [asyncOptions()],
      writeUnlock: () => [],
      readerSlots: GET,
      ownerDied: GET
    }
  },
  Barrier: {
    ctor: () => [chance(0.7) ? pick([1, 2, 3, 64, 65, 0xFFFFF, 0x100000, 0, -1, 2.5]) : any(), memoryOptions()],
    statics: { from: () => [handle('Barrier')], byteLength: GET, byteLengthFor: () => [chance(0.5) ? smallInt() : any()] },
    methods: {
      wait: () => [blockingTimeout()],
      waitAsync: () => [asyncOptions()],
      reset: () => [],
      parties: GET,
      isBroken: GET,
      arrived: GET
    }
  },
  Sema: {
    ctor: () => [chance(0.7) ? pick([1, 2, 3, 5, 64, 0x100000, 0x100001, 0, -1, 1.5, NaN]) : any(), memoryOptions(semaOptions)],
    statics: { from: () => [handle('Sema'), chance(0.5) ? undefined : semaOptionsBag()], byteLength: GET, byteLengthFor: () => [chance(0.5) ? smallInt() : any()] },
    methods: {
      tryAcquire: () => [],
      acquireSync: () => [blockingTimeout()],
      acquire: () => [asyncOptions()],
      release: () => chance(0.3) ? [] : [token()],
      drain: () => [asyncOptions()],
      nrWaiting: () => [],
      recovered: () => chance(0.3) ? [] : [token()],
      nr: GET
    }
  },
  RateLimit: {
    ctor: () => [chance(0.7) ? pick([1, 2, 5, 100, 0x100000, 0x100001, 0, -1, 1.5, NaN]) : any(), rateOptions()],
    statics: { from: () => [handle('RateLimit')], byteLength: GET, byteLengthFor: () => [chance(0.5) ? smallInt() : any()] },
    methods: {
      limit: () => [chance(0.5) ? undefined : chance(0.5) ? { signal: signal() } : any()],
      sync: () => [blockingTimeout()],
      nrWaiting: () => []
    }
  },
  RateLimiter: {
    ctor: () => [limiterOptions()],
    statics: { from: () => [handle('RateLimiter')], byteLength: GET, byteLengthFor: () => [chance(0.3) ? undefined : chance(0.5) ? smallInt() : any()] },
    methods: {
      consume: () => chance(0.4) ? [clientKey()] : [clientKey(), points()],
      peek: () => [clientKey()],
      refund: () => chance(0.4) ? [clientKey()] : [clientKey(), points()],
      reset: () => [clientKey()],
      store: () => [],
      limit: GET,
      window: GET,
      burst: GET,
      keys: GET,
      whenFull: GET
    }
  }
}

// A RateLimiter's options: sane ones mostly (a table of at most 4,096
// keys), each field sometimes out of range or of another type.
function limiterOptions () {
  const o = memoryOptions(m => {
    if (chance(0.9)) m.limit = chance(0.8) ? pick([1, 3, 100, 1e9]) : pick([0, -1, 1.5, 1e10, NaN, Infinity, '3', any()])
    if (chance(0.9)) m.window = chance(0.8) ? pick([1, 10, 1000, 60000]) : pick([0, -1, 2.5, 2 ** 31, NaN, any()])
    if (chance(0.4)) m.burst = chance(0.8) ? pick([1, 2, 50, 1e9]) : pick([0, -1, 1e10, any()])
    if (chance(0.8)) m.keys = chance(0.8) ? pick([1, 16, 17, 64, 1000, 4096]) : pick([0, -1, 2 ** 31, 1.5, any()])
    if (chance(0.3)) m.whenFull = chance(0.7) ? pick(['allow', 'deny']) : pick(['ALLOW', '', 1, any()])
  })
  return o
}

// A client key: short and long strings (the native path takes keys below
// 128 code units, JS the rest), lone surrogates, numbers, and what is
// neither.
function clientKey () {
  switch (int(8)) {
    case 0: return 'k' + int(20)
    case 1: return String(int(5))
    case 2: return int(5)
    case 3: return 'x'.repeat(pick([126, 127, 128, 129, 1000]))
    case 4: return pick(['', '\ud800', '\udfff', '\u0000', '\u{1F600}', 'é'])
    case 5: return pick([NaN, Infinity, -0, 1.5, 2 ** 60])
    default: return any()
  }
}

function points () {
  return chance(0.7) ? pick([1, 2, 3, 100, 1e9]) : pick([0, -1, 1.5, NaN, '1', 2 ** 53, any()])
}

// initFn runs once per token: cheap ones only (a Sema may have a million).
function initFnArg () {
  switch (int(5)) {
    case 0: return slot => slot * 2
    case 1: return () => 'the same token'
    case 2: return () => { throw poison('initFn') }
    case 3: return slot => ({ slot })
    default: return any()
  }
}

function semaOptions (o) {
  if (chance(0.3)) o.initFn = initFnArg()
  if (chance(0.2)) {
    o.pauseFn = fnArg()
    if (chance(0.9)) o.resumeFn = fnArg()
  }
  if (chance(0.2)) o.capacity = chance(0.5) ? pick([1, 10, 0, -1, 1.5]) : any()
}

function semaOptionsBag () {
  const o = {}
  semaOptions(o)
  return chance(0.9) ? o : any()
}

function rateOptions () {
  return memoryOptions(o => {
    if (chance(0.6)) o.timeUnit = chance(0.7) ? pick([1, 5, 50, 1000, 0, -1, 0.001, 1e11, 1e12, Infinity, NaN]) : any()
    if (chance(0.3)) o.uniformDistribution = chance(0.7) ? pick([true, false]) : any()
  })
}

// A CondVar's mutex: a sane one mostly. (Not a wild one: a CondVar re-takes
// its mutex after an abort too, and memory that another kind scribbles on
// can look held by a thread that does not exist, forever.)
function mutexArg () {
  const sane = world.items.filter(i => i.kind === 'Mutex' && !i.wild)
  const others = world.items.filter(i => i.kind !== 'Mutex')
  const m = chance(0.75) && sane.length ? pick(sane).obj : chance(0.5) && others.length ? pick(others).obj : any()
  return world.items.some(i => i.obj === m && i.kind === 'Mutex' && i.wild) ? {} : m
}

function token () {
  const s = world.any('Sema')
  return chance(0.6) ? pick([0, 1, 2, 3, 4, -1, 0.5, NaN, 2 ** 32, 0x100000]) : chance(0.5) && s ? pick([0, 2, 4, 'x', undefined]) : any()
}

// ---- calling ----

// The documented answers.
const isBool = v => typeof v === 'boolean'
const isCount = v => Number.isInteger(v) && v >= 0
const ANSWERS = {
  lock: isBool,
  tryLock: isBool,
  lockAsync: isBool,
  unlock: v => v === undefined,
  guard: v => v === undefined || (typeof v === 'object' && typeof v[Symbol.dispose ?? Symbol.for('nodejs.dispose')] === 'function'),
  isLocked: isBool,
  ownerDied: isBool,
  testAndSet: isBool,
  clear: v => v === undefined,
  test: isBool,
  notifyOne: isCount,
  notifyAll: isCount,
  done: isBool,
  run: v => v === true || v === false || v === undefined,
  runAsync: v => v === true || v === false || v === undefined,
  countDown: v => v === undefined,
  tryWait: isBool,
  arriveAndWait: isBool,
  count: Number.isInteger,
  readLock: isBool,
  tryReadLock: isBool,
  readLockAsync: isBool,
  readUnlock: v => v === undefined,
  writeLock: isBool,
  tryWriteLock: isBool,
  writeLockAsync: isBool,
  writeUnlock: v => v === undefined,
  readerSlots: isCount,
  reset: v => v === undefined,
  parties: isCount,
  isBroken: isBool,
  arrived: isCount,
  nrWaiting: isCount,
  recovered: isBool,
  nr: isCount,
  release: v => v === undefined,
  drain: Array.isArray,
  limit: v => typeof v === 'number' && v > 0,
  sync: v => v === undefined || (typeof v === 'number' && v > 0),
  byteLength: v => Number.isInteger(v) && v > 0 && v % 8 === 0,
  byteLengthFor: v => Number.isInteger(v) && v > 0 && v % 8 === 0
}

// RateLimiter's members (some share a name with another kind's).
const isLimiterAnswer = v => v !== null && typeof v === 'object' && isBool(v.allowed) && isCount(v.remaining) &&
  typeof v.retryAfter === 'number' && v.retryAfter >= 0 && typeof v.resetAfter === 'number' && v.resetAfter >= 0 &&
  isCount(v.limit) && v.limit > 0
const LIMITER_ANSWERS = {
  consume: isLimiterAnswer,
  peek: isLimiterAnswer,
  refund: v => v === undefined,
  reset: v => v === undefined,
  store: v => v !== null && typeof v === 'object' && typeof v.increment === 'function',
  limit: v => isCount(v) && v > 0,
  window: v => isCount(v) && v > 0,
  burst: v => isCount(v) && v > 0,
  keys: v => isCount(v) && v > 0,
  whenFull: v => v === 'allow' || v === 'deny',
  byteLength: ANSWERS.byteLength,
  byteLengthFor: ANSWERS.byteLengthFor
}
const WAITS = { wait: isBool, waitAsync: isBool } // kinds differ: checked below

function checkAnswer (kind, name, v) {
  if (name === 'wait' || name === 'waitAsync') {
    if (kind === 'Barrier') return v === undefined || (v !== null && typeof v === 'object' && isBool(v.isLeader))
    return WAITS[name](v)
  }
  if (name === 'acquire' || name === 'acquireSync' || name === 'tryAcquire') return true // tokens are the user's values
  if (name === 'runExclusive' || name === 'guardAsync' || name === 'from' || name === 'construct') return true
  const ok = kind === 'RateLimiter' ? LIMITER_ANSWERS[name] : ANSWERS[name]
  return ok === undefined || ok(v)
}

function describe (args) {
  try {
    return inspect(args, { depth: 1, showProxy: true, breakLength: Infinity })
  } catch {
    return '(arguments that cannot be inspected)'
  }
}

function settleOf (item, what, kind, name, p) {
  if (!(p instanceof Promise)) {
    world.problem(`${what}: answered ${typeof p}, not a promise`)
    return
  }
  const rec = { what: `${what}${item && item.wild ? ' (wild)' : ''} with ${describe(world.args)}`, item }
  world.pending.add(rec)
  // The items it uses (the receiver; a CondVar's mutex) count as busy.
  const used = world.items.filter(i => i === item || (Array.isArray(world.args) && world.args.includes(i.obj)))
  for (const i of used) i.pending++
  const done = () => {
    world.pending.delete(rec)
    for (const i of used) i.pending--
  }
  p.then(v => {
    done()
    world.count(`${kind}.${name} resolved`)
    if (!checkAnswer(kind, name, v)) world.problem(`${what}: resolved with ${String(v)}`)
    if (name === 'guardAsync' && v !== undefined) world.guards.push(v)
  }, err => {
    done()
    const k = verdict(err)
    if (k === null) world.problem(`${what}: rejected with ${err && err.stack ? err.stack : String(err)}`)
    else world.count(`${kind}.${name} rejected ${k}`)
  })
}

// Options for a promise call on an item that nothing else might release.
// Wild memory (garbage, or another kind's too): { timeout: 0 }, so that
// nothing waits on it (a waiter there could be left waiting forever, or
// spin on a word that another kind's calls scribbled on: undefined
// behaviour, as with a pthread mutex over arbitrary memory); the sync calls
// on it still run, with tiny timeouts. A slow RateLimit: the round's
// cleanup signal ends the wait.
function tame (item, name, args) {
  const async = /Async$|^acquire$|^drain$|^runExclusive$|^limit$/.test(name)
  if (!async || !item) return args
  const used = world.items.filter(i => i === item || args.includes(i.obj))
  const wild = used.some(i => i.wild)
  const slow = item.kind === 'RateLimit' && RATE_SLOW.has(item.obj)
  if (!wild && !slow) return args
  const at = name === 'runExclusive' || name === 'runAsync' || (name === 'waitAsync' && (item.kind === 'AtomicFlag' || item.kind === 'CondVar')) ? 1 : 0
  const o = args[at]
  if (o === undefined || (o !== null && typeof o === 'object')) {
    args[at] = wild && item.kind !== 'RateLimit' ? { timeout: 0, signal: world.cleanup.signal } : { signal: world.cleanup.signal }
  }
  return args
}

// One random call: a constructor, a static or a method (sometimes with the
// wrong receiver).
function call (w) {
  const kind = pick(KINDS)
  const api = API[kind]
  const r = rnd()
  if (r < 0.15 || w.items.length < 3) return construct(w, kind, api)
  if (r < 0.25) {
    const name = pick(Object.keys(api.statics))
    const gen = api.statics[name]
    const target = kind === 'RateLimit' ? RateLimit : CLASSES[kind]
    const what = `${kind}.${name}`
    return attempt(w, what, kind, name, null, () => {
      if (gen === GET) return target[name]
      const args = w.args = gen()
      if (name === 'from') args[0] = quietHandle(w, kind, args[0])
      if (process.env.FUZZ_TRACE) console.error('TRACE call', what, describe(args))
      return target[name](...args)
    }, name === 'from')
  }
  if (r < 0.3 && w.guards.length > 0) {
    const g = pick(w.guards)
    return attempt(w, 'MutexGuard dispose', 'Mutex', 'dispose', null, () => g[Symbol.dispose ?? Symbol.for('nodejs.dispose')]())
  }
  let item = w.any(kind)
  if (item === undefined) return construct(w, kind, api)
  w.args = []
  let name = pick(Object.keys(api.methods))
  // drain() makes nr acquires: not on a Sema of a million tokens.
  if (name === 'drain' && !(item.obj.nr <= 1024)) name = 'nrWaiting'
  const gen = api.methods[name]
  let self = item.obj
  let what = `${kind}#${name}`
  if (chance(0.04)) {
    // The wrong receiver: another item (maybe of another kind), a plain
    // object, a Proxy. An item is the one the call is about.
    self = pick([w.any()?.obj, {}, null, new Proxy(item.obj, {}), Object.create(item.obj)])
    what += ' on a wrong receiver'
    item = w.items.find(i => i.obj === self) || item
  }
  let fn
  if (kind === 'RateLimit') {
    fn = name === 'limit' ? item.obj : item.obj[name]
  } else if (gen !== GET) {
    fn = CLASSES[kind].prototype[name]
  }
  return attempt(w, what, kind, name, item, () => {
    if (gen === GET) {
      const d = Object.getOwnPropertyDescriptor(CLASSES[kind].prototype, name)
      return d && d.get ? d.get.call(self) : self[name]
    }
    const args = w.args = tame(item, name, gen())
    if (process.env.FUZZ_TRACE) console.error('TRACE call', what, '#' + w.items.indexOf(item), describe(args))
    return kind === 'RateLimit' ? fn(...args) : fn.apply(self, args)
  })
}

// The buffer and byteOffset that an options bag or a handle names, as far
// as they can be read without running its code (a Proxy: through it, its
// throws caught).
function namedMemory (o) {
  if (o === null || (typeof o !== 'object' && typeof o !== 'function')) return {}
  if (isProxy(o)) {
    try {
      return { buffer: o.buffer, byteOffset: o.byteOffset }
    } catch {
      return {}
    }
  }
  const b = Object.getOwnPropertyDescriptor(o, 'buffer')
  const at = Object.getOwnPropertyDescriptor(o, 'byteOffset')
  return { buffer: b && 'value' in b ? b.value : undefined, byteOffset: at && 'value' in at ? at.value : undefined }
}

// A from() handle that would use memory with pending calls as another kind
// (or at another offset) is swapped for garbage memory (see World.quiet).
function quietHandle (w, kind, h) {
  const { buffer, byteOffset = 0 } = namedMemory(h)
  if (buffer === undefined || w.quiet(buffer)) return h
  if (!isProxy(h) && (w.byBuffer.get(buffer) || []).some(i => i.kind === kind && i.byteOffset === byteOffset && !i.wild)) return h
  return { buffer: garbageBuffer(256, kind), byteOffset: 0 }
}

function construct (w, kind, api) {
  const what = `new ${kind}`
  return attempt(w, what, kind, 'construct', null, () => {
    const args = w.args = api.ctor()
    if (process.env.FUZZ_TRACE) console.error('TRACE call', what, describe(args))
    // Memory with pending calls is not re-initialised (see World.quiet).
    const { buffer } = namedMemory(args[args.length - 1])
    if (buffer !== undefined && !w.quiet(buffer)) args[args.length - 1] = { buffer: new SharedArrayBuffer(1024) }
    return kind === 'RateLimit' ? (chance(0.5) ? RateLimit(...args) : new RateLimit(...args)) : new CLASSES[kind](...args)
  }, true)
}

function attempt (w, what, kind, name, item, fn, makes) {
  if (process.env.FUZZ_TRACE) w.trace = () => `${what}${item ? ' #' + w.items.indexOf(item) : ''} ${describe(w.args)}`
  let v
  const t0 = process.env.FUZZ_TRACE ? Date.now() : 0
  try {
    v = fn()
    if (process.env.FUZZ_TRACE && Date.now() - t0 > 50) console.error(`TRACE SLOW ${Date.now() - t0} ms:`, w.trace())
  } catch (err) {
    if (process.env.FUZZ_TRACE && Date.now() - t0 > 50) console.error(`TRACE SLOW ${Date.now() - t0} ms:`, w.trace())
    const k = verdict(err)
    if (process.env.FUZZ_TRACE) console.error('TRACE', w.trace(), 'threw', String(err))
    if (k === null) w.problem(`${what}: threw ${err && err.stack ? err.stack : String(err)}`)
    else w.count(`${what} threw ${k}`)
    return
  }
  if (process.env.FUZZ_TRACE) console.error('TRACE', w.trace(), '->', describe([v]))
  w.count(`${what} answered`)
  if (v instanceof Promise) return settleOf(item, what, kind, name, v)
  if (!checkAnswer(kind, name, v)) w.problem(`${what}: answered ${String(v)}`)
  if (name === 'guard' && v !== undefined) w.guards.push(v)
  if (makes) {
    const fromHandle = name === 'from'
    const known = fromHandle && (w.byBuffer.get(v.buffer) || []).some(i => i.kind === kind && i.byteOffset === v.byteOffset && !i.wild)
    w.add(kind, v, fromHandle && !known)
    if (kind === 'RateLimit' && (v.timeUnit > 20 || v.uniformDistribution)) RATE_SLOW.add(v)
  }
}

// ---- the end of a round: release everything, check nothing waits ----

// `phase` alternates a flag between set and clear (for waiters on either
// value), long enough for a woken waiter to look at it.
function release (item, phase) {
  const o = item.obj
  const quietly = fn => { try { fn() } catch {} }
  switch (item.kind) {
    case 'Mutex':
      for (let i = 0; i < 8; i++) quietly(() => o.unlock())
      break
    case 'AtomicFlag':
      quietly(() => { (phase >> 3) & 1 ? o.testAndSet() : o.clear() })
      quietly(() => o.notifyAll())
      break
    case 'Latch':
      quietly(() => { if (o.count > 0) o.countDown(o.count) })
      break
    case 'CondVar':
      quietly(() => o.notifyAll())
      break
    case 'RWLock':
      for (let i = 0; i < 8; i++) quietly(() => o.readUnlock())
      quietly(() => o.writeUnlock())
      break
    case 'Barrier':
      // (reset() clears a slot per party: not a million of them each turn)
      quietly(() => { if (item.pending > 0 || o.arrived > 0 || o.isBroken) o.reset() })
      break
    case 'Sema':
      for (let i = 0; i < 8; i++) quietly(() => o.release())
      break
  }
}

// Waiters on the cells of an item (the first 64: every primitive parks on
// cells of its header; the lot's counters cover the rest).
function cellsOf (item) {
  if (!(item.buffer instanceof SharedArrayBuffer)) return 0
  const n = Math.min(item.bytes, item.buffer.byteLength - item.byteOffset, 256) >> 2
  if (n <= 0) return 0
  const i32 = new Int32Array(item.buffer, item.byteOffset, n)
  let w = 0
  for (let i = 0; i < n; i++) w += sabsync.waiters(i32, i)
  return w
}

async function endRound (w) {
  w.ended = true
  w.cleanup.abort(REASON)
  const t0 = Date.now()
  for (let phase = 0; w.pending.size > 0 && Date.now() - t0 < 5000; phase++) {
    for (const item of w.items) release(item, phase)
    await sleep(1)
  }
  for (const g of w.guards) try { g[Symbol.dispose ?? Symbol.for('nodejs.dispose')]() } catch {}
  for (const item of w.items) release(item, 0)
  if (w.pending.size > 0) {
    const state = item => {
      if (!item || !(item.buffer instanceof SharedArrayBuffer)) return ''
      const n = Math.min(item.bytes, item.buffer.byteLength - item.byteOffset, 32) >> 2
      return ` [memory ${Array.from(new Int32Array(item.buffer, item.byteOffset, n), v => '0x' + (v >>> 0).toString(16)).join(' ')}; ${cellsOf(item)} waiting]`
    }
    w.problem(`${w.pending.size} promises never settled: ${[...w.pending].slice(0, 5).map(r => r.what + state(r.item)).join('; ')}`)
  }
  // Pending waits settle a tick after their promise (timers, loop callbacks).
  let left = 0
  let lot = 0
  for (let i = 0; i < 200; i++) {
    left = 0
    const bad = []
    for (const item of w.items) {
      let n = cellsOf(item)
      if (item.kind === 'Sema' || item.kind === 'RateLimit') try { n += item.obj.nrWaiting() } catch {}
      if (n > 0) bad.push(`${item.kind}${item.wild ? ' (wild)' : ''}: ${n}`)
      left += n
    }
    lot = lotWaiters()
    if (left === 0 && lot === 0) break
    if (i === 199) w.problem(`waiters left: ${bad.join(', ')}; the lot's counters sum to ${lot}`)
    for (const item of w.items) release(item, 0)
    await sleep(5)
  }
}

// ---- the test ----

t.test('random calls of every primitive\'s API answer or throw the right errors, and leave nothing waiting', async t => {
  const unhandled = []
  const onUnhandled = err => unhandled.push(err)
  process.on('unhandledRejection', onUnhandled)
  const totals = new Map()
  let calls = 0
  const t0 = Date.now()
  for (let round = 0; round < ROUNDS; round++) {
    if (process.env.FUZZ_TRACE) console.error('TRACE round', round)
    const tr = Date.now()
    world = new World()
    // A few sane ones of each kind to call methods on.
    for (const kind of KINDS) {
      if (kind === 'RateLimit') world.add(kind, RateLimit(pick([1, 3, 100]), { timeUnit: pick([1, 5]) }), false)
      else if (kind === 'Latch') world.add(kind, new Latch(int(3)), false)
      else if (kind === 'Barrier') world.add(kind, new Barrier(1 + int(3)), false)
      else if (kind === 'Sema') world.add(kind, new Sema(1 + int(3), chance(0.5) ? { initFn: s => 'token ' + s } : undefined), false)
      else if (kind === 'RateLimiter') world.add(kind, new RateLimiter({ limit: pick([1, 3, 100]), window: pick([10, 1000]), keys: pick([1, 16, 64]) }), false)
      else world.add(kind, new CLASSES[kind](), false)
    }
    for (let i = 0; i < CALLS; i++) {
      call(world)
      calls++
      if (i % 10 === 9) {
        if (process.env.FUZZ_TRACE) console.error('TRACE sleep; pending:', [...world.pending].map(r => r.what).join(' | '))
        await sleep(int(2)) // let promises and timers move
      }
    }
    const te = Date.now()
    await endRound(world)
    if (process.env.FUZZ_TRACE) console.error(`TRACE round ${round}: calls ${te - tr} ms, end ${Date.now() - te} ms`)
    for (const [k, n] of world.stats) totals.set(k, (totals.get(k) || 0) + n)
    if (world.problems.length > 0) {
      t.fail(`seed ${SEED}, round ${round}: ${world.problems.length} problem(s)`, { problems: world.problems })
      break
    }
  }
  await sleep(10)
  process.off('unhandledRejection', onUnhandled)
  // The fuzz's own async fns that throw, passed where their promise is not
  // awaited (Once#run, as documented; initFn, pauseFn, resumeFn), reject
  // unhandled: those are the caller's. Anything else is the library's.
  const dropped = unhandled.filter(isOurs).length
  t.same(unhandled.filter(e => !isOurs(e)).map(e => String(e && e.stack)), [],
    `no unhandled rejection but the fuzz's own (${dropped} of its async fns were not awaited)`)
  t.equal(lotWaiters(), 0, 'the parking lot\'s bucket counters sum to 0')
  // Coverage: every constructor, static and method was called, and answered
  // at least once where it can.
  const members = []
  for (const kind of KINDS) {
    const api = API[kind]
    members.push(`new ${kind}`)
    for (const name of Object.keys(api.statics)) members.push(`${kind}.${name}`)
    for (const name of Object.keys(api.methods)) members.push(`${kind}#${name}`)
  }
  const reached = m => [...totals.keys()].some(k => k.startsWith(m + ' '))
  const missed = members.filter(m => !reached(m))
  t.same(missed, [], 'every constructor, static and method was called')
  const unanswered = members.filter(m => !totals.get(m + ' answered'))
  t.ok(unanswered.length <= 1, `${members.length - unanswered.length} of ${members.length} members answered at least once` +
    (unanswered.length ? ` (not: ${unanswered.join(', ')})` : ''))
  const kinds = new Map()
  for (const [k, n] of totals) {
    const m = / (threw|rejected) (.*)$/.exec(k)
    if (m) kinds.set(m[2], (kinds.get(m[2]) || 0) + n)
  }
  t.comment(`${calls} calls in ${ROUNDS} rounds (seed ${SEED}), ${((Date.now() - t0) / 1000).toFixed(1)} s; errors: ` +
    [...kinds].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${n}`).join(', '))
})
