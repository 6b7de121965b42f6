'use strict'
// Threads that end while they wait: terminate(), process.exit(), natural
// exit with unref'd workers, workers that exit with async waits pending,
// and wakes given to a dying waiter. Each scenario that could hang runs in
// a child process, so a hang fails the test instead of the suite.
const t = require('tap')
const sabsync = require('..')
const { Worker } = require('worker_threads')
const native = require('../lib/native')
const { until, exited, child, fixture, message, fixtureSource } = require('./helpers')

// Workers started and terminated by the dozen: far past the suite's 120 s per
// file when the machine is loaded (seen at a load average of 20), though
// 15-20 s on an idle one.
t.setTimeout(600000)

t.test('terminate() of a worker parked in wait completes, and leaves no waiter', async t => {
  const sab = new SharedArrayBuffer(8)
  const ta = new Int32Array(sab)
  const times = []
  for (let i = 0; i < 5; i++) {
    const w = fixture('wait-teardown/parked-wait', sab)
    await until(() => sabsync.waiters(ta, 0) === 1)
    const t0 = performance.now()
    await w.terminate()
    times.push(performance.now() - t0)
    t.equal(sabsync.waiters(ta, 0), 0, 'the dead waiter left the queue')
  }
  t.comment('terminate latencies (ms): ' + times.map(x => x.toFixed(1)).join(' '))
})

t.test('a wake counted for a dying waiter is passed on', async t => {
  const sab = new SharedArrayBuffer(16)
  const ta = new Int32Array(sab)
  for (let i = 0; i < 8; i++) {
    Atomics.store(ta, 1, 0)
    const dying = fixture('wait-teardown/parked-wait', sab)
    await until(() => sabsync.waiters(ta, 0) === 1)
    const survivor = fixture('wait-teardown/survivor', sab)
    await until(() => sabsync.waiters(ta, 0) === 2)
    const term = dying.terminate()
    if (i % 2 === 0) await new Promise(resolve => setImmediate(resolve))
    t.equal(sabsync.notify(ta, 0, 1), 1, 'one waiter counted')
    await term
    await exited(survivor)
    t.equal(Atomics.load(ta, 1), 1, `round ${i}: the survivor woke`)
    t.equal(sabsync.waiters(ta, 0), 0)
  }
})

t.test('a worker that dies with async waits pending', async t => {
  const sab = new SharedArrayBuffer(16)
  const ta = new Int32Array(sab)
  // terminate() with pending waits, some with timeouts and signals
  const w = fixture('wait-teardown/pending-waits-ready', sab)
  await message(w)
  t.equal(sabsync.waiters(ta, 0), 50)
  await w.terminate()
  t.equal(sabsync.waiters(ta, 0), 0, 'all its waiters left')
  t.equal(sabsync.notify(ta, 0), 0, 'a notify after its death reaches nobody')

  // process.exit() inside the worker, with a notify racing it
  for (let i = 0; i < 5; i++) {
    const w2 = fixture('wait-teardown/pending-waits-exit', sab)
    await until(() => Atomics.load(ta, 1) === 1)
    sabsync.notify(ta, 0, 3)
    await exited(w2)
    Atomics.store(ta, 1, 0)
    t.equal(sabsync.waiters(ta, 0), 0, `exit round ${i}: no waiter left behind`)
  }

  // A natural end with unref'd waits pending
  const w3 = fixture('wait-teardown/unref-waits', sab)
  t.equal(await exited(w3), 0, 'the worker ended on its own')
  t.equal(sabsync.waiters(ta, 0), 0)
})

t.test('wakes handed on when async waiters die: nothing lost', async t => {
  const sab = new SharedArrayBuffer(16)
  const ta = new Int32Array(sab)
  for (let i = 0; i < 5; i++) {
    const dying = fixture('wait-teardown/dying-async', sab)
    await new Promise(resolve => dying.once('message', resolve))
    const p = sabsync.waitAsync(ta, 0, 0).value
    const term = dying.terminate()
    // Notify one while the worker is being torn down: either it reached a
    // live waiter of the worker (and the worker's teardown hands it on) or
    // it was cancelled first; then our waiter is woken by the next notify.
    const n = sabsync.notify(ta, 0, 1)
    await term
    let v = await Promise.race([p, new Promise(resolve => setTimeout(resolve, 50, 'pending'))])
    if (v === 'pending') {
      t.equal(sabsync.notify(ta, 0, 1), 1)
      v = await p
    }
    t.equal(v, 'ok', `round ${i} (first notify counted ${n})`)
    t.equal(sabsync.waiters(ta, 0), 0)
  }
})

const PARKED_UNREF = `
const { Worker } = require('worker_threads')
const sab = new SharedArrayBuffer(8)
const ta = new Int32Array(sab)
const w = new Worker(${JSON.stringify(fixtureSource('wait-teardown/parked-wait'))}, { eval: true, workerData: sab })
w.unref()
`

t.test('process.exit() with a parked, unref\'d worker does not hang', async t => {
  const r = await child(PARKED_UNREF + `
;(function poll () { if (sabsync.waiters(ta, 0) === 1) { console.log('parked'); process.exit(7) } else setTimeout(poll, 2) })()`)
  t.equal(r.stdout.trim(), 'parked', r.stderr)
  t.equal(r.code, 7, 'exited with its code, not killed')
  t.comment(`child ran ${r.ms.toFixed(0)} ms`)
})

t.test('a natural exit with a parked, unref\'d worker does not hang', async t => {
  const r = await child(PARKED_UNREF + `
const keep = setInterval(() => {}, 1000)
;(function poll () { if (sabsync.waiters(ta, 0) === 1) { console.log('parked'); clearInterval(keep) } else setTimeout(poll, 2) })()`)
  t.equal(r.stdout.trim(), 'parked', r.stderr)
  t.equal(r.code, 0, 'exited by itself')
  t.comment(`child ran ${r.ms.toFixed(0)} ms`)
})

// Node unloads the addon when the last env that loaded it is gone: here the
// main thread never loads it, only workers, which park (past the park
// watchdog's rounds) and end. The watchdog thread must be gone by then, or
// its next round runs code that is no longer mapped (a crash, seen).
t.test('workers alone load the addon, park and end: the process runs on, and again', async t => {
  const r = await child(`
const { Worker } = require('worker_threads')
const pair = () => {
  const sab = new SharedArrayBuffer(8)
  return Promise.all([0, 1].map(role => new Promise((resolve, reject) => {
    const w = new Worker(${JSON.stringify(fixtureSource('wait-teardown/ping-pong-end'))}, { eval: true, workerData: { sab, role, rounds: 200 } })
    w.once('error', reject)
    w.once('exit', code => resolve(code))
  }))).then(codes => Atomics.load(new Int32Array(sab), 0) + ' ' + codes.join(','))
}
;(async () => {
  const first = await pair()
  await new Promise(resolve => setTimeout(resolve, 300)) // rounds of a watchdog left behind
  const second = await pair()
  await new Promise(resolve => setTimeout(resolve, 300))
  console.log(first + ' ' + second)
})()`, { load: false, timeout: 120000 })
  t.equal(r.signal, null, 'not killed by a signal ' + r.stderr)
  t.equal(r.code, 0, r.stderr)
  t.equal(r.stdout.trim(), '400 0,0 400 0,0', 'both pairs made their 200 round trips and ended')
})

t.test('teardown with every kind of wait pending: every napi call of the teardown and loop paths succeeds', async t => {
  const cells = new Int32Array(new SharedArrayBuffer(8))
  const sema = new sabsync.Sema(1)
  const held = sema.tryAcquire()
  const before = native.failures()
  let handedOn = 0
  for (let round = 0; round < 12; round++) {
    const w = new Worker(fixtureSource('wait-teardown/all-waits-pending'), { eval: true, workerData: { cells, sema: { buffer: sema.buffer, byteOffset: sema.byteOffset } } })
    await message(w)
    // Three waiters of ours, queued behind the worker's.
    const cell = round % 2
    const ours = [0, 1, 2].map(() => sabsync.waitAsync(cells, cell, 0, 60000).value)
    // Wake some of the worker's waits while it dies: each wake it cannot
    // deliver goes on down the queue, and ends with one of ours.
    const term = w.terminate()
    if (round % 3 === 0) sabsync.notify(cells, cell, 3)
    if (round % 3 === 1) { sema.release(held); sema.acquireSync(60000) }
    await term
    if (round % 3 === 0) {
      t.same(await Promise.all(ours), ['ok', 'ok', 'ok'], `round ${round}: the 3 wakes reached our waiters`)
      handedOn += 3
    } else {
      await until(() => sabsync.waiters(cells, cell) === 3, 60000, 'only our waiters left')
      t.equal(sabsync.notify(cells, cell), 3, `round ${round}: no wake reached our waiters`)
      await Promise.all(ours)
    }
  }
  t.ok(handedOn > 0)
  await until(() => sabsync.waiters(cells, 0) + sabsync.waiters(cells, 1) === 0, 60000, 'the dead waiters to leave')
  t.equal(sema.nrWaiting(), 0, 'no acquire left queued')
  t.equal(native.failures(), before, 'no napi call failed where no caller could be told')
})
