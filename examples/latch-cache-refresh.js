'use strict'
// Cache refresh: one worker refreshes a shared cache while the others wait
// on a Latch; the main thread waits too, with waitAsync, and its event loop
// keeps running. countDown() by the refresher opens the latch for everyone.
//
//   node examples/latch-cache-refresh.js
const { Worker, isMainThread, workerData, parentPort } = require('worker_threads')
const { Latch } = require('sabsync')

const READERS = 3

if (isMainThread) {
  const refreshed = new Latch(1)
  const cache = new SharedArrayBuffer(4 * 64)
  const version = new Int32Array(cache)
  const seen = []
  let ticks = 0
  const ticker = setInterval(() => { ticks++ }, 1)
  for (let i = 0; i <= READERS; i++) {
    const role = i === 0 ? 'refresher' : 'reader'
    new Worker(__filename, { workerData: { role, refreshed, cache } })
      .on('message', v => seen.push(v))
  }
  refreshed.waitAsync().then(() => {
    clearInterval(ticker)
    console.log(`main thread: cache version ${version[0]} (the event loop ticked ${ticks > 0 ? 'meanwhile' : 'never'})`)
  })
  process.on('exit', () => {
    console.log(`readers saw versions ${seen.join(', ')}`)
    if (seen.length !== READERS || seen.some(v => v !== 2)) process.exitCode = 1
  })
} else {
  const refreshed = Latch.from(workerData.refreshed)
  const cache = new Int32Array(workerData.cache)
  if (workerData.role === 'refresher') {
    Atomics.wait(cache, 63, 0, 30) // fetch the new data (slowly)
    for (let i = 1; i < 64; i++) cache[i] = i * 2
    cache[0] = 2 // version
    refreshed.countDown()
  } else {
    refreshed.wait() // blocks this worker until the refresh is done
    parentPort.postMessage(cache[0])
  }
}
