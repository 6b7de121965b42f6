'use strict'
// Reproduces an observation made while benchmarking (Node v24.21.0): with
// Web Locks (navigator.locks.request) shared by the main thread and two
// workers, a thread sometimes enters the lock's callback while another is
// still inside its own. Each callback counts itself in and out of c[1]; c[2]
// counts entries that found someone inside. Run: node bench/weblocks-overlap.js
const { Worker } = require('worker_threads')

if (typeof navigator === 'undefined' || !navigator.locks) {
  console.log('this Node has no Web Locks (Node >= 24.5)')
  process.exit(0)
}
const K = 5000
const sab = new SharedArrayBuffer(16)
const c = new Int32Array(sab)
const body = `
const enter = () => { if (Atomics.add(c, 1, 1) !== 0) Atomics.add(c, 2, 1); c[0]++; Atomics.sub(c, 1, 1) }
const keep = setInterval(() => {}, 1000) // a pending request does not hold the loop open
;(async () => {
  for (let i = 0; i < ${K}; i++) await navigator.locks.request('overlap', enter)
  clearInterval(keep)
  if (typeof done === 'function') done()
})()`
let left = 3
const done = () => {
  if (--left > 0) return
  console.log(`${process.version}: counter ${c[0]} (expected ${3 * K}); entries that found another holder inside: ${c[2]}`)
}
for (let i = 0; i < 2; i++) {
  new Worker(`const c = new Int32Array(require('worker_threads').workerData);${body}`, { eval: true, workerData: sab })
    .on('exit', done)
}
eval(body) // eslint-disable-line no-eval -- the same body as the workers', on the main thread
