'use strict'
// Scenarios of bench/cases/processes.js, each run in fresh processes and
// answered as one line of JSON on stdout: { value, check, ... }.
//
//   node bench/support/procs.js uncontended space|local N
//   node bench/support/procs.js contended   space|local K      (2 processes | 2 threads)
//   node bench/support/procs.js rate        sabsync|rlf N      (a cluster of 4 workers)
//   node bench/support/procs.js handoff     sabsync|lockfile K (2 processes)
//   node bench/support/procs.js takeover    sabsync K          (K holders SIGKILLed)
const cluster = require('cluster')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { fork } = require('child_process')
const { Worker } = require('worker_threads')

const root = path.join(__dirname, '..', '..')
const sabsync = require(root)
const [scenario, impl, count, role, spaceName] = process.argv.slice(2)
const n = Number(count)
const out = v => process.stdout.write(JSON.stringify(v) + '\n')

function freshSpace () {
  const name = `bench-${process.pid}`
  sabsync.openShared.unlink(name)
  return name
}

// Uncontended: lock, one plain increment, unlock, in one thread.
function uncontended () {
  let mutex, space
  if (impl === 'space') {
    space = sabsync.openShared(freshSpace())
    mutex = space.mutex('m')
  } else {
    mutex = new sabsync.Mutex()
  }
  const c = { n: 0 }
  for (let i = 0; i < Math.min(n, 200000); i++) { mutex.lock(); c.n++; mutex.unlock() } // warm up
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++) { mutex.lock(); c.n++; mutex.unlock() }
  const ns = Number(process.hrtime.bigint() - t0) / n
  if (space) { space.unlink(); space.close() }
  out({ value: ns, check: c.n === n + Math.min(n, 200000) })
}

// Contended: two parties (processes for the space, threads for the
// in-process Mutex) lock, increment a plain counter, unlock, K times each;
// microseconds per lock.
function party (m, c, k) {
  for (let i = 0; i < k; i++) {
    m.lock()
    if (Atomics.add(c, 1, 1) !== 0) Atomics.add(c, 2, 1) // two inside: counted
    c[0]++
    Atomics.sub(c, 1, 1)
    m.unlock()
  }
}

async function contended () {
  const k = n
  if (role === 'party') {
    const space = sabsync.openShared(spaceName)
    const m = space.mutex('m')
    const c = space.int32Array('c', 4)
    Atomics.add(c, 3, 1)
    while (Atomics.load(c, 3) < 2);
    party(m, c, k)
    process.send('done', () => process.exit(0))
    return
  }
  if (impl === 'space') {
    const name = freshSpace()
    const space = sabsync.openShared(name)
    const c = space.int32Array('c', 4)
    space.mutex('m')
    const kids = [0, 1].map(() => fork(__filename, [scenario, impl, String(k), 'party', name]))
    while (Atomics.load(c, 3) < 2) await new Promise(resolve => setTimeout(resolve, 1))
    const t0 = process.hrtime.bigint()
    await Promise.all(kids.map(p => new Promise(resolve => p.once('message', resolve))))
    const us = Number(process.hrtime.bigint() - t0) / 1000 / (2 * k)
    out({ value: us, check: c[0] === 2 * k && c[2] === 0 })
    space.unlink()
    space.close()
    return
  }
  const m = new sabsync.Mutex()
  const c = new Int32Array(new SharedArrayBuffer(16))
  const code = `
    const { workerData, parentPort } = require('worker_threads')
    const m = require(${JSON.stringify(root)}).Mutex.from(workerData.m)
    const c = new Int32Array(workerData.c)
    const k = workerData.k
    Atomics.add(c, 3, 1)
    while (Atomics.load(c, 3) < 2);
    ${party.toString()}
    party(m, c, k)
    parentPort.postMessage('done')`
  const ws = [0, 1].map(() => new Worker(code, { eval: true, workerData: { m, c: c.buffer, k } }))
  while (Atomics.load(c, 3) < 2) await new Promise(resolve => setTimeout(resolve, 1))
  const t0 = process.hrtime.bigint()
  await Promise.all(ws.map(w => new Promise(resolve => w.once('message', resolve))))
  const us = Number(process.hrtime.bigint() - t0) / 1000 / (2 * k)
  out({ value: us, check: c[0] === 2 * k && c[2] === 0 })
}

// A rate limit check by each of 4 cluster workers, N times each, with a
// limit never reached: microseconds per check, the mean of the workers'.
// At most this many warm-up calls a worker (the limit never reached).
const WARM_MAX = 20000

async function rate () {
  const WORKERS = 4
  if (cluster.isPrimary) {
    const name = freshSpace()
    if (impl === 'rlf') {
      const { RateLimiterClusterMaster } = require('rate-limiter-flexible')
      new RateLimiterClusterMaster() // eslint-disable-line no-new
    }
    const ws = Array.from({ length: WORKERS }, () => cluster.fork({ BENCH_SPACE: name }))
    // The timed loops start together, once every worker has started and
    // warmed up: a process takes tens of milliseconds to start, and a
    // worker timed while the others still start would have a CPU of its
    // own and no contention.
    const ready = ws.map(w => new Promise(resolve => w.on('message', m => { if (m === 'ready') resolve() })))
    const results = ws.map(w => new Promise(resolve => w.on('message', m => { if (m.us !== undefined) resolve(m) })))
    await Promise.all(ready)
    for (const w of ws) w.send('go')
    const done = await Promise.all(results)
    for (const w of ws) w.kill()
    sabsync.openShared.unlink(name)
    const us = done.reduce((s, r) => s + r.us, 0) / done.length
    out({ value: us, check: done.every(r => r.ok === n) })
    return
  }
  let check
  if (impl === 'sabsync') {
    const space = sabsync.openShared(process.env.BENCH_SPACE, { size: 4 << 20 })
    const limit = space.rateLimit('api', 4 * (n + WARM_MAX) + 1000, { timeUnit: 60000 })
    check = () => limit()
  } else {
    const { RateLimiterCluster } = require('rate-limiter-flexible')
    const limiter = new RateLimiterCluster({ keyPrefix: 'api', points: 4 * (n + WARM_MAX) + 1000, duration: 60, timeoutMs: 60000 })
    check = () => limiter.consume('key')
  }
  // Warm up for 300 ms (and at least 200 calls): 200 calls alone left the
  // JIT still compiling sabsync's loop, four processes at once on two CPUs,
  // well into the timed part (10-13 us a call over 10,000 calls against
  // 0.8 us past them).
  for (let i = 0, end = Date.now() + 300; i < 200 || (i < WARM_MAX && Date.now() < end); i++) await check()
  const go = new Promise(resolve => process.on('message', m => { if (m === 'go') resolve() }))
  process.send('ready')
  await go
  let ok = 0
  const t0 = process.hrtime.bigint()
  for (let i = 0; i < n; i++) { await check(); ok++ }
  const us = Number(process.hrtime.bigint() - t0) / 1000 / n
  process.send({ us, ok })
}

// Lock hand-off between 2 processes, both asynchronous: each takes the lock
// K times and increments a plain counter under it; microseconds per
// hand-off. The counter lives in a space for both (as plain shared memory
// for proper-lockfile), with a count of times a party found the other
// inside: mutual exclusion means 0.
async function handoff () {
  const k = n
  const space = sabsync.openShared(role === 'party' ? spaceName : freshSpace())
  const c = space.int32Array('c', 4)
  if (role === 'party') {
    let lock, unlock
    if (impl === 'sabsync') {
      const m = space.mutex('m')
      lock = () => m.lockAsync()
      unlock = async () => m.unlock()
    } else {
      const lockfile = require('proper-lockfile')
      const file = path.join(os.tmpdir(), spaceName + '.lock-target')
      let release
      lock = async () => { release = await lockfile.lock(file, { realpath: false, retries: { retries: 1e6, minTimeout: 1, maxTimeout: 2, factor: 1 } }) }
      unlock = () => release()
    }
    process.send('ready')
    await new Promise(resolve => process.once('message', resolve))
    for (let i = 0; i < k; i++) {
      await lock()
      if (Atomics.add(c, 1, 1) !== 0) Atomics.add(c, 2, 1)
      c[0]++
      Atomics.sub(c, 1, 1)
      await unlock()
    }
    process.send('done', () => process.exit(0))
    return
  }
  const kids = [0, 1].map(() => fork(__filename, [scenario, impl, String(k), 'party', space.name]))
  await Promise.all(kids.map(p => new Promise(resolve => p.once('message', resolve))))
  const t0 = process.hrtime.bigint()
  for (const p of kids) p.send('go')
  await Promise.all(kids.map(p => new Promise(resolve => p.once('message', resolve))))
  const us = Number(process.hrtime.bigint() - t0) / 1000 / (2 * k)
  out({ value: us, check: c[0] === 2 * k && c[2] === 0, overlaps: c[2] })
  fs.rmSync(path.join(os.tmpdir(), space.name + '.lock-target.lock'), { recursive: true, force: true })
  space.unlink()
  space.close()
}

// A holder SIGKILLed: milliseconds from the kill to the moment a waiter in
// another process (in lockAsync) has the lock, with ownerDied. The median
// of K kills, each in fresh processes and a fresh space.
async function takeover () {
  if (role === 'holder' || role === 'waiter') {
    const space = sabsync.openShared(spaceName)
    const m = space.mutex('m')
    if (role === 'holder') {
      m.lock()
      process.send('ready')
      setInterval(() => {}, 1000)
      return
    }
    process.send('ready')
    await m.lockAsync()
    process.send({ at: Number(process.hrtime.bigint()), ownerDied: m.ownerDied }, () => process.exit(0))
    return
  }
  const times = []
  let check = true
  for (let i = 0; i < n; i++) {
    const name = freshSpace() + '-' + i
    const ready = p => new Promise(resolve => p.once('message', resolve))
    const holder = fork(__filename, [scenario, impl, '1', 'holder', name])
    await ready(holder)
    const waiter = fork(__filename, [scenario, impl, '1', 'waiter', name])
    await ready(waiter)
    await new Promise(resolve => setTimeout(resolve, 50)) // the waiter is queued
    const got = ready(waiter)
    const t0 = Number(process.hrtime.bigint())
    holder.kill('SIGKILL')
    const m = await got
    times.push((m.at - t0) / 1e6)
    check = check && m.ownerDied === true
    sabsync.openShared.unlink(name)
  }
  times.sort((a, b) => a - b)
  out({ value: times[times.length >> 1], check, min: times[0], max: times[times.length - 1] })
}

const scenarios = { uncontended, contended, rate, handoff, takeover }
Promise.resolve(scenarios[scenario]()).catch(err => { console.error(err); process.exit(1) })
