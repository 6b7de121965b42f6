'use strict'
// Mutex benchmarks: the uncontended fast path against a three-state futex
// mutex on Atomics and against async-mutex, and contended throughput with
// the longest wait seen (fairness).
const { Mutex } = require('../..')
const { FutexMutex, nsPerOp, nsPerOpAsync, run } = require('../support/locks')

let AsyncMutex = null
try { AsyncMutex = require('async-mutex').Mutex } catch {}

// Uncontended: lock, one plain increment, unlock.
function uncontended (make) {
  return async ({ quick }) => {
    const { lock, unlock } = make()
    const c = new Int32Array(new SharedArrayBuffer(8))
    const n = quick ? 500000 : 3000000
    const value = nsPerOp(() => { lock(); c[0]++; unlock() }, n)
    return { value, check: c[0] === n * 3 + Math.min(n, 200000) }
  }
}

function uncontendedAsync (make) {
  return async ({ quick }) => {
    const { lockAsync, unlock } = make()
    const c = { n: 0 }
    const n = quick ? 100000 : 500000
    const value = await nsPerOpAsync(async () => { await lockAsync(); c.n++; unlock() }, n)
    return { value, check: c.n === n * 3 + Math.min(n, 50000) }
  }
}

// Contended: `workers` threads lock, increment a plain counter, unlock, as
// fast as they can, while the main thread does the same with lockAsync;
// ops/s over all of them, and the longest single wait for the lock.
const CONTEND = `
const c = new Int32Array(workerData.counter)
let lock, unlock
if (workerData.kind === 'sabsync') {
  const m = sabsync.Mutex.from(workerData.m)
  lock = () => m.lock()
  unlock = () => m.unlock()
} else {
  const m = new FutexMutex(new Int32Array(workerData.m.buffer), 0)
  lock = () => m.lock()
  unlock = () => m.unlock()
}
Atomics.add(c, 2, 1)
while (Atomics.load(c, 3) === 0);
let ops = 0
let maxWait = 0
while (Atomics.load(c, 1) === 0) {
  const t0 = performance.now()
  lock()
  const waited = performance.now() - t0
  if (waited > maxWait) maxWait = waited
  c[0]++
  unlock()
  ops++
}
parentPort.postMessage({ ops, maxWait })`

function contended (kind, workers) {
  return async ({ quick }) => {
    const ms = quick ? 300 : 1500
    const counter = new SharedArrayBuffer(16)
    const c = new Int32Array(counter)
    let m, lockAsync, unlock
    if (kind === 'sabsync') {
      m = new Mutex()
      lockAsync = () => m.lockAsync()
      unlock = () => m.unlock()
    } else {
      m = { buffer: new SharedArrayBuffer(8) }
      const fm = new FutexMutex(new Int32Array(m.buffer), 0)
      lockAsync = () => fm.lockAsync()
      unlock = () => fm.unlock()
    }
    const done = []
    for (let i = 0; i < workers; i++) done.push(run(CONTEND, { kind, m: { buffer: m.buffer, byteOffset: m.byteOffset || 0 }, counter }))
    while (Atomics.load(c, 2) < workers) await new Promise(resolve => setTimeout(resolve, 1))
    const t0 = performance.now()
    Atomics.store(c, 3, 1)
    const stop = setTimeout(() => Atomics.store(c, 1, 1), ms)
    let mainOps = 0
    let mainMax = 0
    while (Atomics.load(c, 1) === 0) {
      const t1 = performance.now()
      await lockAsync()
      const waited = performance.now() - t1
      if (waited > mainMax) mainMax = waited
      c[0]++
      unlock()
      mainOps++
      if ((mainOps & 63) === 0) await new Promise(resolve => setImmediate(resolve))
    }
    clearTimeout(stop)
    const results = await Promise.all(done)
    const secs = (performance.now() - t0) / 1000
    const ops = results.reduce((s, r) => s + r.ops, 0) + mainOps
    const workerMax = Math.max(...results.map(r => r.maxWait))
    return {
      value: ops / secs,
      check: c[0] === ops,
      extra: `max wait ${workerMax.toFixed(2)} ms in workers, ${mainMax.toFixed(2)} ms on the main thread (${mainOps} main-thread ops)`
    }
  }
}

const cases = [
  {
    name: 'mutex: uncontended lock+unlock',
    unit: 'ns/op',
    compare: 'atomics mutex',
    goal: 1 / 1.2,
    subjects: {
      sabsync: uncontended(() => {
        const m = new Mutex()
        return { lock: () => m.lock(), unlock: () => m.unlock() }
      }),
      'atomics mutex': uncontended(() => {
        const m = new FutexMutex(new Int32Array(new SharedArrayBuffer(8)), 0)
        return { lock: () => m.lock(), unlock: () => m.unlock() }
      })
    }
  },
  {
    name: 'mutex: uncontended lockAsync+unlock (one thread)',
    unit: 'ns/op',
    compare: 'async-mutex',
    goal: 1 / 1.2,
    subjects: {
      sabsync: uncontendedAsync(() => {
        const m = new Mutex()
        return { lockAsync: () => m.lockAsync(), unlock: () => m.unlock() }
      })
    }
  }
]
if (AsyncMutex !== null) {
  cases[1].subjects['async-mutex'] = uncontendedAsync(() => {
    const m = new AsyncMutex()
    return { lockAsync: () => m.acquire(), unlock: () => m.release() }
  })
} else {
  cases[1].compare = null
  cases[1].goal = null
}
for (const workers of [2, 4]) {
  cases.push({
    name: `mutex: contended, ${workers} workers + main-thread lockAsync`,
    unit: 'ops/s',
    compare: 'atomics mutex',
    goal: null,
    subjects: {
      sabsync: contended('sabsync', workers),
      'atomics mutex': contended('atomics', workers)
    }
  })
}

module.exports = cases
