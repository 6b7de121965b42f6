'use strict'
// Mistakes at the first contact with a primitive's memory fail at once, with
// an error that names the mistake and the fix, instead of silently or late:
// a buffer passed where options go (the constructor made a fresh buffer, so
// workers attached to `sab` locked another mutex), from() of another kind's
// memory (Mutex.from(semaHandle).lock() hung forever), a handle without a
// buffer, a RateLimit posted to a worker. Every primitive's memory begins
// with a kind tag (lib/kind.js) that from() checks.
const t = require('tap')
const fs = require('fs')
const path = require('path')
const { Worker, MessageChannel } = require('worker_threads')
const sabsync = require('..')
const { Mutex, AtomicFlag, Once, Latch, CondVar, RWLock, Barrier, Sema, RateLimit, RateLimiter, SabsyncError } = sabsync
const { TAGS } = require('../lib/kind')
const { fixtureSource } = require('./helpers')

const make = {
  Mutex: o => new Mutex(o),
  AtomicFlag: o => new AtomicFlag(o),
  Once: o => new Once(o),
  Latch: o => new Latch(2, o),
  CondVar: o => new CondVar(o),
  RWLock: o => new RWLock(o),
  Barrier: o => new Barrier(2, o),
  Sema: o => new Sema(2, o),
  RateLimit: o => RateLimit(2, o),
  // Its options hold its parameters too: added to plain options only, so
  // that memory passed as options reaches the constructor as it is.
  RateLimiter: o => new RateLimiter(o === undefined || Object.getPrototypeOf(o) === Object.prototype ? { limit: 2, window: 1000, keys: 16, ...o } : o)
}
const from = { Mutex, AtomicFlag, Once, Latch, CondVar, RWLock, Barrier, Sema, RateLimit, RateLimiter }
const KINDS = Object.keys(make)
const an = kind => (kind === 'AtomicFlag' ? 'an ' : 'a ') + kind

t.test('a buffer, a typed array or a primitive passed as options is a TypeError that says what to pass', async t => {
  const sab = new SharedArrayBuffer(1024)
  for (const kind of KINDS) {
    const err = t.throws(() => make[kind](sab), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' }, `${kind}(sab)`)
    t.match(err.message, /"options"/, 'names the argument')
    t.match(err.message, 'Received a SharedArrayBuffer', 'says what it got')
    t.match(err.message, '{ buffer: sab, byteOffset }', 'says what to pass to construct in it')
    t.match(err.message, `${kind}.from(`, 'and how to attach instead')
    t.throws(() => make[kind](new Int32Array(sab)), { name: 'TypeError', message: /typed array.*\{ buffer: view\.buffer, byteOffset \}/ }, `${kind}(typed array)`)
    t.throws(() => make[kind](new ArrayBuffer(64)), { name: 'TypeError', message: /Received an ArrayBuffer/ }, `${kind}(ArrayBuffer)`)
    t.throws(() => make[kind]([sab, 0]), { name: 'TypeError', message: /an array/ }, `${kind}([sab, 0])`)
  }
  t.equal(new Int32Array(sab).some(v => v !== 0), false, 'nothing was written into the buffer')
  // An existing primitive as options would be re-initialised under its users.
  const m = new Mutex()
  m.lock()
  t.throws(() => new Mutex(m), { name: 'TypeError', message: /Received a Mutex where options were expected.*Mutex\.from\(it\)/ })
  t.throws(() => new Latch(1, m), { name: 'TypeError', message: /Received a Mutex where options were expected/ })
  t.equal(m.isLocked, true, 'the mutex was left alone')
  m.unlock()
  // What the message asks for works: { buffer: sab, byteOffset } then from().
  const m2 = new Mutex({ buffer: sab, byteOffset: 16 })
  t.ok(m2.lock())
  t.equal(Mutex.from({ buffer: sab, byteOffset: 16 }).isLocked, true, 'from() attaches to the one made in sab')
  m2.unlock()
})

t.test('from() of memory that holds another kind is a TypeError naming both kinds, before any wait', async t => {
  const made = {}
  for (const kind of KINDS) made[kind] = make[kind]()
  for (const want of KINDS) {
    for (const have of KINDS) {
      const x = made[have]
      if (want === have) {
        t.ok(from[want].from(x), `${want}.from(${have}) attaches`)
        continue
      }
      const err = t.throws(() => from[want].from({ buffer: x.buffer, byteOffset: x.byteOffset }),
        { name: 'TypeError', code: 'ERR_SABSYNC_WRONG_KIND' }, `${want}.from(${have})`)
      t.equal(err.message.startsWith(`${want}.from(handle): the memory at byteOffset 0 holds ${an(have)}, not ${an(want)}.`), true, err.message)
      t.match(err.message, `${have}.from(handle)`, 'says how to attach to what is there')
    }
  }
  // The cases from the issue: Mutex.from(a Sema's handle) used to be
  // accepted and lock() then hung; Sema.from(a Mutex) spoke of
  // "options.byteOffset must be <= -24".
  const sema = new Sema(3)
  t.throws(() => Mutex.from(structuredClone(sema)), { name: 'TypeError', message: 'holds a Sema, not a Mutex' })
  t.throws(() => Sema.from(new Mutex()), { name: 'TypeError', message: 'holds a Mutex, not a Sema' })
  // A RateLimit's memory begins with its grant ring (tag RAT1); its turn
  // is a Sema after it: from() of the wrong kind at either offset says so.
  const limit = RateLimit(2)
  t.throws(() => Sema.from(limit.handle), { name: 'TypeError', message: 'holds a RateLimit, not a Sema' })
  const turnAt = limit.byteOffset + RateLimit.byteLengthFor(2) - Sema.byteLengthFor(1)
  t.throws(() => RateLimit.from({ buffer: limit.buffer, byteOffset: turnAt }), { name: 'TypeError', message: 'holds a Sema, not a RateLimit' })
  // At another offset in one buffer.
  const buffer = new SharedArrayBuffer(64)
  new Mutex({ buffer, byteOffset: 0 }) // eslint-disable-line no-new
  new Latch(1, { buffer, byteOffset: 16 }) // eslint-disable-line no-new
  t.throws(() => Mutex.from({ buffer, byteOffset: 16 }), { name: 'TypeError', message: 'Mutex.from(handle): the memory at byteOffset 16 holds a Latch, not a Mutex' })
})

t.test('zeroed memory and memory that holds no primitive are told apart from another kind', async t => {
  for (const kind of KINDS) {
    const buffer = new SharedArrayBuffer(2048)
    const zero = t.throws(() => from[kind].from({ buffer, byteOffset: 8 }), { name: 'SabsyncError', code: 'ERR_SABSYNC_BAD_MEMORY' }, `${kind}.from(zeroed)`)
    t.match(zero.message, `${kind}.from(handle): no ${kind} at byteOffset 8 of this buffer: the memory there is zeroed`)
    t.match(zero.message, kind === 'RateLimit' ? 'RateLimit(rps, { buffer, byteOffset })' : `new ${kind}(`, 'says how to make one')
    new Int32Array(buffer).fill(0x01020304)
    const junk = t.throws(() => from[kind].from({ buffer, byteOffset: 8 }), { name: 'SabsyncError', code: 'ERR_SABSYNC_BAD_MEMORY' }, `${kind}.from(garbage)`)
    t.match(junk.message, "its first word (0x01020304) is no sabsync primitive's kind tag")
    t.ok(zero instanceof SabsyncError && junk instanceof SabsyncError)
  }
  // A Mutex over zeroed memory used to attach (zero reads as a free lock)
  // and share nothing with the thread that meant another memory.
  t.throws(() => Mutex.from({ buffer: new SharedArrayBuffer(16), byteOffset: 0 }), { code: 'ERR_SABSYNC_BAD_MEMORY', message: /zeroed/ })
})

t.test('a handle without a buffer says what to pass, and finds the handle one level down', async t => {
  const pool = new Sema(4)
  // new Worker(file, { workerData: { pool } }) then Sema.from(workerData):
  // the structured clone is what the worker receives.
  const workerData = structuredClone({ pool })
  const err = t.throws(() => Sema.from(workerData), { name: 'TypeError', code: 'ERR_INVALID_ARG_TYPE' })
  t.match(err.message, 'The "handle.buffer" argument must be a SharedArrayBuffer. Received undefined')
  t.match(err.message, 'did you mean Sema.from(handle.pool)?')
  t.notMatch(err.message, /no Sema at byteOffset/, 'not the old message about a fresh buffer')
  t.equal(Sema.from(workerData.pool).nr, 4, 'the suggested call works')
  for (const kind of KINDS) {
    t.throws(() => from[kind].from({}), { name: 'TypeError', message: new RegExp(`"handle\\.buffer".*Pass the ${kind} itself`) }, `${kind}.from({})`)
    t.throws(() => from[kind].from(new SharedArrayBuffer(64)), { name: 'TypeError', message: 'not the bare buffer: pass { buffer: sab, byteOffset }' }, `${kind}.from(sab)`)
  }
  // A typed array inside the handle is not mistaken for a handle.
  const e2 = t.throws(() => Mutex.from({ counter: new Int32Array(new SharedArrayBuffer(8)) }))
  t.notMatch(e2.message, /did you mean/)
})

t.test('a buffer too small for the primitive says so, not "<= -24"', async t => {
  const err = t.throws(() => new Sema(2, { buffer: new SharedArrayBuffer(16) }), { name: 'RangeError', code: 'ERR_OUT_OF_RANGE' })
  t.match(err.message, '"options.byteOffset"')
  t.match(err.message, `a Sema needs ${Sema.byteLengthFor(2)} bytes, more than the whole buffer (16 bytes)`)
  t.notMatch(err.message, /<= -/)
})

t.test('postMessage(limit) fails naming the fix; limit.handle is what to post', async t => {
  const limit = RateLimit(3, { timeUnit: 1000 })
  const { port1, port2 } = new MessageChannel()
  t.teardown(() => { port1.close(); port2.close() })
  const err = t.throws(() => port1.postMessage(limit), { name: 'DataCloneError' })
  t.match(err.message, 'cannot be posted: post limit.handle, then RateLimit.from(it)')
  t.notMatch(err.message, /rateTake|acquire|tryAcquire/, 'no library source in the message')
  t.ok(err.message.length < 300, 'a short message')
  t.same(Object.keys(limit.handle).sort(), ['buffer', 'byteLength', 'byteOffset'])
  t.ok(Object.isFrozen(limit.handle))
  // limit.handle crosses to a real worker, which attaches and takes a grant.
  const w = new Worker(fixtureSource('kinds/rate-limit-handle'), { eval: true, workerData: limit.handle })
  const exited = new Promise(resolve => w.once('exit', resolve)) // listen at once: it may exit right after posting
  const msg = await new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject) })
  t.same(msg, { rps: 3, granted: true })
  t.equal(await exited, 0)
})

t.test('each primitive\'s memory begins with its kind tag, written by its constructor', async t => {
  const header = fs.readFileSync(path.join(__dirname, '..', 'include', 'sabsync.h'), 'utf8')
  const c = name => Number(header.match(new RegExp(`#define ${name}\\s+(0x[0-9A-Fa-f]+)`))[1])
  t.equal(TAGS.Sema, c('SAB_SEMA_MAGIC'), 'Sema: the C core\'s magic')
  t.equal(TAGS.RateLimit, c('SAB_RATE_MAGIC'), 'RateLimit: the C core\'s magic')
  t.equal(new Set(Object.values(TAGS)).size, KINDS.length, 'every kind its own tag')
  for (const kind of KINDS) {
    const buffer = new SharedArrayBuffer(4096)
    const x = make[kind]({ buffer, byteOffset: 64 })
    t.equal(Atomics.load(new Int32Array(buffer, 64, 1), 0), TAGS[kind], `${kind}: the tag at its byteOffset`)
    const ascii = Buffer.alloc(4)
    ascii.writeUInt32BE(TAGS[kind])
    t.match(ascii.toString('latin1'), /^[A-Z]{3}1$/, `${kind}: tag ${ascii.toString('latin1')}`)
    t.ok(from[kind].from(x), `${kind}.from attaches to it`)
  }
})

t.test('byte sizes: the tag made Mutex and RWLock larger', async t => {
  t.same({
    Mutex: Mutex.byteLength,
    AtomicFlag: AtomicFlag.byteLength,
    Once: Once.byteLength,
    Latch: Latch.byteLength,
    CondVar: CondVar.byteLength,
    RWLock: RWLock.byteLength,
    Barrier: Barrier.byteLength
  }, { Mutex: 16, AtomicFlag: 8, Once: 8, Latch: 8, CondVar: 8, RWLock: 304, Barrier: 272 })
})
