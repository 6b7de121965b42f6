'use strict'
// Lock hand-off between workers and the main thread, every party acquiring
// asynchronously: sabsync's Mutex.lockAsync against Node's Web Locks
// (navigator.locks.request, Node >= 24.5). Runs under a Node 24 binary
// from the registry (the same built addon loads there), which
// `npm run bench:setup` installs; without it the case is skipped.
const path = require('path')
const { Worker } = require('worker_threads')

const root = path.join(__dirname, '..', '..')

// Each party (2 workers + main) takes the lock `k` times and increments a
// plain counter under it; the answer is checked, the time is per hand-off.
// Inside the lock each party also counts how often it found another party
// inside (c[1] holders now, c[2] overlaps seen): mutual exclusion means 0.
// (Node v24.21's Web Locks let two threads in at once a few times in 15,000
// hand-offs here; bench/weblocks-overlap.js reproduces it.)
async function handoff (impl, k) {
  const sabsync = require(root)
  const sab = new SharedArrayBuffer(16)
  const counter = new Int32Array(sab)
  const mutex = impl === 'sabsync' ? new sabsync.Mutex() : null
  const body = impl === 'sabsync'
    ? `const m = s.Mutex.from(workerData.mutex)
       for (let i = 0; i < k; i++) { await m.lockAsync(); critical(c); m.unlock() }`
    : 'for (let i = 0; i < k; i++) await navigator.locks.request("bench", () => { critical(c) })'
  const code = `
const s = require(${JSON.stringify(root)})
const { workerData, parentPort } = require('worker_threads')
const c = new Int32Array(workerData.sab)
const k = workerData.k
${critical.toString()}
;(async () => {
  // A pending Web Locks request does not keep a thread's loop alive (the
  // worker would exit mid-run); hold it open the same way for both.
  const keep = setInterval(() => {}, 1000)
  parentPort.postMessage('ready')
  await new Promise(resolve => parentPort.once('message', resolve))
  ${body}
  parentPort.postMessage('done')
  clearInterval(keep)
})()`
  const ws = [0, 1].map(() => new Worker(code, { eval: true, workerData: { sab, k, mutex } }))
  await Promise.all(ws.map(w => new Promise(resolve => w.once('message', resolve))))
  const done = ws.map(w => new Promise(resolve => w.once('message', resolve)))
  const keep = setInterval(() => {}, 1000)
  const t0 = process.hrtime.bigint()
  for (const w of ws) w.postMessage('go')
  for (let i = 0; i < k; i++) {
    if (impl === 'sabsync') {
      await mutex.lockAsync()
      critical(counter)
      mutex.unlock()
    } else {
      await navigator.locks.request('bench', () => { critical(counter) })
    }
  }
  await Promise.all(done)
  const ns = Number(process.hrtime.bigint() - t0) / (3 * k)
  clearInterval(keep)
  await Promise.all(ws.map(w => w.terminate()))
  const overlaps = Atomics.load(counter, 2)
  return {
    value: ns / 1000,
    check: counter[0] === 3 * k && overlaps === 0,
    tally: { overlaps, handoffs: 3 * k, lost: 3 * k - counter[0] }
  }
}

function critical (c) {
  if (Atomics.add(c, 1, 1) !== 0) Atomics.add(c, 2, 1)
  c[0]++
  Atomics.sub(c, 1, 1)
}

module.exports = [
  {
    name: 'lock hand-off, 2 workers + main, all async (Node 24)',
    unit: 'us/op',
    compare: 'Web Locks',
    goal: 2,
    node: 24,
    // Over every run of the row, so that it states what its runs found.
    tallyNote: (t, runs) => `${t.overlaps} overlapping holders in ${t.handoffs} hand-offs over ${runs} runs` +
      (t.lost > 0 ? `; ${t.lost} increments lost` : ''),
    subjects: {
      sabsync: ({ quick }) => handoff('sabsync', quick ? 2000 : 10000),
      'Web Locks': ({ quick }) => handoff('weblocks', quick ? 1000 : 5000)
    }
  }
]
