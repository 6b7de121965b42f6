'use strict'
// Two figures of the threads tier where it runs (scripts/test-win32.sh:
// under Wine, with Node for Windows): a Mutex's uncontended lock+unlock,
// and a wait/notify round trip between two workers, with the same round
// trip on Atomics.wait/notify beside it as the yardstick of the same
// machine. Medians of 5 passes. Under Wine these are Wine's figures (its
// WaitOnAddress and thread wakes go through wineserver and Linux), not
// Windows'. Prints one JSON line; `--out FILE` writes it there too (Node
// under Wine writes no pipe).
const fs = require('fs')
const path = require('path')
const { Worker } = require('worker_threads')

const entry = process.env.SABSYNC_ENTRY || path.join(__dirname, '..', '..')
const sabsync = require(entry)

const median = xs => [...xs].sort((a, b) => a - b)[xs.length >> 1]

function uncontended () {
  const m = new sabsync.Mutex()
  const n = 1e6
  for (let i = 0; i < 1e5; i++) { m.lock(); m.unlock() }
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++) { m.lock(); m.unlock() }
  return Number(process.hrtime.bigint() - t0) / n // ns a pair
}

// Two workers pass a token back and forth on one cell: A sets 1 and wakes
// B, B sets 0 and wakes A. µs per round trip (two wakes).
function roundTrip (kind, rounds) {
  const cell = new Int32Array(new SharedArrayBuffer(8))
  const src = `
    const { workerData: { cell, me, rounds, kind, entry }, parentPort } = require('worker_threads')
    const s = kind === 'sabsync' ? require(entry) : Atomics
    const other = 1 - me
    parentPort.postMessage('ready')
    const t0 = process.hrtime.bigint()
    for (let i = 0; i < rounds; i++) {
      while (Atomics.load(cell, 0) !== me) s.wait(cell, 0, other)
      Atomics.store(cell, 0, other)
      s.notify(cell, 0)
    }
    parentPort.postMessage(Number(process.hrtime.bigint() - t0) / rounds / 1000)`
  const ws = [0, 1].map(me => new Worker(src, { eval: true, workerData: { cell, me, rounds, kind, entry: require.resolve(entry) } }))
  return Promise.all(ws.map(w => new Promise((resolve, reject) => {
    const got = []
    w.on('message', m => { got.push(m); if (got.length === 2) resolve(got[1]) })
    w.on('error', reject)
  }))).then(times => Math.max(...times))
}

async function main () {
  const lock = []; const rt = []; const atomics = []
  for (let pass = 0; pass < 5; pass++) {
    lock.push(uncontended())
    rt.push(await roundTrip('sabsync', 2000))
    atomics.push(await roundTrip('atomics', 2000))
  }
  const out = JSON.stringify({
    platform: `${process.platform}-${process.arch}`,
    node: process.version,
    lockNs: +median(lock).toFixed(1),
    roundTripUs: +median(rt).toFixed(1),
    atomicsRoundTripUs: +median(atomics).toFixed(1)
  })
  const i = process.argv.indexOf('--out')
  if (i > 0) fs.writeFileSync(process.argv[i + 1], out + '\n')
  else console.log(out)
}

main()
