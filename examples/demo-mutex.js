'use strict'
// Demo: worker threads contend on one sabsync Mutex while the main thread
// takes it with lockAsync (its event loop keeps running); then a worker is
// terminated while it holds the lock, and the main thread gets the lock
// with ownerDied === true instead of waiting forever.
//
//   node examples/demo-mutex.js
const { Worker, isMainThread, workerData, parentPort } = require('worker_threads')
const { Mutex } = require('sabsync')

const WORKERS = 3
const MS = 300

async function main () {
  const mutex = new Mutex()
  const shared = new Int32Array(new SharedArrayBuffer(16)) // [0] counter, [1] stop, [2] start
  console.log(`${WORKERS} workers and the main thread share one Mutex for ${MS} ms`)

  const reports = []
  const exits = []
  const ready = []
  for (let id = 1; id <= WORKERS; id++) {
    const w = new Worker(__filename, { workerData: { mode: 'contend', id, mutex, shared: shared.buffer } })
    ready.push(new Promise(resolve => w.once('message', resolve)))
    w.on('message', r => { if (r !== 'ready') reports.push(r) })
    exits.push(new Promise(resolve => w.on('exit', resolve)))
  }
  // The window starts when every worker runs: loading a worker takes longer
  // than the window itself.
  await Promise.all(ready)
  Atomics.store(shared, 2, 1)
  Atomics.notify(shared, 2)

  let ticks = 0
  const ticker = setInterval(() => { ticks++ }, 1)
  const end = performance.now() + MS
  let mine = 0
  let maxWait = 0
  while (performance.now() < end) {
    const t0 = performance.now()
    await mutex.lockAsync()
    maxWait = Math.max(maxWait, performance.now() - t0)
    shared[0]++ // a plain increment: the lock makes it safe
    mine++
    mutex.unlock()
    await new Promise(resolve => setImmediate(resolve))
  }
  clearInterval(ticker)
  Atomics.store(shared, 1, 1)
  await Promise.all(exits)

  for (const r of reports.sort((a, b) => a.id - b.id)) {
    console.log(`  worker ${r.id}: ${r.ops} increments, longest wait ${r.maxWait.toFixed(2)} ms`)
  }
  console.log(`  main:     ${mine} increments with lockAsync, longest wait ${maxWait.toFixed(2)} ms, ${ticks} timer ticks meanwhile`)
  const total = reports.reduce((s, r) => s + r.ops, 0) + mine
  console.log(`  counter = ${shared[0]}, sum of increments = ${total}: ${shared[0] === total ? 'exact' : 'WRONG'}`)
  if (shared[0] !== total) process.exitCode = 1

  console.log('a worker takes the lock and is terminated while holding it')
  const holder = new Worker(__filename, { workerData: { mode: 'hold', mutex } })
  await new Promise(resolve => holder.once('message', resolve))
  const waiting = mutex.lockAsync()
  console.log(`  main thread waits (isLocked: ${mutex.isLocked})`)
  await holder.terminate()
  await waiting
  console.log(`  main thread got the lock, ownerDied: ${mutex.ownerDied}`)
  if (!mutex.ownerDied) process.exitCode = 1
  mutex.unlock()
  console.log(`  after unlock: ownerDied ${mutex.ownerDied}, isLocked ${mutex.isLocked}`)
}

function worker () {
  const mutex = Mutex.from(workerData.mutex)
  if (workerData.mode === 'hold') {
    mutex.lock()
    parentPort.postMessage('locked')
    setInterval(() => {}, 1000) // hold it until terminated
    return
  }
  const shared = new Int32Array(workerData.shared)
  parentPort.postMessage('ready')
  Atomics.wait(shared, 2, 0)
  let ops = 0
  let maxWait = 0
  do { // at least once: every worker shows its share of the window
    const t0 = performance.now()
    mutex.lock()
    maxWait = Math.max(maxWait, performance.now() - t0)
    shared[0]++
    ops++
    mutex.unlock()
  } while (Atomics.load(shared, 1) === 0)
  parentPort.postMessage({ id: workerData.id, ops, maxWait })
}

if (isMainThread) main()
else worker()
