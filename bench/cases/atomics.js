'use strict'
// wait / waitAsync / notify against the built-in Atomics (and a raw C futex
// ping-pong as the floor). Every subject checks its own result.
const path = require('path')
const { execFileSync } = require('child_process')
const { Worker } = require('worker_threads')
const { pingPongSource, futexPingPong: futex } = require('../support/pingpong')

const root = path.join(__dirname, '..', '..')
const sabsyncPath = JSON.stringify(root)

async function workerPingPong (impl, rounds) {
  const sab = new SharedArrayBuffer(8)
  const src = pingPongSource(impl)
  const ws = ['ping', 'pong'].map(role => new Worker(src, { eval: true, workerData: { sab, role, rounds } }))
  const next = w => new Promise((resolve, reject) => {
    w.once('message', resolve)
    w.once('error', reject)
  })
  await Promise.all(ws.map(next))
  const done = ws.map(next)
  const cpu0 = process.cpuUsage()
  Atomics.store(new Int32Array(sab), 1, 1)
  Atomics.notify(new Int32Array(sab), 1)
  const msgs = await Promise.all(done)
  await Promise.all(ws.map(w => w.terminate()))
  const cpu = process.cpuUsage(cpu0)
  const cpuNs = (cpu.user + cpu.system) * 1000 / rounds
  return {
    value: msgs[0].ns / 1000,
    check: Atomics.load(new Int32Array(sab), 0) === 2 * rounds,
    extra: `cpu ${(cpuNs / 1000).toFixed(1)} us/rt`
  }
}

function futexPingPong (rounds) {
  const { us, ok } = futex(rounds)
  return { value: us, check: ok }
}

// The main thread awaits waitAsync; a worker answers with a blocking wait.
function mainWorkerSource (impl) {
  const w = impl === 'sabsync' ? 's.wait' : 'Atomics.wait'
  const n = impl === 'sabsync' ? 's.notify' : 'Atomics.notify'
  return `
const s = require(${sabsyncPath})
const { workerData } = require('worker_threads')
const seq = new Int32Array(workerData.sab)
for (let k = 0; k < workerData.rounds; k++) {
  const want = 2 * k + 1
  while (Atomics.load(seq, 0) !== want) ${w}(seq, 0, want - 1)
  Atomics.store(seq, 0, want + 1); ${n}(seq, 0, 1)
}`
}

async function mainPingPong (impl, rounds) {
  const sabsync = require(root)
  const sab = new SharedArrayBuffer(8)
  const seq = new Int32Array(sab)
  const w = new Worker(mainWorkerSource(impl), { eval: true, workerData: { sab, rounds } })
  const exited = new Promise(resolve => w.once('exit', resolve)) // before it can happen
  const waitAsync = impl === 'sabsync' ? sabsync.waitAsync : Atomics.waitAsync
  const notify = impl === 'sabsync' ? sabsync.notify : Atomics.notify
  await new Promise(resolve => w.once('online', resolve))
  const t0 = process.hrtime.bigint()
  for (let k = 0; k < rounds; k++) {
    const mine = 2 * k + 1
    Atomics.store(seq, 0, mine)
    notify(seq, 0, 1)
    while (Atomics.load(seq, 0) !== mine + 1) {
      const r = waitAsync(seq, 0, mine)
      if (r.async) await r.value
    }
  }
  const ns = Number(process.hrtime.bigint() - t0) / rounds
  await exited
  return { value: ns / 1000, check: Atomics.load(seq, 0) === 2 * rounds }
}

function notifyNoWaiters (notify, iters) {
  const ta = new Int32Array(new SharedArrayBuffer(64))
  let woken = 0
  for (let i = 0; i < 20000; i++) woken += notify(ta, i & 15, 1) // warm up
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < iters; i++) woken += notify(ta, i & 15, 1)
  return { value: Number(process.hrtime.bigint() - t0) / iters, check: woken === 0 }
}

// Total notify throughput (no waiters) of `threads` workers on distinct cells.
async function notifyScaling (impl, threads, iters) {
  const sab = new SharedArrayBuffer(4096)
  const src = `
const s = require(${sabsyncPath})
const { workerData, parentPort } = require('worker_threads')
const ta = new Int32Array(workerData.sab)
const notify = ${impl === 'sabsync' ? 's.notify' : 'Atomics.notify'}
const cell = 16 * (workerData.id + 1)
let woken = 0
for (let i = 0; i < 20000; i++) woken += notify(ta, cell, 1)
Atomics.add(ta, 0, 1); while (Atomics.load(ta, 0) !== workerData.threads);
const t0 = process.hrtime.bigint()
for (let i = 0; i < workerData.iters; i++) woken += notify(ta, cell, 1)
parentPort.postMessage({ ns: Number(process.hrtime.bigint() - t0), woken })`
  const ws = []
  for (let id = 0; id < threads; id++) ws.push(new Worker(src, { eval: true, workerData: { sab, id, threads, iters } }))
  const msgs = await Promise.all(ws.map(w => new Promise(resolve => w.once('message', resolve))))
  await Promise.all(ws.map(w => w.terminate()))
  const secs = Math.max(...msgs.map(m => m.ns)) / 1e9
  return { value: threads * iters / secs, check: msgs.every(m => m.woken === 0) }
}

// Register N pending waitAsync, then wake them all; per-waiter costs.
async function manyPending (impl, n) {
  const sabsync = require(root)
  const ta = new Int32Array(new SharedArrayBuffer(8))
  const waitAsync = impl === 'sabsync' ? sabsync.waitAsync : Atomics.waitAsync
  const notify = impl === 'sabsync' ? sabsync.notify : Atomics.notify
  if (global.gc) global.gc()
  const mem0 = process.memoryUsage()
  const t0 = process.hrtime.bigint()
  const ps = new Array(n)
  for (let i = 0; i < n; i++) ps[i] = waitAsync(ta, 0, 0).value
  const t1 = process.hrtime.bigint()
  if (global.gc) global.gc()
  const mem1 = process.memoryUsage()
  const woken = notify(ta, 0)
  const rs = await Promise.all(ps)
  const t2 = process.hrtime.bigint()
  return {
    value: Number(t1 - t0) / n,
    check: woken === n && rs.every(v => v === 'ok'),
    extra: `wake ${(Number(t2 - t1) / n).toFixed(0)} ns/waiter; JS heap +${Math.round((mem1.heapUsed - mem0.heapUsed) / n)} B/waiter`
  }
}

// Memory per pending waitAsync, JS heap and native together: the growth of
// the resident set of a fresh process while 100,000 waits are pending.
function memoryPerWaiter (impl) {
  const n = 100000
  const src = `
const s = require(${sabsyncPath})
const ta = new Int32Array(new SharedArrayBuffer(8))
const waitAsync = ${impl === 'sabsync' ? 's.waitAsync' : 'Atomics.waitAsync'}
const notify = ${impl === 'sabsync' ? 's.notify' : 'Atomics.notify'}
// warm up the code paths, then measure from a collected heap
Promise.all(Array.from({ length: 1000 }, () => waitAsync(ta, 0, 0).value)).then(() => {
  gc(); gc()
  const r0 = process.memoryUsage().rss
  const ps = new Array(${n})
  for (let i = 0; i < ${n}; i++) ps[i] = waitAsync(ta, 0, 0).value
  gc(); gc()
  const r1 = process.memoryUsage().rss
  const woken = notify(ta, 0)
  Promise.all(ps).then(rs => {
    console.log(JSON.stringify({ bytes: (r1 - r0) / ${n}, ok: woken === ${n} && rs.every(v => v === 'ok') }))
  })
})
setTimeout(() => {}, 100)
notify(ta, 0)`
  const out = execFileSync(process.execPath, ['--expose-gc', '-e', src], { encoding: 'utf8' })
  const r = JSON.parse(out.trim().split('\n').pop())
  return { value: r.bytes, check: r.ok }
}

module.exports = [
  {
    name: 'wait/notify round trip, worker<->worker, one CPU',
    unit: 'us/op',
    compare: 'Atomics',
    goal: 2,
    taskset: '0',
    subjects: {
      sabsync: ({ quick }) => workerPingPong('sabsync', quick ? 5000 : 20000),
      Atomics: ({ quick }) => workerPingPong('atomics', quick ? 5000 : 20000),
      'raw futex (C)': ({ quick }) => futexPingPong(quick ? 20000 : 100000)
    }
  },
  {
    name: 'wait/notify round trip, worker<->worker, two CPUs',
    unit: 'us/op',
    compare: 'Atomics',
    goal: 5,
    taskset: '0,1',
    subjects: {
      sabsync: ({ quick }) => workerPingPong('sabsync', quick ? 5000 : 20000),
      Atomics: ({ quick }) => workerPingPong('atomics', quick ? 5000 : 20000),
      'raw futex (C)': ({ quick }) => futexPingPong(quick ? 20000 : 100000)
    }
  },
  {
    name: 'main waitAsync <-> worker wait round trip',
    unit: 'us/op',
    compare: 'Atomics',
    goal: 1.5,
    subjects: {
      sabsync: ({ quick }) => mainPingPong('sabsync', quick ? 2000 : 10000),
      Atomics: ({ quick }) => mainPingPong('atomics', quick ? 2000 : 10000)
    }
  },
  {
    name: 'notify with no waiters',
    unit: 'ns/op',
    compare: 'Atomics',
    goal: 1,
    subjects: {
      sabsync: ({ quick }) => notifyNoWaiters(require(root).notify, quick ? 300000 : 2000000),
      Atomics: ({ quick }) => notifyNoWaiters(Atomics.notify, quick ? 300000 : 2000000)
    }
  },
  {
    name: 'notify, no waiters, 2 threads on distinct cells (total)',
    unit: 'ops/s',
    compare: 'Atomics',
    goal: null,
    subjects: {
      sabsync: ({ quick }) => notifyScaling('sabsync', 2, quick ? 300000 : 2000000),
      'sabsync, 1 thread': ({ quick }) => notifyScaling('sabsync', 1, quick ? 300000 : 2000000),
      Atomics: ({ quick }) => notifyScaling('atomics', 2, quick ? 300000 : 2000000),
      'Atomics, 1 thread': ({ quick }) => notifyScaling('atomics', 1, quick ? 300000 : 2000000)
    }
  },
  {
    name: 'memory per pending waitAsync (RSS growth, 100,000 pending)',
    unit: 'B/op',
    compare: 'Atomics',
    goal: null,
    subjects: {
      sabsync: () => memoryPerWaiter('sabsync'),
      Atomics: () => memoryPerWaiter('atomics')
    }
  },
  {
    name: '10,000 pending waitAsync: register (wake in notes)',
    unit: 'ns/op',
    compare: 'Atomics',
    goal: null,
    subjects: {
      sabsync: () => manyPending('sabsync', 10000),
      Atomics: () => manyPending('atomics', 10000)
    }
  }
]
