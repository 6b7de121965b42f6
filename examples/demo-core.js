'use strict'
// Workers block in sabsync.wait for jobs; the main thread hands them out
// one notify at a time and awaits their results with waitAsync, without
// blocking its event loop (a timer keeps ticking meanwhile).
const path = require('path')
const { Worker } = require('worker_threads')
const sabsync = require('sabsync')

const JOBS = 0 // jobs posted so far
const TAKEN = 1 // jobs taken so far
const DONE = 2 // jobs finished so far
const WORKERS = 3
const TOTAL = 9

const workerCode = `
const { workerData, parentPort } = require('worker_threads')
const sabsync = require(${JSON.stringify(path.join(__dirname, '..'))})
const board = new Int32Array(workerData.sab)
for (;;) {
  // Take a job if one is posted; else sleep until the main thread notifies.
  const taken = Atomics.load(board, ${TAKEN})
  const posted = Atomics.load(board, ${JOBS})
  if (taken >= ${TOTAL}) break
  if (taken === posted) { sabsync.wait(board, ${JOBS}, posted); continue }
  if (Atomics.compareExchange(board, ${TAKEN}, taken, taken + 1) !== taken) continue
  parentPort.postMessage('worker ' + workerData.id + ' took job ' + (taken + 1))
  let x = 0; for (let i = 0; i < 2e6; i++) x += i % 7 // some work
  Atomics.add(board, ${DONE}, 1)
  sabsync.notify(board, ${DONE}) // wakes the main thread's waitAsync
}
`

async function main () {
  const board = new Int32Array(new SharedArrayBuffer(16))
  const t0 = Date.now()
  const log = msg => console.log(`[${String(Date.now() - t0).padStart(4)} ms] ${msg}`)
  const workers = []
  for (let id = 1; id <= WORKERS; id++) {
    const w = new Worker(workerCode, { eval: true, workerData: { sab: board.buffer, id } })
    w.on('message', log)
    workers.push(new Promise(resolve => w.once('exit', resolve)))
  }
  let ticks = 0
  const ticker = setInterval(() => { ticks++ }, 5)
  while (sabsync.waiters(board, JOBS) < WORKERS) await new Promise(resolve => setTimeout(resolve, 5))
  log(`${WORKERS} workers are parked in sabsync.wait`)
  for (let job = 1; job <= TOTAL; job++) {
    Atomics.add(board, JOBS, 1)
    const woken = sabsync.notify(board, JOBS, 1)
    log(`main posted job ${job}; notify woke ${woken}`)
    // Wait (asynchronously) for the count of finished jobs to move.
    const done = Atomics.load(board, DONE)
    const r = sabsync.waitAsync(board, DONE, done, 1000)
    if (r.async) await r.value
  }
  while (Atomics.load(board, DONE) < TOTAL) {
    const r = sabsync.waitAsync(board, DONE, Atomics.load(board, DONE), 1000)
    if (r.async) await r.value
  }
  Atomics.store(board, JOBS, TOTAL + 1)
  sabsync.notify(board, JOBS) // release the workers still waiting
  await Promise.all(workers)
  clearInterval(ticker)
  log(`all ${TOTAL} jobs done; the main loop ticked ${ticks} times while it waited`)
}

main().catch(err => {
  console.error(err)
  process.exit(1)
})
