'use strict'
// Deadlocks among the threads of one process, outside any space
// (src/core/lockwaits.c, lib/inspect.js threadDeadlocks, lib/inside.js):
// worker threads in ABBA on Mutexes in a plain SharedArrayBuffer (also
// found by deadlocks(), asked by the main thread), through
// an RWLock, and on named locks (require('sabsync').locks) alone or mixed
// with a Mutex, each reported on sabsync:deadlock naming both threads,
// what each holds and what it waits for; a plain wait is none; and the
// process's list of lock waits empties as waits end, a terminated worker's
// included.
const t = require('tap')
const path = require('path')
const { Worker } = require('worker_threads')
const sabsync = require('..')
const native = require('../lib/native')
const { seen } = require('./space-helpers')

const root = path.join(__dirname, '..')

// A worker running `body` (an async function body) with: sab, sabsync,
// told (what sabsync:deadlock told this thread), broken (a signal that
// aborts when it is told: an async wait given it ends the deadlock as an
// application would), send(message) and next() (the next message from the
// test). Its return value is its last message, { result } (or { error }).
function worker (t, sab, body) {
  const w = new Worker(`
    const { parentPort, workerData: sab } = require('worker_threads')
    const dc = require('diagnostics_channel')
    const sabsync = require(${JSON.stringify(root)})
    const told = []
    const ac = new AbortController()
    const broken = ac.signal
    dc.subscribe('sabsync:deadlock', m => { told.push(m); ac.abort(new Error('deadlock')) })
    const send = m => parentPort.postMessage({ m })
    const inbox = []
    let waiting = null
    parentPort.on('message', m => { if (waiting) { const r = waiting; waiting = null; r(m) } else inbox.push(m) })
    const next = () => inbox.length > 0 ? Promise.resolve(inbox.shift()) : new Promise(resolve => { waiting = resolve })
    ;(async () => { ${body} })().then(result => parentPort.postMessage({ result }), error => parentPort.postMessage({ error: String(error && error.stack) }))
  `, { eval: true, workerData: sab })
  t.teardown(() => w.terminate())
  const messages = []
  let wake = null
  w.on('message', m => { messages.push(m); if (wake) wake() })
  const take = async pred => {
    for (;;) {
      const i = messages.findIndex(pred)
      if (i >= 0) return messages.splice(i, 1)[0]
      await new Promise(resolve => { wake = resolve })
    }
  }
  return {
    threadId: w.threadId,
    send: m => w.postMessage(m),
    message: what => take(m => 'm' in m && m.m === what),
    done: () => take(m => 'result' in m || 'error' in m).then(m => {
      if ('error' in m) throw new Error('worker failed: ' + m.error)
      return m.result
    }),
    terminate: () => w.terminate()
  }
}

const mutexAt = (sab, at) => `sabsync.Mutex.from({ buffer: sab, byteOffset: ${at} })`

// Both orders, each party's view of the other: who holds what the other
// waits for.
function checkCycle (t, d, ids, kinds) {
  t.equal(d.tier, 'thread')
  t.same(d.parties.map(p => p.pid), ids.map(() => process.pid), 'threads of this process')
  t.same(d.parties.map(p => p.threadId).sort(), ids.slice().sort(), 'named by their threadIds')
  for (const p of d.parties) {
    const other = d.parties.find(q => q !== p)
    t.ok(other.holds.includes(p.waitsFor.key), `thread ${p.threadId} waits for ${p.waitsFor.key}, which thread ${other.threadId} holds`)
  }
  t.same(d.parties.map(p => p.waitsFor.kind).sort(), kinds.slice().sort())
}

t.test('two workers, ABBA on Mutexes in a plain SharedArrayBuffer, blocking: both told', async t => {
  const sab = new SharedArrayBuffer(64)
  new sabsync.Mutex({ buffer: sab, byteOffset: 0 }) // eslint-disable-line no-new
  new sabsync.Mutex({ buffer: sab, byteOffset: 16 }) // eslint-disable-line no-new
  const abba = (first, second, ms) => `
    ${mutexAt(sab, first)}.lock()
    send('holding')
    await next()
    const got = ${mutexAt(sab, second)}.lock(${ms})
    if (got) ${mutexAt(sab, second)}.unlock()
    ${mutexAt(sab, first)}.unlock()
    return { got, told }
  `
  const w1 = worker(t, sab, abba(0, 16, 2500))
  const w2 = worker(t, sab, abba(16, 0, 6000))
  await Promise.all([w1.message('holding'), w2.message('holding')])
  w1.send('go')
  w2.send('go')
  // The main thread waits for nothing, and asks.
  const asked = await seen(t, () => {
    const found = sabsync.deadlocks()
    return found.length > 0 ? found : null
  }, 'deadlocks(), asked by the main thread, finds the cycle')
  t.equal(asked.length, 1, 'one cycle')
  checkCycle(t, asked[0], [w1.threadId, w2.threadId], ['mutex', 'mutex'])
  const [r1, r2] = await Promise.all([w1.done(), w2.done()])
  t.same(sabsync.deadlocks(), [], 'none once it ended')
  t.equal(r1.got, false, 'the first times out, which ends the deadlock')
  t.equal(r2.got, true, 'and the other gets its lock')
  t.equal(r1.told.length, 1, 'the first was told while it waited')
  t.ok(r2.told.length >= 1, 'the other too (or once the first had ended its wait, nothing more)')
  checkCycle(t, r1.told[0], [w1.threadId, w2.threadId], ['mutex', 'mutex'])
  t.same(r1.told[0].parties.find(p => p.threadId === w1.threadId).holds.length, 1, 'each holds one')
})

t.test('an RWLock writer (lockAsync on this thread) and a reader that waits for the writer\'s Mutex', async t => {
  const sab = new SharedArrayBuffer(sabsync.RWLock.byteLength + 16)
  const rw = new sabsync.RWLock({ buffer: sab, byteOffset: 0 })
  const m = new sabsync.Mutex({ buffer: sab, byteOffset: sabsync.RWLock.byteLength })
  const reader = worker(t, sab, `
    const rw = sabsync.RWLock.from({ buffer: sab, byteOffset: 0 })
    rw.readLock()
    send('reading')
    await next()
    const got = await ${mutexAt(sab, sabsync.RWLock.byteLength)}.lockAsync({ signal: broken, timeout: 8000 }).catch(e => e.message)
    rw.readUnlock()
    return { got, told }
  `)
  await reader.message('reading')
  m.lock()
  const dc = require('diagnostics_channel')
  const told = []
  const listen = msg => told.push(msg)
  dc.subscribe('sabsync:deadlock', listen)
  t.teardown(() => dc.unsubscribe('sabsync:deadlock', listen))
  reader.send('go')
  const writing = rw.writeLockAsync({ timeout: 8000 })
  const r = await reader.done()
  t.equal(r.got, 'deadlock', 'the reader gives up when told')
  t.equal(await writing, true, 'then the writer gets in')
  rw.writeUnlock()
  m.unlock()
  t.equal(r.told.length, 1, 'the reader was told')
  const d = r.told[0]
  const byThread = Object.fromEntries(d.parties.map(p => [p.threadId, p]))
  t.same(byThread[reader.threadId].waitsFor.kind, 'mutex')
  t.same(byThread[0].waitsFor.kind, 'rwlock', 'this thread waits for the rwlock')
  t.ok(byThread[reader.threadId].holds.includes(byThread[0].waitsFor.key), 'which the reader holds')
  t.ok(byThread[0].holds.includes(byThread[reader.threadId].waitsFor.key), 'and holds the mutex the reader waits for')
  t.ok(told.length <= 1 && told.every(x => x.parties.length === 2), 'this thread was told at most once, of the same cycle (the reader may end it before this thread looks)')
})

t.test('named locks alone: two workers, ABBA with locks.request', async t => {
  const sab = new SharedArrayBuffer(8)
  const abba = (first, second, ms) => `
    let release
    const holding = new Promise(resolve => {
      sabsync.locks.request(${JSON.stringify(first)}, () => { resolve(); return new Promise(r => { release = r }) })
    })
    await holding
    send('holding')
    await next()
    const got = await sabsync.locks.request(${JSON.stringify(second)}, { signal: ${ms === 0 ? 'broken' : `AbortSignal.timeout(${ms})`} }, () => true).catch(e => e.message)
    release()
    return { got, told }
  `
  const w1 = worker(t, sab, abba('x', 'y', 0))
  const w2 = worker(t, sab, abba('y', 'x', 8000))
  await Promise.all([w1.message('holding'), w2.message('holding')])
  w1.send('go')
  w2.send('go')
  const [r1, r2] = await Promise.all([w1.done(), w2.done()])
  t.equal(r1.got, 'deadlock', 'the first gives up when told')
  t.equal(r2.got, true, 'the other is granted')
  t.equal(r1.told.length, 1, 'the first was told while it waited, from its request\'s looks')
  checkCycle(t, r1.told[0], [w1.threadId, w2.threadId], ['locks', 'locks'])
  t.same(r1.told[0].parties.find(p => p.threadId === w1.threadId), { pid: process.pid, threadId: w1.threadId, holds: ['x'], waitsFor: { key: 'y', kind: 'locks' } })
})

t.test('a named lock and a Mutex in one cycle', async t => {
  const sab = new SharedArrayBuffer(16)
  new sabsync.Mutex({ buffer: sab, byteOffset: 0 }) // eslint-disable-line no-new
  const w1 = worker(t, sab, `
    let release
    await new Promise(resolve => sabsync.locks.request('config', () => { resolve(); return new Promise(r => { release = r }) }))
    send('holding')
    await next()
    const got = ${mutexAt(sab, 0)}.lock(8000)
    if (got) ${mutexAt(sab, 0)}.unlock()
    release()
    return { got, told }
  `)
  const w2 = worker(t, sab, `
    const m = ${mutexAt(sab, 0)}
    m.lock()
    send('holding')
    await next()
    const got = await sabsync.locks.request('config', { signal: broken }, () => true).catch(e => e.message)
    m.unlock()
    return { got, told }
  `)
  await Promise.all([w1.message('holding'), w2.message('holding')])
  w1.send('go')
  w2.send('go')
  const [r1, r2] = await Promise.all([w1.done(), w2.done()])
  t.equal(r2.got, 'deadlock', 'the named lock\'s waiter gives up when told, from its request\'s looks')
  t.equal(r1.got, true, 'then the Mutex waiter gets it')
  t.equal(r2.told.length, 1)
  checkCycle(t, r2.told[0], [w1.threadId, w2.threadId], ['locks', 'mutex'])
})

t.test('a plain wait is no deadlock, and the list of lock waits empties', async t => {
  const sab = new SharedArrayBuffer(32)
  const m = new sabsync.Mutex({ buffer: sab, byteOffset: 0 })
  const dc = require('diagnostics_channel')
  const told = []
  const listen = msg => told.push(msg)
  dc.subscribe('sabsync:deadlock', listen)
  t.teardown(() => dc.unsubscribe('sabsync:deadlock', listen))
  const holder = worker(t, sab, `
    const m = ${mutexAt(sab, 0)}
    m.lock()
    send('holding')
    await next()
    m.unlock()
  `)
  await holder.message('holding')
  const waiting = m.lockAsync({ timeout: 10000 })
  await seen(t, () => native.lockWaits().length === 1, 'this thread\'s wait in the list')
  const [row] = native.lockWaits()
  t.same([row[0], row[1], row[3]], [0, 1, [holder.threadId]], 'this thread waits for a Mutex that the worker holds')
  await new Promise(resolve => setTimeout(resolve, 1300))
  t.same(told, [], 'no cycle, nothing told')
  holder.send('go')
  t.equal(await waiting, true)
  m.unlock()
  t.same(native.lockWaits(), [], 'the wait left the list when it ended')

  // A worker terminated in the middle of a blocking wait leaves it too.
  m.lock()
  const blocked = worker(t, sab, `
    send('waiting')
    ${mutexAt(sab, 0)}.lock()
  `)
  await blocked.message('waiting')
  await seen(t, () => native.lockWaits().some(r => r[0] === blocked.threadId), 'the worker\'s wait in the list')
  await blocked.terminate()
  t.same(native.lockWaits(), [], 'gone with the worker')
  m.unlock()
})
