'use strict'
// Helpers for the lock benchmark cases (bench/cases/mutex.js, rwlock.js,
// condvar.js, barrier.js): the peers written on Atomics, timing, workers,
// and the pthread equivalents in C.
const fs = require('fs')
const path = require('path')
const { execFileSync } = require('child_process')
const { Worker } = require('worker_threads')

const ROOT = path.join(__dirname, '..', '..')

// The classic three-state futex mutex (Drepper, "Futexes are tricky",
// mutex2) on Atomics.wait/notify: 0 free, 1 locked, 2 locked with waiters.
// lockAsync parks with Atomics.waitAsync. Source kept as a string so that
// workers can evaluate the very same code.
const FUTEX_MUTEX = `
class FutexMutex {
  constructor (i32, index) { this.a = i32; this.i = index }
  lock () {
    const a = this.a, i = this.i
    let c = Atomics.compareExchange(a, i, 0, 1)
    if (c === 0) return
    if (c !== 2) c = Atomics.exchange(a, i, 2)
    while (c !== 0) {
      Atomics.wait(a, i, 2)
      c = Atomics.exchange(a, i, 2)
    }
  }
  async lockAsync () {
    const a = this.a, i = this.i
    let c = Atomics.compareExchange(a, i, 0, 1)
    if (c === 0) return
    if (c !== 2) c = Atomics.exchange(a, i, 2)
    while (c !== 0) {
      const r = Atomics.waitAsync(a, i, 2)
      if (r.async) await r.value
      c = Atomics.exchange(a, i, 2)
    }
  }
  unlock () {
    if (Atomics.sub(this.a, this.i, 1) !== 1) {
      Atomics.store(this.a, this.i, 0)
      Atomics.notify(this.a, this.i, 1)
    }
  }
}`
// eslint-disable-next-line no-new-func
const FutexMutex = new Function(FUTEX_MUTEX + '\nreturn FutexMutex')()

// ns per call of fn(), best of `rounds` timed batches of n calls.
function nsPerOp (fn, n, rounds = 3) {
  for (let i = 0; i < Math.min(n, 200000); i++) fn() // warm up
  let best = Infinity
  for (let r = 0; r < rounds; r++) {
    const t0 = process.hrtime.bigint()
    for (let i = 0; i < n; i++) fn()
    const ns = Number(process.hrtime.bigint() - t0) / n
    if (ns < best) best = ns
  }
  return best
}

async function nsPerOpAsync (fn, n, rounds = 3) {
  for (let i = 0; i < Math.min(n, 50000); i++) await fn()
  let best = Infinity
  for (let r = 0; r < rounds; r++) {
    const t0 = process.hrtime.bigint()
    for (let i = 0; i < n; i++) await fn()
    const ns = Number(process.hrtime.bigint() - t0) / n
    if (ns < best) best = ns
  }
  return best
}

// A worker running `body` (a function body with sabsync, FutexMutex,
// workerData, parentPort in scope); resolves its single message.
function run (body, workerData) {
  const src = `'use strict'
const sabsync = require(${JSON.stringify(ROOT)})
const { workerData, parentPort } = require('worker_threads')
${FUTEX_MUTEX}
${body}`
  const w = new Worker(src, { eval: true, workerData })
  return new Promise((resolve, reject) => {
    let result
    w.once('message', m => { result = m })
    w.once('error', reject)
    w.once('exit', () => resolve(result))
  })
}

// bench/pthread_equivalents.c in one of its modes (built once per process
// with cc into build/bench/): { value, check } from its "FIGURE CHECK" line.
let pthreadBin = null
function pthreadEquivalent (...args) {
  if (pthreadBin === null) {
    const out = path.join(ROOT, 'build', 'bench')
    fs.mkdirSync(out, { recursive: true })
    const bin = path.join(out, 'pthread_equivalents')
    execFileSync('cc', ['-O2', '-pthread', '-o', bin, path.join(__dirname, '..', 'pthread_equivalents.c')])
    pthreadBin = bin
  }
  const [figure, ok] = execFileSync(pthreadBin, args.map(String), { encoding: 'utf8' }).trim().split(' ')
  return { value: Number(figure), check: ok === '1' }
}

module.exports = { ROOT, FutexMutex, FUTEX_MUTEX, nsPerOp, nsPerOpAsync, run, pthreadEquivalent }
