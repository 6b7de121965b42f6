'use strict'
// Several workers count under a Mutex (a plain, non-atomic increment: only
// the lock keeps it right) while the main thread takes the same lock with
// lockAsync between its other work, without blocking its event loop.
//
//   node examples/mutex-counter.js
const { Worker, isMainThread, workerData } = require('worker_threads')
const { Mutex } = require('sabsync')

const WORKERS = 3
const EACH = 10000

if (isMainThread) {
  const mutex = new Mutex()
  const counter = new Int32Array(new SharedArrayBuffer(4))
  let running = WORKERS
  for (let i = 0; i < WORKERS; i++) {
    new Worker(__filename, { workerData: { mutex, counter: counter.buffer } })
      .on('exit', () => { running-- })
  }
  let mine = 0
  ;(async () => {
    while (running > 0) { // eslint-disable-line no-unmodified-loop-condition -- workers exit meanwhile
      await mutex.runExclusive(() => { counter[0]++; mine++ })
      await new Promise(resolve => setImmediate(resolve)) // other work on this loop
    }
    const expected = WORKERS * EACH + mine
    console.log(`counter ${counter[0]}, expected ${expected} (${mine} increments from the main thread)`)
    if (counter[0] !== expected) process.exitCode = 1
  })()
} else {
  const mutex = Mutex.from(workerData.mutex)
  const counter = new Int32Array(workerData.counter)
  for (let i = 0; i < EACH; i++) {
    mutex.lock()
    try {
      counter[0] = counter[0] + 1
    } finally {
      mutex.unlock()
    }
  }
}
