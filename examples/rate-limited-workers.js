'use strict'
// A worker pool calling a third-party API under one shared rate limit.
//
// The limit lives in shared memory: every worker attaches to it, and at
// most RPS calls start in any window of WINDOW ms, whichever worker makes
// them. A worker that crashes or is terminated holds nothing: the limiter
// only records when grants happened.
//
//   node examples/rate-limited-workers.js
const { Worker, isMainThread, workerData, parentPort, threadId } = require('worker_threads')
const { RateLimit } = require('sabsync')

const RPS = 10
const WINDOW = 250 // ms
const WORKERS = 4
const CALLS = 10 // per worker

async function callApi (n) {
  // Stands in for an HTTP request to a service that allows RPS per WINDOW.
  await new Promise(resolve => setTimeout(resolve, 2))
  return { n, by: threadId }
}

if (isMainThread) {
  const limit = RateLimit(RPS, { timeUnit: WINDOW })
  const t0 = Number(process.hrtime.bigint()) / 1e6
  const workers = Array.from({ length: WORKERS }, () => new Worker(__filename, {
    workerData: limit.handle
  }))
  Promise.all(workers.map(w => new Promise((resolve, reject) => {
    w.once('message', resolve)
    w.once('error', reject)
  }))).then(results => {
    const grants = results.flat().sort((a, b) => a - b)
    const windows = new Map()
    for (const at of grants) {
      const w = Math.floor((at - t0) / WINDOW)
      windows.set(w, (windows.get(w) || 0) + 1)
    }
    console.log(`${grants.length} calls from ${WORKERS} workers`)
    for (const [w, n] of windows) console.log(`  ${w * WINDOW}-${(w + 1) * WINDOW} ms: ${n} calls`)
    let worst = 0
    for (let i = RPS; i < grants.length; i++) worst = Math.max(worst, RPS - (grants[i] - grants[i - RPS] >= WINDOW ? RPS : 0))
    console.log(worst === 0 ? `never more than ${RPS} calls in any ${WINDOW} ms` : 'LIMIT EXCEEDED')
    if (worst !== 0) process.exitCode = 1
  })
} else {
  const limit = RateLimit.from(workerData)
  ;(async () => {
    const grants = []
    for (let i = 0; i < CALLS; i++) {
      grants.push(await limit()) // resolves with the grant's time
      await callApi(i)
    }
    parentPort.postMessage(grants)
  })()
}
