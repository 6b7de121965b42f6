'use strict'
// CondVar with a sabsync Mutex: no lost wake-ups, the mutex held again on
// every return, producer/consumer across workers and the main loop.
const t = require('tap')
const { CondVar, Mutex } = require('..')
const { until, fixture, sleep, message } = require('./helpers')

t.test('shape, owner checks, bad input', async t => {
  t.equal(CondVar.byteLength, 8)
  const cv = new CondVar()
  t.same(Object.keys(cv).sort(), ['buffer', 'byteOffset'])
  t.ok(CondVar.from(cv) instanceof CondVar)
  const m = new Mutex()
  t.throws(() => cv.wait(m, 10), { code: 'ERR_SABSYNC_NOT_OWNER' }, 'waiting without holding the mutex')
  t.throws(() => cv.waitAsync(m), { code: 'ERR_SABSYNC_NOT_OWNER' })
  t.throws(() => cv.wait({}), { name: 'TypeError', message: /"mutex"/ })
  t.throws(() => cv.wait({ buffer: m.buffer, byteOffset: 0 }), { name: 'TypeError', message: /"mutex"/ }, 'a handle is not a Mutex')
  t.throws(() => cv.waitAsync(null), { name: 'TypeError', message: /"mutex"/ })
  m.lock()
  t.throws(() => cv.wait(m, 'x'), { name: 'TypeError', message: /"timeout"/ })
  t.throws(() => cv.waitAsync(m, { signal: 1 }), { name: 'TypeError', message: /"options.signal"/ })
  t.ok(m.isLocked, 'bad input leaves the mutex held')
  m.unlock()
  t.throws(() => CondVar.from({ buffer: m.buffer, byteOffset: 3 }), { name: 'RangeError', message: /byteOffset/ })
})

t.test('timeouts: false, not early, and the mutex is held again', async t => {
  const cv = new CondVar()
  const m = new Mutex()
  m.lock()
  const t0 = performance.now()
  t.equal(await cv.waitAsync(m, { timeout: 20 }), false)
  t.ok(performance.now() - t0 >= 20, 'not early')
  t.ok(m.isLocked)
  m.unlock() // would throw if this thread did not hold it
  const w = fixture('condvar/wait-timeout-held', { cv, m })
  const [r, took] = await message(w)
  t.equal(r, false)
  t.ok(took >= 25, `wait(25) took ${took.toFixed(1)} ms`)
  await w.exited
})

t.test('abort: rejects with the reason, with the mutex held again', async t => {
  const cv = new CondVar()
  const m = new Mutex()
  await m.lockAsync()
  const ac = new AbortController()
  const p = cv.waitAsync(m, { signal: ac.signal })
  t.notOk(m.isLocked, 'released while waiting')
  ac.abort(new Error('stop'))
  await t.rejects(p, { message: 'stop' })
  t.ok(m.isLocked, 'held again')
  m.unlock()
})

t.test('notifyOne wakes one waiter, notifyAll the rest', async t => {
  const cv = new CondVar()
  const m = new Mutex()
  const sab = new SharedArrayBuffer(16)
  const c = new Int32Array(sab)
  const ws = []
  for (let i = 0; i < 3; i++) {
    ws.push(fixture('condvar/wait-count', { cv, m, sab }))
  }
  await until(() => Atomics.load(c, 0) === 3)
  await sleep(20)
  m.lock()
  c[2] = 1
  m.unlock()
  t.equal(cv.notifyOne(), 1, 'one woken')
  await until(() => Atomics.load(c, 1) === 1)
  t.equal(cv.notifyAll(), 2, 'the other two')
  await Promise.all(ws.map(w => w.exited))
  t.equal(Atomics.load(c, 1), 3)
})

// A bounded queue of CAP slots in shared memory, guarded by the mutex
// (test/fixtures/condvar/queue.js): [0] head, [1] tail, [2] count,
// [3..3+CAP) items.
const { CAP } = require('./fixtures/condvar/queue')

t.test('producer/consumer: several producers and consumers on threads and the main loop', async t => {
  for (let round = 0; round < 3; round++) {
    const P = 3
    const K = 400
    const m = new Mutex()
    const notFull = new CondVar()
    const notEmpty = new CondVar()
    const q = new Int32Array(new SharedArrayBuffer(4 * (3 + CAP)))
    const seen = new Int32Array(new SharedArrayBuffer(4 * (P * K + 1)))
    const shared = { m, notFull, notEmpty, q: q.buffer, seen: seen.buffer }
    const ws = []
    for (let p = 0; p < P; p++) {
      ws.push(fixture('condvar/producer', { ...shared, p, K }))
    }
    // Two consumer workers take a fixed share; the main thread takes the rest
    // asynchronously. A value 0 would be an empty slot read.
    const workerTakes = 300
    for (let c = 0; c < 2; c++) {
      ws.push(fixture('condvar/consumer', { ...shared, takes: workerTakes }))
    }
    for (let i = 0; i < P * K - 2 * workerTakes; i++) {
      await m.lockAsync()
      while (q[2] === 0) await notEmpty.waitAsync(m)
      const v = q[3 + q[0]]
      q[0] = (q[0] + 1) % CAP
      q[2]--
      notFull.notifyOne()
      m.unlock()
      Atomics.add(seen, v, 1)
    }
    await Promise.all(ws.map(w => w.exited))
    let dup = 0
    let lost = 0
    for (let v = 1; v <= P * K; v++) {
      if (seen[v] > 1) dup++
      if (seen[v] === 0) lost++
    }
    t.equal(seen[0], 0, `round ${round}: no empty slot was read`)
    t.equal(lost, 0, 'nothing lost')
    t.equal(dup, 0, 'nothing duplicated')
    t.equal(q[2], 0, 'the queue is empty')
    t.notOk(m.isLocked)
  }
})

t.test('a waiter terminated while waiting leaves the mutex free', async t => {
  const cv = new CondVar()
  const m = new Mutex()
  const sab = new SharedArrayBuffer(8)
  const w = fixture('condvar/terminated-waiter', { cv, m, sab })
  await until(() => Atomics.load(new Int32Array(sab), 0) === 1)
  await until(() => !m.isLocked)
  await w.terminate()
  t.ok(m.tryLock(), 'the mutex is free')
  t.notOk(m.ownerDied, 'and was not held by the dead thread')
  m.unlock()
  t.equal(cv.notifyAll(), 0, 'no waiter left behind')
})
