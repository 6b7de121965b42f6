'use strict'
// Stress of the Sema's fast path against its protocol table (src/core/sema.c):
// 6 workers (more threads than cores) mix fast takes and give-backs
// (tryAcquire, release with nobody waiting) with native waits (acquireSync
// with and without timeouts, acquire() with timeouts) on a Sema of 3, while
// the main thread terminates a worker now and then and starts another.
//
// Checked as the run goes:
//  - K1 and the table's states: while a thread holds slot t, holder[t] is
//    its owner id; a checker in the main thread reads every holder word
//    and finds only 0, RECOVERED or the id of a thread of this run;
//  - a slot taken while another thread's tag is still on it (USE[t]) means
//    that thread died holding it, and then recovered(t) is true;
//    (with tokens in 0 … nr-1, that is: never more than nr users at once);
//  - every wait without a timeout ends (the scenario's deadline).
// At the end: nothing queued (exact nrWaiting), every token there once,
// and both paths used (native grants moved the stamp word; fast takes did
// not).
const { Worker, isMainThread, workerData, parentPort } = require('worker_threads')
const sabsync = require('..')
const native = require('../lib/native')
const { Sema } = sabsync

const NR = 3
const WORKERS = 6
const RUN_MS = 6000
const HEADER = native.constants.SEMA_HEADER_BYTES / 4
const FREE_RECOVERED = native.constants.SEMA_HELD_RECOVERED
const W_STAMP = 4
// ctl: [stop, bad, fast takes (guessed: the stamp word did not move), native, holds]
const C = { STOP: 0, BAD: 1, FAST: 2, NATIVE: 3, OPS: 4 }
const MAX_TAGS = 1024 // ids: owner id of each tag; use: tag on each slot; dead: tags terminated

function worker () {
  const { handle, ctl, ids, use, dead, tag } = workerData
  const s = Sema.from(handle)
  const words = new Int32Array(s.buffer, s.byteOffset, Sema.byteLengthFor(NR) / 4)
  const me = native.envId()
  Atomics.store(ids, tag, me)
  let seed = tag * 2654435761 >>> 0 || 1
  const rand = () => { seed ^= seed << 13; seed >>>= 0; seed ^= seed >>> 17; seed ^= seed << 5; seed >>>= 0; return seed }
  const bad = msg => { Atomics.add(ctl, C.BAD, 1); parentPort.postMessage({ bad: msg }) }
  function got (t, how, stampBefore) {
    if (t === undefined) return
    if (!(Number.isInteger(t) && t >= 0 && t < NR)) return bad(`${how} gave ${t}`)
    Atomics.add(ctl, Atomics.load(words, W_STAMP) === stampBefore ? C.FAST : C.NATIVE, 1)
    const holder = Atomics.load(words, HEADER + NR + t)
    if (holder !== me) bad(`slot ${t} held by tag ${tag} (id ${me}) but its holder word is ${holder} (K1)`)
    const prev = Atomics.exchange(use, t, tag)
    if (prev !== 0) {
      if (Atomics.load(dead, prev) !== 1) bad(`slot ${t} taken by ${tag} while tag ${prev}, alive, used it`)
      else if (!s.recovered(t)) bad(`slot ${t} of dead tag ${prev} came back without recovered()`)
    }
    for (let k = rand() % 200; k > 0; k--);
    if (Atomics.compareExchange(use, t, tag, 0) !== tag) bad(`USE of slot ${t} changed while ${tag} held it`)
    if (rand() % 2) s.release(t)
    else s.release()
    Atomics.add(ctl, C.OPS, 1)
  }
  async function loop () {
    while (Atomics.load(ctl, C.STOP) === 0) {
      const stamp = Atomics.load(words, W_STAMP)
      switch (rand() % 6) {
        case 0: case 1: case 2: got(s.tryAcquire(), 'tryAcquire()', stamp); break
        case 3: got(s.acquireSync(), 'acquireSync()', stamp); break
        case 4: got(s.acquireSync(rand() % 3), 'acquireSync(t)', stamp); break
        case 5: got(await s.acquire({ timeout: 1 + rand() % 3 }), 'acquire()', stamp); break
      }
    }
  }
  loop().then(() => parentPort.postMessage({ done: true }))
}

async function semaFastScenario () {
  const s = new Sema(NR)
  const handle = { buffer: s.buffer, byteOffset: s.byteOffset }
  const words = new Int32Array(s.buffer, s.byteOffset, Sema.byteLengthFor(NR) / 4)
  const ctl = new Int32Array(new SharedArrayBuffer(4 * 8))
  const ids = new Int32Array(new SharedArrayBuffer(4 * MAX_TAGS))
  const use = new Int32Array(new SharedArrayBuffer(4 * NR))
  const dead = new Int32Array(new SharedArrayBuffer(4 * MAX_TAGS))
  const problems = []
  const known = new Set([native.envId()])
  let nextTag = 1
  let terminated = 0
  const live = new Map()
  function spawn () {
    const tag = nextTag++
    const w = new Worker(__filename, { workerData: { handle, ctl, ids, use, dead, tag } })
    w.on('message', m => { if (m.bad) problems.push(m.bad) })
    w.on('error', err => problems.push(`worker ${tag}: ${err.stack}`))
    const done = new Promise(resolve => w.once('exit', resolve))
    live.set(tag, { w, done })
  }
  for (let i = 0; i < WORKERS; i++) spawn()
  const stamp0 = Atomics.load(words, W_STAMP)
  const end = Date.now() + RUN_MS
  let checks = 0
  while (Date.now() < end && problems.length === 0) {
    await new Promise(resolve => setTimeout(resolve, 5))
    // The table's states: every holder word is free or a run thread's id.
    for (let tag = 1; tag < nextTag; tag++) { const id = Atomics.load(ids, tag); if (id !== 0) known.add(id) }
    for (let i = 0; i < NR; i++) {
      const h = Atomics.load(words, HEADER + NR + i)
      if (h !== 0 && h !== FREE_RECOVERED && !known.has(h)) problems.push(`holder word of slot ${i} is ${h}: not a state of the table`)
    }
    checks++
    if (checks % 10 === 0 && nextTag < MAX_TAGS) {
      const tags = [...live.keys()]
      const tag = tags[checks % tags.length]
      Atomics.store(dead, tag, 1) // before it dies: a newcomer may find its tag
      const { w, done } = live.get(tag)
      live.delete(tag)
      await w.terminate()
      await done
      terminated++
      spawn()
    }
  }
  Atomics.store(ctl, C.STOP, 1)
  await Promise.all([...live.values()].map(({ done }) => done))
  if (s.nrWaiting() !== 0) problems.push(`nrWaiting() is ${s.nrWaiting()} after the run`)
  const all = []
  for (let t; (t = s.tryAcquire()) !== undefined;) all.push(t)
  if ([...all].sort().join() !== '0,1,2') problems.push(`after the run tryAcquire() gave ${all.join()}, not each of 0 … ${NR - 1} once`)
  const grants = Atomics.load(words, W_STAMP) - stamp0
  if (grants === 0) problems.push('no native grant: the run never left the fast path')
  if (Atomics.load(ctl, C.FAST) === 0) problems.push('no fast take seen')
  const detail = `${Atomics.load(ctl, C.OPS)} holds (about ${Atomics.load(ctl, C.FAST)} fast, ${Atomics.load(ctl, C.NATIVE)} native), ` +
    `${grants} native grants, ${terminated} workers terminated, ${checks} holder scans`
  return { ok: problems.length === 0, detail: problems.length ? problems.slice(0, 5).join('; ') : detail }
}

// The bounded fairness (src/core/sema.c F1-F4): 6 workers (more threads
// than cores) contend on a Sema of 1 with acquireSync, await acquire() and
// tryAcquire, and an empty critical section, so releases find young
// waiters (woken to try again, barged past) and old ones (handed the
// token) all the time, while the main thread terminates a worker now and
// then, some of them with a wake to try again on its way. Checked: never
// two holders (USE); every worker keeps being served (no waiter starves:
// each one's count of holds grows in every window of the run); a lost wake
// would leave the token free with waiters queued and stop every worker,
// which the progress check and the deadline catch; at the end nothing is
// queued and the token is there once.
const FAIR_WINDOW_MS = 2000
function fairWorker () {
  const { handle, ctl, use, holds, slot } = workerData
  const s = Sema.from(handle)
  const me = slot + 1
  let seed = me * 2654435761 >>> 0 || 1
  const rand = () => { seed ^= seed << 13; seed >>>= 0; seed ^= seed >>> 17; seed ^= seed << 5; seed >>>= 0; return seed }
  const bad = msg => { Atomics.add(ctl, C.BAD, 1); parentPort.postMessage({ bad: msg }) }
  function hold (t) {
    if (t === undefined) return
    if (t !== 0) return bad(`token ${t} of a Sema of 1`)
    const prev = Atomics.exchange(use, 0, me)
    if (prev !== 0 && !s.recovered(t)) bad(`taken by ${me} while ${prev} held it, and not recovered()`)
    if (Atomics.compareExchange(use, 0, me, 0) !== me) bad(`USE changed while ${me} held the token`)
    Atomics.add(holds, slot, 1)
    s.release(t)
  }
  async function loop () {
    while (Atomics.load(ctl, C.STOP) === 0) {
      switch (rand() % 4) {
        case 0: hold(s.tryAcquire()); break
        case 1: hold(s.acquireSync()); break
        default: hold(await s.acquire())
      }
    }
  }
  loop().then(() => parentPort.postMessage({ done: true }))
}

async function semaFairScenario () {
  const s = new Sema(1)
  const handle = { buffer: s.buffer, byteOffset: s.byteOffset }
  const ctl = new Int32Array(new SharedArrayBuffer(4 * 8))
  const use = new Int32Array(new SharedArrayBuffer(4))
  const holds = new Int32Array(new SharedArrayBuffer(4 * WORKERS))
  const problems = []
  const live = new Map()
  let terminated = 0
  function spawn (slot) {
    const w = new Worker(__filename, { workerData: { fair: true, handle, ctl, use, holds, slot } })
    w.on('message', m => { if (m.bad) problems.push(m.bad) })
    w.on('error', err => problems.push(`worker ${slot}: ${err.stack}`))
    live.set(slot, { w, done: new Promise(resolve => w.once('exit', resolve)) })
  }
  for (let i = 0; i < WORKERS; i++) spawn(i)
  // Let every worker start before the first window counts.
  await new Promise(resolve => setTimeout(resolve, 500))
  const end = Date.now() + RUN_MS
  let windows = 0
  let total = 0
  while (Date.now() < end && problems.length === 0) {
    const before = Array.from(holds)
    await new Promise(resolve => setTimeout(resolve, FAIR_WINDOW_MS))
    windows++
    const after = Array.from(holds)
    for (let i = 0; i < WORKERS; i++) {
      if (after[i] === before[i]) problems.push(`worker ${i} was not served for ${FAIR_WINDOW_MS} ms (window ${windows}: ${before.join('/')} -> ${after.join('/')})`)
    }
    total += after.reduce((a, b) => a + b, 0) - before.reduce((a, b) => a + b, 0)
    // One worker terminated, at once replaced (its counter starts over).
    const slot = windows % WORKERS
    const { w, done } = live.get(slot)
    live.delete(slot)
    await w.terminate()
    await done
    terminated++
    Atomics.store(holds, slot, 0)
    spawn(slot)
    await new Promise(resolve => setTimeout(resolve, 300))
  }
  Atomics.store(ctl, C.STOP, 1)
  await Promise.all([...live.values()].map(({ done }) => done))
  if (s.nrWaiting() !== 0) problems.push(`nrWaiting() is ${s.nrWaiting()} after the run`)
  const first = s.tryAcquire()
  if (first !== 0 || s.tryAcquire() !== undefined) problems.push(`after the run tryAcquire() gave ${first}, not the one token once`)
  return {
    ok: problems.length === 0,
    detail: problems.length ? problems.slice(0, 5).join('; ') : `${total} holds in ${windows} windows of ${FAIR_WINDOW_MS} ms, every worker served in each, ${terminated} workers terminated`
  }
}

if (!isMainThread && workerData && workerData.tag) worker()
if (!isMainThread && workerData && workerData.fair) fairWorker()

module.exports = { semaFastScenario, semaFairScenario }

if (isMainThread && require.main === module) {
  const run = process.argv[2] === 'fair' ? semaFairScenario : semaFastScenario
  run().then(r => { console.log(r.ok ? 'ok' : 'FAILED', r.detail); process.exit(r.ok ? 0 : 1) })
}
