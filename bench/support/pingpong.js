'use strict'
// The worker<->worker wait/notify ping-pong and its floor, the raw C futex
// ping-pong: shared by the bench case (bench/cases/atomics.js) and the
// standalone profiling driver (bench/support/roundtrip.js).
const path = require('path')
const fs = require('fs')
const { execFileSync } = require('child_process')

const checkout = path.join(__dirname, '..', '..')

// A worker's source for the ping-pong on one cell: `seq` goes 2k+1 (ping)
// then 2k+2 (pong). `impl` is 'sabsync' or 'atomics'; `root` is the sabsync
// package the worker loads (this checkout unless given).
function pingPongSource (impl, root = checkout) {
  const w = impl === 'sabsync' ? 's.wait' : 'Atomics.wait'
  const n = impl === 'sabsync' ? 's.notify' : 'Atomics.notify'
  return `
const s = require(${JSON.stringify(root)})
const { workerData, parentPort } = require('worker_threads')
const seq = new Int32Array(workerData.sab)
const rounds = workerData.rounds
// Both report ready, then sleep until the main thread says go (so that the
// process CPU time it measures covers the rounds only).
parentPort.postMessage('ready')
Atomics.wait(seq, 1, 0)
// The first fifth of the rounds warms the JIT up and is not timed.
const warm = Math.floor(rounds / 5)
if (workerData.role === 'ping') {
  let t0 = process.hrtime.bigint()
  for (let k = 0; k < rounds; k++) {
    if (k === warm) t0 = process.hrtime.bigint()
    const mine = 2 * k + 1
    Atomics.store(seq, 0, mine); ${n}(seq, 0, 1)
    while (Atomics.load(seq, 0) !== mine + 1) ${w}(seq, 0, mine)
  }
  parentPort.postMessage({ ns: Number(process.hrtime.bigint() - t0) / (rounds - warm) })
} else {
  for (let k = 0; k < rounds; k++) {
    const want = 2 * k + 1
    while (Atomics.load(seq, 0) !== want) ${w}(seq, 0, want - 1)
    Atomics.store(seq, 0, want + 1); ${n}(seq, 0, 1)
  }
  parentPort.postMessage({})
}`
}

// The raw C futex ping-pong (bench/futex_pingpong.c), built once into
// build/bench: microseconds per round trip, and whether its final count
// came out right.
let futexBin = null
function futexPingPong (rounds) {
  if (futexBin === null) {
    const out = path.join(checkout, 'build', 'bench')
    fs.mkdirSync(out, { recursive: true })
    futexBin = path.join(out, 'futex_pingpong')
    execFileSync('cc', ['-O2', '-pthread', '-o', futexBin, path.join(__dirname, '..', 'futex_pingpong.c')])
  }
  const [ns, ok] = execFileSync(futexBin, [String(rounds)], { encoding: 'utf8' }).trim().split(' ')
  return { us: Number(ns) / 1000, ok: ok === '1' }
}

module.exports = { pingPongSource, futexPingPong }
