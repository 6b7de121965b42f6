'use strict'
// A read-mostly shared configuration under an RWLock: reader workers look
// values up all the time (many at once), a writer worker replaces the whole
// configuration now and then. A reader never sees a half-written one: every
// entry of a version is that version.
//
//   node examples/rwlock-config.js
const { Worker, isMainThread, workerData, parentPort } = require('worker_threads')
const { RWLock } = require('sabsync')

const ENTRIES = 32
const READERS = 3
const VERSIONS = 50

if (isMainThread) {
  const rw = new RWLock()
  const config = new SharedArrayBuffer(4 * (ENTRIES + 2)) // [0] version, [1] stop, [2 ...] entries
  let reads = 0
  let torn = 0
  let running = READERS + 1
  const done = () => {
    if (--running > 0) return
    console.log(`${reads} consistent reads, ${torn} torn, final version ${new Int32Array(config)[0]}`)
    if (torn !== 0 || new Int32Array(config)[0] !== VERSIONS) process.exitCode = 1
  }
  new Worker(__filename, { workerData: { role: 'writer', rw, config } }).on('exit', done)
  for (let i = 0; i < READERS; i++) {
    new Worker(__filename, { workerData: { role: 'reader', rw, config } })
      .on('message', r => { reads += r.reads; torn += r.torn })
      .on('exit', done)
  }
} else {
  const rw = RWLock.from(workerData.rw)
  const cfg = new Int32Array(workerData.config)
  if (workerData.role === 'writer') {
    for (let v = 1; v <= VERSIONS; v++) {
      rw.writeLock()
      for (let i = 0; i < ENTRIES; i++) cfg[2 + i] = v // entry by entry: torn if a reader got in
      cfg[0] = v
      rw.writeUnlock()
      Atomics.wait(cfg, 1, 0, 1) // some time between updates
    }
    Atomics.store(cfg, 1, 1)
  } else {
    let reads = 0
    let torn = 0
    while (Atomics.load(cfg, 1) === 0) {
      rw.readLock()
      const v = cfg[0]
      for (let i = 0; i < ENTRIES; i++) if (cfg[2 + i] !== v) { torn++; break }
      rw.readUnlock()
      reads++
    }
    parentPort.postMessage({ reads, torn })
  }
}
