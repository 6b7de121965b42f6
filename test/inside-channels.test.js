'use strict'
// diagnostics_channel (lib/inside.js): the TracingChannels sabsync:lock,
// sabsync:acquire and sabsync:wait on the waiting paths, with real
// contention (a worker or a child process holding), sabsync:owner-died
// when a terminated worker's and a SIGKILLed process's lock is taken over,
// sabsync:limiter-full when a table has no room; and nothing published by
// uncontended calls.
const t = require('tap')
const dc = require('diagnostics_channel')
const { Worker } = require('worker_threads')
const path = require('path')
const sabsync = require('..')
const { spaceName, spawn } = require('./space-helpers')

const root = path.join(__dirname, '..')

// Every event of the tracing channel `name`, as [event, copy of context].
function record (t, name) {
  const events = []
  const push = ev => ctx => events.push([ev, { ...ctx }])
  const handlers = { start: push('start'), end: push('end'), asyncStart: push('asyncStart'), asyncEnd: push('asyncEnd'), error: push('error') }
  const tc = dc.tracingChannel(name)
  tc.subscribe(handlers)
  t.teardown(() => tc.unsubscribe(handlers))
  return events
}

function listen (t, name) {
  const messages = []
  const fn = m => messages.push(m)
  dc.subscribe(name, fn)
  t.teardown(() => dc.unsubscribe(name, fn))
  return messages
}

// A worker that locks the Mutex of `handle`, says so, and holds it until
// terminated (ms = Infinity), or until a call waits for it and `ms` more:
// however late the message reaches this thread, the call it makes next
// finds the lock held (a holder that let go after a fixed time raced a
// loaded machine's message delivery).
function holder (m, ms) {
  const w = new Worker(`
    const { parentPort, workerData } = require('worker_threads')
    const sabsync = require(${JSON.stringify(root)})
    const m = sabsync.Mutex.from(workerData)
    m.lock()
    parentPort.postMessage('locked')
    if (${ms === Infinity}) setInterval(() => {}, 1e6)
    else {
      const nap = new Int32Array(new SharedArrayBuffer(4))
      while (m.nrWaiting() === 0) Atomics.wait(nap, 0, 0, 1)
      setTimeout(() => m.unlock(), ${ms === Infinity ? 0 : ms})
    }
  `, { eval: true, workerData: { buffer: m.buffer, byteOffset: m.byteOffset } })
  w.locked = new Promise(resolve => w.once('message', resolve))
  return w
}

t.test('sabsync:lock: a contended lockAsync and lock, with waitedMs > 0; uncontended calls publish nothing', async t => {
  const events = record(t, 'sabsync:lock')
  const m = new sabsync.Mutex()
  t.ok(m.tryLock())
  m.unlock()
  t.ok(m.lock())
  m.unlock()
  t.equal(await m.lockAsync(), true)
  m.unlock()
  t.same(events, [], 'uncontended: nothing published')

  const w = holder(m, 50)
  await w.locked
  t.equal(await m.lockAsync(), true)
  m.unlock()
  t.same(events.map(e => e[0]), ['start', 'end', 'asyncStart', 'asyncEnd'], 'one traced promise')
  const [, ctx] = events[2]
  t.equal(ctx.tier, 'thread')
  t.equal(ctx.kind, 'Mutex')
  t.equal(ctx.key, null)
  t.equal(ctx.result, true)
  t.ok(ctx.waitedMs > 0, `waitedMs ${ctx.waitedMs} > 0`)
  t.equal(ctx.async, true, 'a promise call says so (its span ends at asyncEnd)')
  await w.terminate()

  events.length = 0
  const w2 = holder(m, 30)
  await w2.locked
  t.equal(m.lock(), true, 'a blocking lock waits')
  m.unlock()
  t.same(events.map(e => e[0]), ['start', 'end'])
  t.ok(events[1][1].waitedMs > 0)
  t.equal(events[1][1].async, false, 'a blocking call: its span ends at end')
  t.equal(events[1][1].result, true)
  await w2.terminate()

  events.length = 0
  const w3 = holder(m, Infinity)
  await w3.locked
  t.equal(m.lock(10), false, 'timed out')
  t.equal(events[1][1].result, false, 'the context says it timed out')
  t.ok(events[1][1].waitedMs >= 5)
  await w3.terminate()
})

t.test('sabsync:owner-died: a worker terminated while holding; an RWLock\'s writer named as the RWLock', async t => {
  const died = listen(t, 'sabsync:owner-died')
  const m = new sabsync.Mutex()
  const w = holder(m, Infinity)
  await w.locked
  await w.terminate()
  t.ok(m.tryLock(), 'taken over')
  t.ok(m.ownerDied)
  m.unlock()
  t.equal(died.length, 1)
  t.same({ ...died[0], ownerId: typeof died[0].ownerId }, { tier: 'thread', kind: 'Mutex', key: null, ownerId: 'number' })

  const rw = new sabsync.RWLock()
  const ww = new Worker(`
    const { parentPort, workerData } = require('worker_threads')
    const rw = require(${JSON.stringify(root)}).RWLock.from(workerData)
    rw.writeLock()
    parentPort.postMessage('locked')
    setInterval(() => {}, 1e6)
  `, { eval: true, workerData: { buffer: rw.buffer, byteOffset: rw.byteOffset, byteLength: rw.byteLength } })
  await new Promise(resolve => ww.once('message', resolve))
  await ww.terminate()
  t.equal(await rw.writeLockAsync({ timeout: 5000 }), true)
  t.ok(rw.ownerDied)
  rw.writeUnlock()
  t.equal(died.length, 2)
  t.equal(died[1].kind, 'RWLock', 'the writers\' Mutex is told as its RWLock')
})

t.test('a space: sabsync:lock names the key and tier; a SIGKILLed holder is seen on owner-died', async t => {
  const name = spaceName(t)
  const space = sabsync.openShared(name)
  t.teardown(() => space.close())
  const events = record(t, 'sabsync:lock')
  const died = listen(t, 'sabsync:owner-died')
  const m = space.mutex('jobs')
  const child = spawn(t, name, `
    space.mutex('jobs').lock()
    send('locked')
    await new Promise(() => {})
  `)
  await child.message(x => x === 'locked')
  const got = m.lockAsync({ timeout: 20000 })
  await new Promise(resolve => setTimeout(resolve, 50))
  child.kill('SIGKILL')
  t.equal(await got, true)
  t.ok(m.ownerDied)
  m.unlock()
  const end = events.find(e => e[0] === 'asyncStart')[1]
  t.same({ tier: end.tier, kind: end.kind, key: end.key }, { tier: 'space', kind: 'Mutex', key: 'jobs' })
  t.ok(end.waitedMs >= 50, `waitedMs ${end.waitedMs}`)
  t.equal(died.length, 1)
  t.same({ tier: died[0].tier, kind: died[0].kind, key: died[0].key }, { tier: 'space', kind: 'Mutex', key: 'jobs' })
})

t.test('sabsync:acquire: a Sema and a RateLimit that wait; sabsync:wait: a Latch, a Barrier, a CondVar', async t => {
  const acq = record(t, 'sabsync:acquire')
  const wt = record(t, 'sabsync:wait')
  const s = new sabsync.Sema(1)
  const tok = await s.acquire()
  t.same(acq, [], 'a free token: nothing')
  setTimeout(() => s.release(tok), 20)
  const tok2 = await s.acquire()
  s.release(tok2)
  const ctx = acq.find(e => e[0] === 'asyncStart')[1]
  t.equal(ctx.kind, 'Sema')
  t.ok(ctx.waitedMs > 0)

  acq.length = 0
  const limit = sabsync.RateLimit(1, { timeUnit: 40 })
  await limit()
  t.same(acq, [], 'a grant due now: nothing')
  await limit()
  t.same(acq.map(e => e[0]), ['start', 'end', 'asyncStart', 'asyncEnd'], 'a grant waited for: one trace (its turn is not traced apart)')
  t.equal(acq[2][1].kind, 'RateLimit')
  t.ok(acq[2][1].waitedMs > 0)

  const latch = new sabsync.Latch(1)
  setTimeout(() => latch.countDown(), 10)
  t.equal(await latch.waitAsync(), true)
  const b = new sabsync.Barrier(2)
  setTimeout(() => b.waitAsync(), 10)
  await b.waitAsync()
  const m = new sabsync.Mutex()
  const cv = new sabsync.CondVar()
  m.lock()
  setTimeout(() => cv.notifyAll(), 10)
  await cv.waitAsync(m)
  m.unlock()
  const kinds = wt.filter(e => e[0] === 'asyncStart').map(e => e[1].kind)
  t.same(kinds.sort(), ['Barrier', 'CondVar', 'Latch'], 'each wait traced (the barrier\'s leader does not wait)')
})

t.test('sabsync:limiter-full: a table with no room for a new key', async t => {
  const full = listen(t, 'sabsync:limiter-full')
  const l = new sabsync.RateLimiter({ limit: 1, window: 60000, keys: 1, whenFull: 'deny' })
  t.equal(l.consume('a').allowed, true)
  t.same(full, [])
  const r = l.consume('b')
  t.equal(r.full, true)
  t.same(full, [{ tier: 'thread', kind: 'RateLimiter', key: null, keys: 1, whenFull: 'deny', allowed: false }])
})
