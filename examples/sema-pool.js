'use strict'
// A pool of N "connections" shared by worker threads and the main thread.
//
// One Sema of N tokens guards N slots. Each thread opens its own connection
// object per slot (initFn runs per thread, per slot), so `acquire` hands a
// thread its own handle to slot k while no other thread uses slot k. The
// shared `busy` array proves it: a slot is claimed with compareExchange and
// a clash would be counted.
//
//   node examples/sema-pool.js
const { Worker, isMainThread, workerData, parentPort, threadId } = require('worker_threads')
const { Sema } = require('sabsync')

const SLOTS = 3
const WORKERS = 3
const QUERIES = 40

function openConnection (slot) {
  // Stands in for a socket or client bound to pool slot `slot`.
  return {
    slot,
    owner: threadId,
    async query (busy, clashes) {
      if (Atomics.compareExchange(busy, slot, 0, 1) !== 0) Atomics.add(clashes, 0, 1)
      await new Promise(resolve => setTimeout(resolve, 1 + (slot % 2)))
      Atomics.store(busy, slot, 0)
    }
  }
}

async function run (sema, busy, clashes, label) {
  const used = new Array(SLOTS).fill(0)
  for (let i = 0; i < QUERIES; i++) {
    const conn = await sema.acquire()
    try {
      await conn.query(busy, clashes)
      used[conn.slot]++
    } finally {
      sema.release(conn)
    }
  }
  return `${label}: ${QUERIES} queries, per slot ${used.join('/')}`
}

if (isMainThread) {
  const sema = new Sema(SLOTS, { initFn: openConnection })
  const busy = new Int32Array(new SharedArrayBuffer(4 * SLOTS))
  const clashes = new Int32Array(new SharedArrayBuffer(4))
  const workers = Array.from({ length: WORKERS }, () => new Worker(__filename, {
    workerData: { sema: { buffer: sema.buffer, byteOffset: sema.byteOffset }, busy, clashes }
  }))
  const reports = workers.map(w => new Promise((resolve, reject) => {
    w.once('message', resolve)
    w.once('error', reject)
  }))
  run(sema, busy, clashes, 'main').then(async mine => {
    for (const line of [mine, ...await Promise.all(reports)]) console.log(line)
    console.log(`slots used by two threads at once: ${Atomics.load(clashes, 0)}`)
    console.log(`all ${SLOTS} connections back: ${(await sema.drain()).length === SLOTS}`)
    if (Atomics.load(clashes, 0) !== 0) process.exitCode = 1
  })
} else {
  const sema = Sema.from(workerData.sema, { initFn: openConnection })
  run(sema, workerData.busy, workerData.clashes, `worker ${threadId}`).then(line => parentPort.postMessage(line))
}
