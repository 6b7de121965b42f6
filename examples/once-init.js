'use strict'
// Leader election for a one-time initialisation: every worker calls
// once.run(init); exactly one runs it (the leader), the others wait until
// it has finished and then use what it built. If the first leader fails,
// another caller runs init instead.
//
//   node examples/once-init.js
const { Worker, isMainThread, workerData, parentPort } = require('worker_threads')
const { Once } = require('sabsync')

const WORKERS = 4

if (isMainThread) {
  const once = new Once()
  const table = new SharedArrayBuffer(4 * 256) // built once, read by all
  const attempts = new Int32Array(new SharedArrayBuffer(4))
  let leaders = 0
  let ok = 0
  let workersLeft = WORKERS
  for (let id = 0; id < WORKERS; id++) {
    new Worker(__filename, { workerData: { id, once, table, attempts: attempts.buffer } })
      .on('message', ({ leader, sum }) => {
        if (leader) leaders++
        if (sum === 255 * 256 / 2) ok++
      })
      .on('exit', () => {
        if (--workersLeft > 0) return
        console.log(`${leaders} leader, ${ok}/${WORKERS} workers saw the table, init attempted ${attempts[0]} times`)
        if (leaders !== 1 || ok !== WORKERS) process.exitCode = 1
      })
  }
} else {
  const once = Once.from(workerData.once)
  const table = new Int32Array(workerData.table)
  const attempts = new Int32Array(workerData.attempts)
  let leader = false
  for (;;) {
    try {
      leader = once.run(() => {
        // The first attempt fails, to show that another caller takes over.
        if (Atomics.add(attempts, 0, 1) === 0) throw new Error('transient failure')
        for (let i = 0; i < 256; i++) table[i] = i // the expensive part
      })
      break
    } catch (err) {
      // Our init failed; once.run again (someone else may be running it now).
    }
  }
  let sum = 0
  for (let i = 0; i < 256; i++) sum += table[i]
  parentPort.postMessage({ leader, sum })
}
