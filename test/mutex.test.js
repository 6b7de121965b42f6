'use strict'
// Mutex: the common shape, mutual exclusion under real contention (plain,
// non-atomic increments), lockAsync queueing, timeouts, abort, owner checks,
// owner death in the three ways a thread ends, fairness, guards, bad input.
const t = require('tap')
const { Mutex } = require('..')
const { until, child, fixture, sleep, message, fixtureSource } = require('./helpers')

const dispose = Symbol.dispose ?? Symbol.for('nodejs.dispose')

t.test('shape: byteLength, memory, from, postMessage round trip', async t => {
  t.equal(Mutex.byteLength, 16)
  const fresh = new Mutex()
  t.ok(fresh.buffer instanceof SharedArrayBuffer)
  t.equal(fresh.byteOffset, 0)
  t.same(Object.keys(fresh).sort(), ['buffer', 'byteOffset'], 'only buffer and byteOffset are own enumerable')

  const sab = new SharedArrayBuffer(48)
  new Int32Array(sab).fill(-1)
  const m = new Mutex({ buffer: sab, byteOffset: 16 })
  t.same(Array.from(new Int32Array(sab, 16, 4)), [0x4D545831, 0, 0, 0], 'the constructor initialises its memory: kind tag, then free')
  t.same(Array.from(new Int32Array(sab, 0, 4)), [-1, -1, -1, -1], 'and nothing before')
  t.same(Array.from(new Int32Array(sab, 32, 4)), [-1, -1, -1, -1], 'or after')
  t.equal(m.byteOffset, 16)
  t.ok(m.lock())
  const m2 = Mutex.from({ buffer: sab, byteOffset: 16 })
  t.ok(m2.isLocked, 'from() attaches without resetting')
  t.notOk(m2.tryLock())

  // postMessage: the worker attaches to the message and sees the lock held
  // by the main thread; then it takes it after the main thread unlocks.
  const w = fixture('mutex/shape-round-trip', m)
  t.same(await message(w), [true, false], 'the worker sees it held')
  m.unlock()
  w.postMessage('go')
  t.equal(await message(w), true, 'the worker locks it')
  await w.exited
  t.notOk(m.isLocked)

  t.throws(() => new Mutex({ buffer: sab, byteOffset: 4 }), { name: 'RangeError', message: /byteOffset/ })
  t.throws(() => new Mutex({ buffer: sab, byteOffset: 40 }), { name: 'RangeError', message: /byteOffset/ })
  t.throws(() => new Mutex({ buffer: new ArrayBuffer(8) }), { name: 'TypeError', message: /buffer/ })
  t.throws(() => Mutex.from(null), { name: 'TypeError', message: /handle/ })
  t.throws(() => Mutex.from({ buffer: sab, byteOffset: 1 }), { name: 'RangeError', message: /byteOffset/ })
  t.throws(() => Mutex.from({}), { name: 'TypeError', message: /buffer/ })
})

t.test('lock, tryLock, unlock, isLocked; owner checks', async t => {
  const m = new Mutex()
  t.notOk(m.isLocked)
  t.ok(m.tryLock())
  t.ok(m.isLocked)
  t.notOk(m.tryLock(), 'not reentrant')
  t.throws(() => m.lock(), { code: 'ERR_SABSYNC_DEADLOCK' }, 'lock() by the holder throws instead of hanging')
  t.throws(() => m.lock(50), { code: 'ERR_SABSYNC_DEADLOCK' })
  t.equal(await m.lockAsync({ timeout: 20 }), false, 'lockAsync by the holder thread waits (and times out)')
  m.unlock()
  t.throws(() => m.unlock(), { code: 'ERR_SABSYNC_NOT_OWNER' }, 'unlock of a free mutex')
  t.notOk(m.ownerDied)

  const w = fixture('mutex/owner-checks', m)
  await message(w)
  t.ok(m.isLocked)
  t.throws(() => m.unlock(), { code: 'ERR_SABSYNC_NOT_OWNER', name: 'SabsyncError' }, 'unlock by another thread')
  t.notOk(m.tryLock())
  w.postMessage('go')
  await message(w)
  t.ok(m.tryLock())
  m.unlock()
  await w.exited
})

// N workers do K plain (non-atomic) increments under the lock while the
// main thread takes it with lockAsync in between; a second cell counts the
// holders inside the critical section, which must never exceed 1. The
// workers: test/fixtures/mutex/contend.js.
t.test('mutual exclusion: N workers x K increments + main-thread lockAsync', async t => {
  for (const [n, k, repeats] of [[2, 4000, 3], [4, 2000, 3]]) {
    for (let r = 0; r < repeats; r++) {
      const m = new Mutex()
      const sab = new SharedArrayBuffer(16)
      const c = new Int32Array(sab)
      const ws = []
      for (let i = 0; i < n; i++) ws.push(fixture('mutex/contend', { m, sab, k }))
      let done = false
      const all = Promise.all(ws.map(w => w.exited)).then(() => { done = true })
      let mine = 0
      while (!done) { // eslint-disable-line no-unmodified-loop-condition -- set when the workers exit
        t.equal(await m.lockAsync(), true)
        if (Atomics.add(c, 1, 1) !== 0) Atomics.store(c, 2, 1)
        c[0]++
        mine++
        Atomics.sub(c, 1, 1)
        m.unlock()
        await new Promise(resolve => setImmediate(resolve))
      }
      await all
      t.equal(c[0], n * k + mine, `${n} workers x ${k} + ${mine} main: the count is exact`)
      t.equal(Atomics.load(c, 2), 0, 'never two holders at once')
      t.notOk(m.isLocked)
    }
  }
})

t.test('several lockAsync on one thread are served in order', async t => {
  const m = new Mutex()
  const order = []
  const ps = []
  for (let i = 0; i < 5; i++) {
    ps.push(m.lockAsync().then(async got => {
      order.push(i)
      t.ok(got)
      await sleep(1)
      m.unlock()
    }))
  }
  await Promise.all(ps)
  t.same(order, [0, 1, 2, 3, 4])
  t.notOk(m.isLocked)

  // Held by a worker: the queue waits for it, in order, and the ones that
  // time out or abort behind the head leave the queue.
  const w = fixture('mutex/holder', m)
  await message(w)
  const ac = new AbortController()
  const got = []
  const a = m.lockAsync().then(v => { got.push(['a', v]); m.unlock() })
  const b = m.lockAsync({ timeout: 30 }).then(v => got.push(['b', v]))
  const c = m.lockAsync({ signal: ac.signal }).catch(err => got.push(['c', err.message]))
  const d = m.lockAsync().then(v => { got.push(['d', v]); m.unlock() })
  await b
  ac.abort(new Error('stop'))
  await c
  w.postMessage('go')
  await Promise.all([a, d, w.exited])
  t.same(got, [['b', false], ['c', 'stop'], ['a', true], ['d', true]])
  t.notOk(m.isLocked)
})

t.test('timeouts are never early', async t => {
  const m = new Mutex()
  t.ok(m.lock())
  for (const ms of [1, 15, 40]) {
    const t0 = performance.now()
    t.equal(await m.lockAsync({ timeout: ms }), false)
    t.ok(performance.now() - t0 >= ms, `lockAsync ${ms} ms: not early`)
  }
  t.equal(await m.lockAsync({ timeout: 0 }), false)
  t.equal(await m.lockAsync({ timeout: -5 }), false, 'a negative timeout is 0')
  // Blocking lock(timeout) in a worker
  const w = fixture('mutex/timeouts', m)
  for (const [ms, got, took] of await message(w)) {
    t.equal(got, false, `lock(${ms}) times out`)
    t.ok(took >= ms, `lock(${ms}) took ${took.toFixed(2)} ms: not early`)
  }
  await w.exited
  m.unlock()
  t.ok(m.lock(0), 'lock(0) takes a free mutex')
  m.unlock()
})

t.test('abort', async t => {
  const m = new Mutex()
  m.lock()
  const ac = new AbortController()
  const p = m.lockAsync({ signal: ac.signal })
  await sleep(5)
  const reason = new Error('enough')
  ac.abort(reason)
  await t.rejects(p, reason, 'rejects with signal.reason')
  await t.rejects(m.lockAsync({ signal: AbortSignal.abort(reason) }), reason, 'an already aborted signal')
  m.unlock()
  await t.rejects(m.lockAsync({ signal: AbortSignal.abort(reason) }), reason, 'even when the mutex is free')
  t.notOk(m.isLocked, 'an aborted lockAsync does not hold it')

  // An abort after a long wait (past the fairness threshold) while a worker
  // hammers the lock: the lock keeps working for everyone afterwards.
  const sab = new SharedArrayBuffer(16)
  const w = fixture('mutex/contend', { m, sab, k: 20000 })
  for (let i = 0; i < 20; i++) {
    const ac2 = new AbortController()
    const q = m.lockAsync({ signal: ac2.signal }).then(got => { if (got) m.unlock(); return 'got' }, () => 'aborted')
    setTimeout(() => ac2.abort(), i % 3)
    t.ok(['got', 'aborted'].includes(await q))
  }
  await w.exited
  t.equal(new Int32Array(sab)[0], 20000)
  t.notOk(m.isLocked)
  t.ok(m.tryLock())
  m.unlock()
})

// A worker that locks and then ends without unlocking.
function dyingHolder (m, how) {
  const w = fixture('mutex/dying-holder', { m, how })
  w.on('error', () => {}) // the uncaught exception, reported to the parent
  return w
}

for (const how of ['terminate', 'exit', 'throw']) {
  t.test(`owner death (${how}): waiters take over with ownerDied`, async t => {
    const m = new Mutex()
    const sab = new SharedArrayBuffer(8)
    const holder = dyingHolder(m, how)
    await message(holder)
    // A blocking waiter in a worker, and an async waiter here.
    const waiter = fixture('mutex/waiter', { m, sab })
    const reported = message(waiter) // listen now: it may report before we look
    await until(() => Atomics.load(new Int32Array(sab), 0) === 1)
    const mine = m.lockAsync({ timeout: 20000 }).then(got => [got, m.ownerDied])
    await sleep(10)
    if (how === 'terminate') await holder.terminate()
    await holder.exited
    // Exactly one of the two takes over (ownerDied), the other gets it after.
    const results = await Promise.all([
      mine.then(r => { m.unlock(); return r }),
      reported
    ])
    t.same(results.map(r => r[0]), [true, true], 'both get the lock')
    t.same(results.map(r => r[1]).sort(), [false, true], 'exactly one of them saw ownerDied')
    await waiter.exited
    t.notOk(m.isLocked)
    t.notOk(m.ownerDied)
  })

  t.test(`owner death (${how}) with nobody waiting: the next caller takes over`, async t => {
    const m = new Mutex()
    const holder = dyingHolder(m, how)
    await message(holder)
    if (how === 'terminate') await holder.terminate()
    await holder.exited
    t.notOk(m.isLocked, 'a dead holder does not count as holding')
    if (how === 'terminate') {
      t.ok(m.tryLock(), 'tryLock takes over')
    } else if (how === 'exit') {
      t.ok(m.lock(), 'lock takes over')
    } else {
      t.ok(await m.lockAsync(), 'lockAsync takes over')
    }
    t.ok(m.ownerDied, 'ownerDied while held')
    t.ok(m.isLocked)
    m.unlock()
    t.notOk(m.ownerDied, 'cleared by unlock')
    t.ok(m.tryLock())
    t.notOk(m.ownerDied)
    m.unlock()
  })
}

t.test('a waiter that arrives while the dead owner is still in the word (worker)', async t => {
  const m = new Mutex()
  const holder = dyingHolder(m, 'exit')
  await message(holder)
  await holder.exited
  const w = fixture('mutex/arrives-while-dead', m)
  t.same(await message(w), [true, true])
  await w.exited
})

t.test('fairness: the main thread gets the lock while workers hammer it', async t => {
  const m = new Mutex()
  const sab = new SharedArrayBuffer(16)
  const c = new Int32Array(sab)
  // Workers retake the lock at once after each unlock, until told to stop
  // (or a hang guard ends them).
  const ws = []
  for (let i = 0; i < 3; i++) {
    ws.push(fixture('mutex/hammer', { m, sab }))
  }
  await until(() => Atomics.load(c, 0) > 1000)
  let waits = 0
  for (let i = 0; i < 100; i++) {
    t.ok(await m.lockAsync(), 'got it')
    waits++
    m.unlock()
  }
  Atomics.store(c, 1, 1)
  const stopped = await Promise.all(ws.map(message))
  t.equal(waits, 100)
  t.same(stopped, [1, 1, 1], 'the main thread got 100 turns while the workers still hammered')
  await Promise.all(ws.map(w => w.exited))
})

t.test('runExclusive', async t => {
  const m = new Mutex()
  t.equal(await m.runExclusive(() => { t.ok(m.isLocked); return 42 }), 42)
  t.notOk(m.isLocked, 'unlocked after')
  await t.rejects(m.runExclusive(async () => { throw new Error('inside') }), { message: 'inside' })
  t.notOk(m.isLocked, 'unlocked after a throw')
  const order = []
  await Promise.all([1, 2, 3].map(i => m.runExclusive(async () => {
    order.push('in' + i)
    await sleep(2)
    order.push('out' + i)
  })))
  t.same(order, ['in1', 'out1', 'in2', 'out2', 'in3', 'out3'], 'one at a time, in order')
  m.lock()
  await t.rejects(m.runExclusive(() => 1, { timeout: 10 }), { code: 'ERR_SABSYNC_TIMEOUT' })
  m.unlock()
  t.throws(() => m.runExclusive('nope'), { name: 'TypeError', message: /"fn"/ })
})

t.test('guard: using-compatible', async t => {
  const m = new Mutex()
  const g = m.guard()
  t.ok(m.isLocked)
  t.equal(g.mutex, m)
  t.equal(g.ownerDied, false)
  t.equal(typeof g[dispose], 'function')
  g[dispose]()
  t.notOk(m.isLocked)
  g[dispose]()
  t.ok(m.tryLock(), 'a second dispose does not unlock again')
  t.throws(() => m.guard(0), { code: 'ERR_SABSYNC_DEADLOCK' })
  t.equal(await m.guardAsync({ timeout: 5 }), undefined, 'undefined when the timeout passed')
  m.unlock()
  const w = fixture('mutex/holder', m)
  await message(w)
  t.equal(m.guard(5), undefined, 'undefined when the timeout passed (held by a worker)')
  w.postMessage('go')
  await w.exited
  const ga = await m.guardAsync()
  t.ok(m.isLocked)
  ga[dispose]()
  t.notOk(m.isLocked)
})

t.test('bad input: errors that name the argument, no hang', async t => {
  const m = new Mutex()
  t.throws(() => m.lock('10'), { name: 'TypeError', message: /"timeout"/ })
  t.throws(() => m.lock(NaN), { name: 'TypeError', message: /"timeout"/ })
  t.throws(() => m.lock({}), { name: 'TypeError', message: /"timeout"/ })
  t.throws(() => m.lockAsync(5), { name: 'TypeError', message: /"options"/ })
  t.throws(() => m.lockAsync({ timeout: 'x' }), { name: 'TypeError', message: /"options.timeout"/ })
  t.throws(() => m.lockAsync({ signal: {} }), { name: 'TypeError', message: /"options.signal"/ })
  t.throws(() => m.lockAsync({ ref: 1 }), { name: 'TypeError', message: /"options.ref"/ })
  t.throws(() => new Mutex(5), { name: 'TypeError', message: /"options"/ })
  t.throws(() => new Mutex({ buffer: new SharedArrayBuffer(8), byteOffset: -8 }), { name: 'RangeError', message: /byteOffset/ })
  t.throws(() => new Mutex({ buffer: new SharedArrayBuffer(8), byteOffset: 0.5 }), { name: 'RangeError', message: /byteOffset/ })
  t.throws(() => new Mutex({ buffer: new SharedArrayBuffer(4) }), { name: 'RangeError', message: /byteOffset/ })
  t.notOk(m.isLocked, 'nothing was taken by a failed call')
})

t.test('process exit with a worker blocked in lock() does not hang', async t => {
  const r = await child(`
    const { Worker } = require('worker_threads')
    const m = new sabsync.Mutex()
    m.lock()
    const w = new Worker(${JSON.stringify(fixtureSource('mutex/blocked-lock'))}, { eval: true, workerData: m })
    w.unref()
    w.once('message', () => setTimeout(() => console.log('bye'), 20))`)
  t.equal(r.code, 0)
  t.equal(r.stdout.trim(), 'bye')
})
