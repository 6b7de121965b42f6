'use strict'
// CondVar ping-pong: two workers hand a turn back and forth under a Mutex,
// each waiting on its own CondVar; one round trip is two hand-overs. The
// peer is the same protocol on the three-state futex mutex with
// Atomics.wait/notify on a sequence number (the classic condvar on futexes);
// the C row is the same protocol on a pthread_mutex and two pthread_conds.
const { run, pthreadEquivalent } = require('../support/locks')

const roundsFor = quick => quick ? 3000 : 20000

const PINGPONG = `
const c = new Int32Array(workerData.cells) // [0] turn, [1] round trips, [2] ready, [3] go
const me = workerData.me
const rounds = workerData.rounds
let lock, unlock, wait, notify
if (workerData.kind === 'sabsync') {
  const m = sabsync.Mutex.from(workerData.m)
  const cv = [sabsync.CondVar.from(workerData.cv[0]), sabsync.CondVar.from(workerData.cv[1])]
  lock = () => m.lock(); unlock = () => m.unlock()
  wait = i => cv[i].wait(m)
  notify = i => cv[i].notifyOne()
} else {
  const fm = new FutexMutex(new Int32Array(workerData.m.buffer), 0)
  const seq = new Int32Array(workerData.cv[0].buffer)
  lock = () => fm.lock(); unlock = () => fm.unlock()
  wait = i => { const s = Atomics.load(seq, i); fm.unlock(); Atomics.wait(seq, i, s); fm.lock() }
  notify = i => { Atomics.add(seq, i, 1); Atomics.notify(seq, i, 1) }
}
Atomics.add(c, 2, 1)
while (Atomics.load(c, 3) === 0);
for (let r = 0; r < rounds; r++) {
  lock()
  while (c[0] !== me) wait(me)
  c[0] = 1 - me
  if (me === 1) c[1]++
  notify(1 - me)
  unlock()
}
parentPort.postMessage('done')`

function subject (kind) {
  return async ({ quick }) => {
    const sabsync = require('../..')
    const cells = new SharedArrayBuffer(16)
    const c = new Int32Array(cells)
    let m, cv
    if (kind === 'sabsync') {
      const mm = new sabsync.Mutex()
      m = { buffer: mm.buffer, byteOffset: mm.byteOffset }
      cv = [new sabsync.CondVar(), new sabsync.CondVar()].map(x => ({ buffer: x.buffer, byteOffset: x.byteOffset }))
    } else {
      m = { buffer: new SharedArrayBuffer(8), byteOffset: 0 }
      const seq = new SharedArrayBuffer(8)
      cv = [{ buffer: seq, byteOffset: 0 }, { buffer: seq, byteOffset: 0 }]
    }
    const done = [0, 1].map(me => run(PINGPONG, { kind, me, rounds: roundsFor(quick), cells, m, cv }))
    while (Atomics.load(c, 2) < 2) await new Promise(resolve => setTimeout(resolve, 1))
    const t0 = process.hrtime.bigint()
    Atomics.store(c, 3, 1)
    await Promise.all(done)
    const us = Number(process.hrtime.bigint() - t0) / 1000 / roundsFor(quick)
    return { value: us, check: c[1] === roundsFor(quick) }
  }
}

module.exports = [{
  name: 'condvar: ping-pong round trip between two workers',
  unit: 'us/op',
  compare: 'atomics condvar',
  goal: null,
  subjects: {
    sabsync: subject('sabsync'),
    'atomics condvar': subject('atomics'),
    'pthread_cond (C)': ({ quick }) => {
      const r = pthreadEquivalent('condvar', roundsFor(quick))
      return { value: r.value / 1000, check: r.check }
    }
  }
}]
