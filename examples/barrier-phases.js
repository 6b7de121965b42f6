'use strict'
// A phased computation across workers with a Barrier: each step, every
// worker computes its share of the next row from the current one, then all
// meet at the barrier before anyone reads the new row (Jacobi-style
// smoothing). The round's leader swaps the buffers.
//
//   node examples/barrier-phases.js
const { Worker, isMainThread, workerData, parentPort } = require('worker_threads')
const { Barrier } = require('sabsync')

const WORKERS = 4
const WIDTH = 64
const STEPS = 100

function smooth (src, dst, from, to) {
  for (let i = from; i < to; i++) {
    const l = src[i === 0 ? WIDTH - 1 : i - 1]
    const r = src[i === WIDTH - 1 ? 0 : i + 1]
    dst[i] = (l + 2 * src[i] + r) / 4
  }
}

if (isMainThread) {
  const barrier = new Barrier(WORKERS)
  const rows = new SharedArrayBuffer(8 * WIDTH * 2)
  const control = new SharedArrayBuffer(8) // [0] which row is current
  const a = new Float64Array(rows, 0, WIDTH)
  a[0] = 1000 // a spike that spreads out
  let leaders = 0
  let finished = 0
  for (let id = 0; id < WORKERS; id++) {
    new Worker(__filename, { workerData: { id, barrier, rows, control } })
      .on('message', n => { leaders += n })
      .on('exit', () => {
        if (++finished < WORKERS) return
        const cur = new Float64Array(rows, 8 * WIDTH * new Int32Array(control)[0], WIDTH)
        const total = cur.reduce((s, x) => s + x, 0)
        console.log(`${STEPS} steps, ${leaders} leaders (one per step), total ${total.toFixed(6)} (conserved: 1000)`)
        if (leaders !== STEPS || Math.abs(total - 1000) > 1e-6) process.exitCode = 1
      })
  }
} else {
  const barrier = Barrier.from(workerData.barrier)
  const control = new Int32Array(workerData.control)
  const row = k => new Float64Array(workerData.rows, 8 * WIDTH * k, WIDTH)
  const share = WIDTH / WORKERS
  const from = workerData.id * share
  let led = 0
  for (let s = 0; s < STEPS; s++) {
    const cur = Atomics.load(control, 0)
    smooth(row(cur), row(1 - cur), from, from + share)
    if (barrier.wait().isLeader) { // everyone wrote the new row
      Atomics.store(control, 0, 1 - cur) // the leader swaps...
      led++
    }
    barrier.wait() // ...before anyone starts the next step
  }
  parentPort.postMessage(led)
}
