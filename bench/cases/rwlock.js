'use strict'
// RWLock read-mostly throughput against a Mutex guarding the same work:
// workers look up a shared table (a read section of real length), one in
// `writeEvery` operations updates it. The C row is the same work on a
// pthread_rwlock (writer-preferring, as the RWLock is) in as many threads,
// for a shorter time (a rate; C has no JIT to warm and no workers to start).
const { run, pthreadEquivalent } = require('../support/locks')

const WRITE_EVERY = 50

const WORK = `
const c = new Int32Array(workerData.counter)
const table = new Int32Array(workerData.table)
let readLock, readUnlock, writeLock, writeUnlock
if (workerData.kind === 'rwlock') {
  const rw = sabsync.RWLock.from(workerData.lock)
  readLock = () => rw.readLock(); readUnlock = () => rw.readUnlock()
  writeLock = () => rw.writeLock(); writeUnlock = () => rw.writeUnlock()
} else {
  const m = sabsync.Mutex.from(workerData.lock)
  readLock = writeLock = () => m.lock()
  readUnlock = writeUnlock = () => m.unlock()
}
Atomics.add(c, 2, 1)
while (Atomics.load(c, 3) === 0);
let ops = 0
let bad = 0
while (Atomics.load(c, 1) === 0) {
  if (ops % workerData.writeEvery === 0) {
    writeLock()
    const v = table[0] + 1
    for (let i = 0; i < table.length; i++) table[i] = v
    writeUnlock()
  } else {
    readLock()
    const v = table[0]
    let sum = 0
    for (let i = 0; i < table.length; i++) sum += table[i]
    if (sum !== v * table.length) bad++
    readUnlock()
  }
  ops++
}
parentPort.postMessage({ ops, bad })`

function subject (kind, workers) {
  return async ({ quick }) => {
    const sabsync = require('../..')
    const lock = kind === 'rwlock' ? new sabsync.RWLock() : new sabsync.Mutex()
    const counter = new SharedArrayBuffer(16)
    const c = new Int32Array(counter)
    const table = new SharedArrayBuffer(4 * 256)
    const done = []
    for (let i = 0; i < workers; i++) {
      done.push(run(WORK, { kind, lock: { buffer: lock.buffer, byteOffset: lock.byteOffset }, counter, table, writeEvery: WRITE_EVERY }))
    }
    while (Atomics.load(c, 2) < workers) await new Promise(resolve => setTimeout(resolve, 1))
    const t0 = performance.now()
    Atomics.store(c, 3, 1)
    await new Promise(resolve => setTimeout(resolve, quick ? 300 : 1500))
    Atomics.store(c, 1, 1)
    const results = await Promise.all(done)
    const secs = (performance.now() - t0) / 1000
    const ops = results.reduce((s, r) => s + r.ops, 0)
    return { value: ops / secs, check: results.every(r => r.bad === 0) }
  }
}

module.exports = [2, 4].map(workers => ({
  name: `rwlock: read-mostly (1 write in ${WRITE_EVERY}), ${workers} workers, vs Mutex on the same work`,
  unit: 'ops/s',
  compare: 'sabsync Mutex',
  goal: null,
  subjects: {
    sabsync: subject('rwlock', workers),
    'sabsync Mutex': subject('mutex', workers),
    'pthread_rwlock (C)': ({ quick }) => pthreadEquivalent('rwlock', workers, quick ? 200 : 500, WRITE_EVERY)
  }
}))
