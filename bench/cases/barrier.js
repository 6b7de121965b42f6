'use strict'
// Barrier rounds: N workers pass a barrier round after round; the figure is
// the time per round. The peer is a barrier on Atomics.wait/notify with a
// generation counter in the same workers; the C row is a pthread_barrier in
// as many threads (bench/pthread_equivalents.c). The check, the same for
// all three: before a round each party counts itself into the round's
// cell, after it every party finds all N counted (nobody passed early), the
// leader of the round marks it, and every round ends with exactly one mark;
// every party passed every round.
const { run, pthreadEquivalent } = require('../support/locks')

const roundsFor = quick => quick ? 5000 : 10000

// The classic generation-counter barrier: [0] arrived in this round, [1]
// the round. The last to arrive resets the count, moves the round on and
// wakes the others, who sleep while the round is the one they arrived in.
const ROUNDS = `
class AtomicsBarrier {
  constructor (i32, parties) { this.a = i32; this.n = parties }
  wait () {
    const a = this.a
    const gen = Atomics.load(a, 1)
    if (Atomics.add(a, 0, 1) + 1 === this.n) {
      Atomics.store(a, 0, 0)
      Atomics.add(a, 1, 1)
      Atomics.notify(a, 1)
      return true
    }
    while (Atomics.load(a, 1) === gen) Atomics.wait(a, 1, gen)
    return false
  }
}
const c = new Int32Array(workerData.cells) // [0] ready, [1] go
const arrived = new Int32Array(workerData.arrived)
const leaders = new Int32Array(workerData.leaders)
const { parties, rounds } = workerData
let wait
if (workerData.kind === 'sabsync') {
  const b = sabsync.Barrier.from(workerData.b)
  wait = () => b.wait().isLeader
} else {
  const b = new AtomicsBarrier(new Int32Array(workerData.b.buffer), parties)
  wait = () => b.wait()
}
Atomics.add(c, 0, 1)
while (Atomics.load(c, 1) === 0) Atomics.wait(c, 1, 0)
// The first fifth of the rounds warms the JIT up and is not timed.
const warm = Math.floor(rounds / 5)
let t0 = process.hrtime.bigint()
let passed = 0
let early = 0
for (let k = 0; k < rounds; k++) {
  if (k === warm) t0 = process.hrtime.bigint()
  Atomics.add(arrived, k, 1)
  if (wait()) Atomics.add(leaders, k, 1)
  if (Atomics.load(arrived, k) !== parties) early++
  passed++
}
parentPort.postMessage({ ns: Number(process.hrtime.bigint() - t0) / (rounds - warm), passed, early })`

function subject (kind, parties) {
  return async ({ quick }) => {
    const sabsync = require('../..')
    const rounds = roundsFor(quick)
    const cells = new SharedArrayBuffer(8)
    const c = new Int32Array(cells)
    const arrived = new SharedArrayBuffer(4 * rounds)
    const leaders = new SharedArrayBuffer(4 * rounds)
    let b
    if (kind === 'sabsync') {
      const x = new sabsync.Barrier(parties)
      b = { buffer: x.buffer, byteOffset: x.byteOffset }
    } else {
      b = { buffer: new SharedArrayBuffer(8), byteOffset: 0 }
    }
    const done = []
    for (let i = 0; i < parties; i++) done.push(run(ROUNDS, { kind, parties, rounds, cells, arrived, leaders, b }))
    while (Atomics.load(c, 0) < parties) await new Promise(resolve => setTimeout(resolve, 1))
    Atomics.store(c, 1, 1)
    Atomics.notify(c, 1)
    const results = await Promise.all(done)
    const a = new Int32Array(arrived)
    const l = new Int32Array(leaders)
    let ok = results.every(r => r && r.passed === rounds && r.early === 0)
    for (let k = 0; k < rounds && ok; k++) ok = a[k] === parties && l[k] === 1
    return { value: Math.max(...results.map(r => r ? r.ns : NaN)) / 1000, check: ok }
  }
}

function pthreadBarrier (parties) {
  return ({ quick }) => {
    const r = pthreadEquivalent('barrier', parties, roundsFor(quick))
    return { value: r.value / 1000, check: r.check }
  }
}

module.exports = [2, 4].map(parties => ({
  name: `barrier: round time, ${parties} workers`,
  unit: 'us/op',
  compare: 'atomics barrier',
  goal: null,
  subjects: {
    sabsync: subject('sabsync', parties),
    'atomics barrier': subject('atomics', parties),
    'pthread_barrier (C)': pthreadBarrier(parties)
  }
}))
