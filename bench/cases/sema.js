'use strict'
// Sema benchmarks: sabsync's Sema (native pool and queue shared by every
// thread) against async-sema (one thread's JS deque), same usage.
//
// Each subject runs for a fixed time (about 1 s, 0.25 s with `quick`) and
// answers { value, check }: value in the case's unit (lower is better),
// check true when the run's own result was verified (every acquire served,
// never more holders than tokens, every token back at the end).

const path = require('path')
const { Worker } = require('worker_threads')
const { Sema } = require(path.join(__dirname, '..', '..'))

const root = path.join(__dirname, '..', '..')
const seconds = quick => (quick ? 0.25 : 1)

function asyncSema () {
  try {
    return require('async-sema').Sema
  } catch (err) {
    throw new Error('bench: async-sema is a devDependency of sabsync; run `npm install` (' + err.message + ')')
  }
}

// Run `batch` (which does n ops and answers true if they checked out)
// until `secs` have passed; ns per op.
async function timed (secs, batch) {
  let ops = 0
  let ok = true
  const n = 1000
  const t0 = process.hrtime.bigint()
  const end = t0 + BigInt(Math.round(secs * 1e9))
  let t = t0
  while (t < end) {
    ok = (await batch(n)) && ok
    ops += n
    t = process.hrtime.bigint()
  }
  return { value: Number(t - t0) / ops, check: ok }
}

// tryAcquire + release, no contention.
function tryRelease (Ctor) {
  return async ({ quick }) => {
    const s = new Ctor(1)
    const r = await timed(seconds(quick), n => {
      let got = 0
      for (let i = 0; i < n; i++) {
        if (s.tryAcquire() !== undefined) got++
        s.release()
      }
      return got === n
    })
    r.check = r.check && s.tryAcquire() !== undefined && s.tryAcquire() === undefined
    return r
  }
}

// await acquire() + release, no contention.
function acquireRelease (Ctor) {
  return async ({ quick }) => {
    const s = new Ctor(2)
    const r = await timed(seconds(quick), async n => {
      let got = 0
      for (let i = 0; i < n; i++) {
        if ((await s.acquire()) !== undefined) got++
        s.release()
      }
      return got === n
    })
    r.check = r.check && s.tryAcquire() !== undefined && s.tryAcquire() !== undefined && s.tryAcquire() === undefined
    return r
  }
}

// sabsync: `threads` workers contend on Sema(1) with acquireSync/release
// until told to stop; ns per acquire+release of all threads together.
const CONTENDER = `
const { Sema } = require(${JSON.stringify(root)})
const { workerData, parentPort } = require('worker_threads')
const s = Sema.from(workerData.sema)
const c = new Int32Array(workerData.control) // 0 start, 1 stop, 2 holders, 3 most
Atomics.wait(c, 0, 0)
let ops = 0
while (Atomics.load(c, 1) === 0) {
  s.acquireSync()
  if (Atomics.add(c, 2, 1) + 1 > 1) Atomics.store(c, 3, 2)
  Atomics.sub(c, 2, 1)
  s.release()
  ops++
}
parentPort.postMessage(ops)
`

function contendedWorkers (threads) {
  return async ({ quick }) => {
    const s = new Sema(1)
    const control = new Int32Array(new SharedArrayBuffer(16))
    const ws = []
    const done = []
    for (let i = 0; i < threads; i++) {
      const w = new Worker(CONTENDER, { eval: true, workerData: { sema: { buffer: s.buffer, byteOffset: s.byteOffset }, control: control.buffer } })
      done.push(new Promise((resolve, reject) => { w.once('message', resolve); w.once('error', reject) }))
      ws.push(new Promise(resolve => w.once('online', resolve)))
    }
    await Promise.all(ws)
    await new Promise(resolve => setTimeout(resolve, 20)) // parked on the start flag
    const t0 = process.hrtime.bigint()
    Atomics.store(control, 0, 1)
    Atomics.notify(control, 0)
    await new Promise(resolve => setTimeout(resolve, seconds(quick) * 1000))
    Atomics.store(control, 1, 1)
    const counts = await Promise.all(done)
    const t1 = process.hrtime.bigint()
    const ops = counts.reduce((a, b) => a + b, 0)
    const fair = Math.min(...counts) > 0
    return {
      value: Number(t1 - t0) / ops,
      check: ops > 0 && Atomics.load(control, 3) === 0 && s.nrWaiting() === 0 && s.tryAcquire() === 0,
      extra: `${ops} ops over ${threads} workers (${counts.join('/')})${fair ? '' : ', one starved'}`
    }
  }
}

// async-sema: `tasks` async loops contend on Sema(1) in one thread.
function contendedTasks (tasks) {
  return async ({ quick }) => {
    const S = asyncSema()
    const s = new S(1)
    let holders = 0
    let most = 0
    let ops = 0
    const end = process.hrtime.bigint() + BigInt(Math.round(seconds(quick) * 1e9))
    const t0 = process.hrtime.bigint()
    async function loop () {
      while (process.hrtime.bigint() < end) {
        await s.acquire()
        most = Math.max(most, ++holders)
        holders--
        s.release()
        ops++
      }
    }
    await Promise.all(Array.from({ length: tasks }, loop))
    const t1 = process.hrtime.bigint()
    return { value: Number(t1 - t0) / ops, check: most === 1 && s.nrWaiting() === 0, extra: `${ops} ops over ${tasks} async tasks` }
  }
}

module.exports = [
  {
    name: 'sema: tryAcquire+release',
    unit: 'ns/op',
    compare: 'async-sema',
    goal: null,
    subjects: {
      sabsync: tryRelease(Sema),
      'async-sema': async (opts) => tryRelease(asyncSema())(opts)
    }
  },
  {
    name: 'sema: await acquire()+release',
    unit: 'ns/op',
    compare: 'async-sema',
    goal: null,
    subjects: {
      sabsync: acquireRelease(Sema),
      'async-sema': async (opts) => acquireRelease(asyncSema())(opts)
    }
  },
  {
    name: 'sema: contended acquire, 2 threads (async-sema: 2 tasks in one thread)',
    unit: 'ns/op',
    compare: 'async-sema',
    goal: null,
    subjects: {
      sabsync: contendedWorkers(2),
      'async-sema': contendedTasks(2)
    }
  },
  {
    name: 'sema: contended acquire, 4 threads (async-sema: 4 tasks in one thread)',
    unit: 'ns/op',
    compare: 'async-sema',
    goal: null,
    subjects: {
      sabsync: contendedWorkers(4),
      'async-sema': contendedTasks(4)
    }
  }
]
