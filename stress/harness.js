'use strict'
// The harness of the primitives' stress runs (`npm run stress`); each
// primitive's scenario is a file of its own beside this one
// (stress/mutex.js, stress/atomic-flag.js, stress/once.js, stress/latch.js,
// stress/condvar.js, stress/rwlock.js, stress/barrier.js, stress/sema.js,
// stress/rate-limit.js), and stress/index.js lists them.
//
// Stress of the primitives: for each of Mutex, AtomicFlag, Once, Latch,
// CondVar, RWLock, Barrier, Sema and RateLimit, 7 workers (more threads than
// cores) plus the main thread (the promise forms, several tasks at once)
// hammer one shared instance for a few seconds with random timeouts and
// aborts, while workers are terminated at random and call process.exit()
// at random points (inside critical sections too); each dead worker is
// replaced. Invariants are checked as the run goes and at the end, and
// every run must end within its deadline (a hang is a failure).
//
// Checking exactly in spite of deaths. Data guarded by a lock is changed
// with plain (non-atomic) reads and writes, behind a journal: before an
// update the holder writes what it is about to change and its tag (thread
// id); when the next holder finds `ownerDied` (or `recovered()` for a Sema
// token) it rolls a half-done update back. Counters then stay exact:
// counter === the sum of the updates each thread recorded. "Who holds it" is
// counted in and out with Atomics; when a newcomer finds a holder still
// counted in, that holder must be dead, which the run checks at once: each
// thread holds a Mutex of its own (its "life" lock) from its first line, so
// `life.isLocked` is false exactly when sabsync considers it dead. Every tag
// reported dead is also checked at the end against the workers that were
// terminated or exited. AtomicFlag and Latch have no owner (a thread that
// dies holding a flag leaves it set, by design), so there the random
// terminations only hit workers that are not between an update and its
// record (a handshake on a per-thread phase cell), and process.exit() inside
// the critical section is accounted for by the main thread, which sees the
// dead worker's tag in the holder cell and repairs, clears and notifies.

const path = require('path')
const { Worker } = require('worker_threads')
const sabsync = require('..')
const { counts } = require('../lib/lot')
const { COUNT_STRIDE: countStride } = require('../lib/native').constants

const root = JSON.stringify(path.join(__dirname, '..'))

const MAX_TAGS = 4096
const L = {
  STOP: 0,
  FAILS: 1,
  SEEN_N: 2,
  NEVER: 3,
  LANE0: 8, // per lane: tag * 4 + gen of its current incarnation
  PHASE0: 32, // per tag: 0 idle, n > 0 busy, -1 marked for termination
  SEEN0: 32 + MAX_TAGS, // tags found dead by others
  SEEN_CAP: 8192,
  EXIT: 7, // the exit code of an injected process.exit()
  LEN: 32 + MAX_TAGS + 8192
}

const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

// Threads waiting anywhere on the parking lot, from its per-bucket counters.
function lotWaiters () {
  if (counts === null) return 0
  let n = 0
  for (let i = 0; i < counts.length; i += countStride) n += Atomics.load(counts, i)
  return n
}

// ---- what every thread (worker or main) uses; stringified into workers ----

function envOf (sabsync, wd, post) {
  const { tag, lane, gen, L } = wd
  const ctl = new Int32Array(wd.ctl)
  let s = wd.seed | 0
  function rnd () { // mulberry32
    s = (s + 0x6D2B79F5) | 0
    let t = Math.imul(s ^ (s >>> 15), 1 | s)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
  const lives = new Map()
  function lifeOf (t) {
    let m = lives.get(t)
    if (m === undefined) lives.set(t, m = sabsync.Mutex.from({ buffer: wd.lifeBuf, byteOffset: t * sabsync.Mutex.byteLength }))
    return m
  }
  const isMain = tag === 1
  const sleeper = new Int32Array(new SharedArrayBuffer(4))
  const ABORT = new Error('aborted by the stress test')
  const env = {
    tag,
    lane,
    gen,
    isMain,
    rnd,
    ABORT,
    stopping: () => Atomics.load(ctl, L.STOP) !== 0,
    fail (msg) {
      Atomics.add(ctl, L.FAILS, 1)
      post({ fail: `thread ${tag}: ${msg}` })
    },
    // Whether thread t is alive as sabsync sees it (its life lock is held).
    alive: t => t === tag || lifeOf(t).isLocked,
    // Thread t was found still counted in by a newcomer: it must be dead.
    sawDead (t, what) {
      if (t === 0 || t === tag || lifeOf(t).isLocked) return env.fail(`${what}: thread ${t} is not dead`)
      const i = Atomics.add(ctl, L.SEEN_N, 1)
      if (i < L.SEEN_CAP) Atomics.store(ctl, L.SEEN0 + i, t)
    },
    born () { lifeOf(tag).lock() },
    dies () { lifeOf(tag).unlock() },
    // The termination handshake of the scenarios for primitives without an
    // owner: busy() before an update that must not be cut in two, idle()
    // after it. A thread marked for termination waits for it in busy().
    // (A count: several async tasks of a thread may be busy at once.)
    busy () {
      for (let v = Atomics.load(ctl, L.PHASE0 + tag); ;) {
        if (v < 0) for (;;) Atomics.wait(ctl, L.NEVER, 0, 100)
        const seen = Atomics.compareExchange(ctl, L.PHASE0 + tag, v, v + 1)
        if (seen === v) return
        v = seen
      }
    },
    idle () { Atomics.sub(ctl, L.PHASE0 + tag, 1) },
    maybeExit (p) { if (!isMain && rnd() < p) process.exit(L.EXIT) },
    // A random timeout for a blocking call: forever, 0, short, longer.
    timeout () {
      const r = rnd()
      return r < 0.3 ? undefined : r < 0.45 ? 0 : r < 0.8 ? rnd() * 2 : rnd() * 20
    },
    // Random { timeout, signal } for a promise call; the signal aborts
    // (with ABORT) now or within a few ms.
    options () {
      const o = {}
      const r = rnd()
      if (r < 0.4) o.timeout = rnd() < 0.25 ? 0 : rnd() * 10
      if (rnd() < 0.2) {
        const ac = new AbortController()
        o.signal = ac.signal
        const ms = rnd() * 5
        if (ms < 0.3) ac.abort(ABORT)
        else setTimeout(() => ac.abort(ABORT), ms)
      }
      return o
    },
    spin (n) {
      let x = 0
      for (let i = 0; i < n; i++) x += i
      return x
    },
    sleep (ms) { Atomics.wait(sleeper, 0, 0, ms) },
    tick: () => new Promise(resolve => setImmediate(resolve)),
    // For a promise call: the test's abort is expected, anything else fails.
    expectAbort (err, what) {
      if (err !== ABORT) env.fail(`${what} rejected with ${err && err.stack}`)
    }
  }
  return env
}

// Who holds a multi-holder primitive, counted in and out with Atomics in
// one Int32 cell: lanes 0-7 have 3 bits each (bit 0: in; bits 1-2: the
// incarnation's gen), the main thread a count in bits 24-30. One CAS counts
// a thread in and answers a snapshot. In a snapshot, a lane's bit counts
// only if the lane's current incarnation set it (same gen) and is alive: a
// thread that died counted in leaves its bit (sabsync has given what it
// held to others by then) until the main thread, seeing it exit, clears
// the lane's bits (clearLane) before it starts the lane's next incarnation,
// so a stale bit never carries the gen of a live incarnation.
function holderSet (env, ctl, i32, index, L) {
  const MAIN = 1 << 24
  return {
    enter () {
      if (env.isMain) return Atomics.add(i32, index, MAIN) + MAIN
      const shift = env.lane * 3
      for (let w = Atomics.load(i32, index); ;) {
        const next = (w & ~(7 << shift)) | (((env.gen << 1) | 1) << shift)
        const seen = Atomics.compareExchange(i32, index, w, next)
        if (seen === w) return next
        w = seen
      }
    },
    leave () {
      if (env.isMain) Atomics.sub(i32, index, MAIN)
      else Atomics.and(i32, index, ~(7 << (env.lane * 3)))
    },
    snapshot: () => Atomics.load(i32, index),
    clearLane (lane) { Atomics.and(i32, index, ~(7 << (lane * 3))) },
    // { workers, main } live in snapshot s
    live (s) {
      let workers = 0
      for (let lane = 0; lane < 8; lane++) {
        const f = (s >>> (lane * 3)) & 7
        if ((f & 1) === 0) continue
        const info = Atomics.load(ctl, L.LANE0 + lane)
        if ((info & 3) !== (f >>> 1)) continue // an earlier incarnation's: dead
        if (env.alive(info >>> 2)) workers++
      }
      return { workers, main: (s >>> 24) & 0x7F }
    }
  }
}

// ---- the harness ----

// Runs one scenario: `spec.setup(env)` makes the primitives ({ shared } is
// posted to every worker as `data`); `spec.worker` is the workers' code
// (env, data, sabsync in scope; it runs until env.stopping()); `spec.main`
// the main thread's part (async, until env.stopping()); `spec.release`
// frees stragglers once stopping; `spec.check` the final invariants.
async function scenario (spec) {
  const { lanes = 7, durationMs = 6000, killMs = 70, minAgeMs = 60, guarded = false, seed = 1 } = spec
  // Waiters left on the lot by an earlier scenario that failed are not
  // this one's.
  const base = lotWaiters()
  const ctlBuf = new SharedArrayBuffer(4 * L.LEN)
  const ctl = new Int32Array(ctlBuf)
  // Each thread tag's life: a Mutex its thread holds while it lives.
  const lifeBuf = new SharedArrayBuffer(sabsync.Mutex.byteLength * MAX_TAGS)
  for (let t = 0; t < MAX_TAGS; t++) new sabsync.Mutex({ buffer: lifeBuf, byteOffset: t * sabsync.Mutex.byteLength }) // eslint-disable-line no-new
  const fails = []
  const errors = []
  const killed = new Set()
  const exited = new Set()
  const stats = { started: 0, killed: 0, exited: 0, lanes }
  let master = (seed * 2654435761) >>> 0
  const rnd = () => ((master = (Math.imul(master, 1103515245) + 12345) >>> 0) / 4294967296)
  const env = envOf(sabsync, { ctl: ctlBuf, lifeBuf, tag: 1, lane: -1, gen: 0, seed: seed * 7919, L }, m => fails.push(m.fail))
  env.born()
  const data = spec.setup(env)
  const src = `'use strict'
const sabsync = require(${root})
const { workerData, parentPort } = require('worker_threads')
const envOf = ${envOf}
const holderSet = ${holderSet}
${(spec.functions || []).map(f => `const ${f.name} = ${f}`).join('\n')}
const env = envOf(sabsync, workerData, m => parentPort.postMessage(m))
env.born()
const data = workerData.data
const L = workerData.L
${spec.worker}`

  let nextTag = 2
  let stopping = false
  const workers = new Array(lanes).fill(null)
  const laneGen = new Array(lanes).fill(0)
  const pending = new Set()

  function spawn (lane) {
    if (stopping || workers[lane] !== null || nextTag >= MAX_TAGS) return
    const tag = nextTag++
    const gen = laneGen[lane] = (laneGen[lane] + 1) & 3
    Atomics.store(ctl, L.LANE0 + lane, tag * 4 + gen)
    const workerData = { ctl: ctlBuf, lifeBuf, tag, lane, gen, seed: seed * 7919 + tag * 104729, L, data: data.shared }
    if (spec.spawning) spec.spawning(workerData, data)
    const w = new Worker(src, { eval: true, workerData })
    const rec = { w, tag, lane, born: performance.now(), killing: false }
    workers[lane] = rec
    stats.started++
    w.on('message', m => { if (m && m.fail) fails.push(m.fail) })
    w.on('error', err => { errors.push(`thread ${tag}: uncaught ${err && err.stack}`) })
    const done = new Promise(resolve => w.once('exit', code => {
      let how
      if (rec.killing) {
        how = 'killed'
        killed.add(tag)
        stats.killed++
      } else if (code === L.EXIT) {
        how = 'exited'
        exited.add(tag)
        stats.exited++
      } else if (code === 0) {
        how = 'ended'
        if (!stopping) errors.push(`thread ${tag} ended before the stop`)
      } else {
        how = 'error'
        errors.push(`thread ${tag} exited with code ${code}`)
      }
      if (spec.onDeath) spec.onDeath(tag, how, lane, data, env)
      workers[lane] = null
      pending.delete(done)
      if (!stopping && how !== 'ended') setTimeout(spawn, 1 + rnd() * 20, lane)
      resolve()
    }))
    pending.add(done)
  }

  for (let lane = 0; lane < lanes; lane++) spawn(lane)
  const killer = setInterval(() => {
    const rec = workers[Math.floor(rnd() * lanes)]
    if (rec === null || rec.killing || performance.now() - rec.born < minAgeMs) return
    // Scenarios without owners: only a thread that is not mid-update.
    if (guarded && Atomics.compareExchange(ctl, L.PHASE0 + rec.tag, 0, -1) !== 0) return
    rec.killing = true
    rec.w.terminate()
  }, killMs)

  const mainDone = spec.main(env, data, ctl).catch(err => { errors.push(`main: ${err.stack}`) })
  await sleep(durationMs)
  stopping = true
  Atomics.store(ctl, L.STOP, 1)
  clearInterval(killer)

  // Everyone must finish: the main thread's tasks and every worker.
  const t0 = performance.now()
  let hung = false
  const state = { mainFinished: false }
  mainDone.then(() => { state.mainFinished = true })
  while (!state.mainFinished || pending.size > 0) {
    if (spec.release) spec.release(data)
    await sleep(10)
    if (performance.now() - t0 > 20000) {
      hung = true
      if (!state.mainFinished) errors.push('hang: the main thread\'s tasks did not end within 20 s of the stop')
      if (pending.size > 0) {
        errors.push(`hang: threads ${workers.filter(Boolean).map(r => r.tag).join(',')} still running 20 s after the stop`)
        for (const r of workers) if (r !== null) r.w.terminate()
        await Promise.race([Promise.all(pending), sleep(5000)])
      }
      break
    }
  }

  let r
  if (hung) {
    r = { ok: false, detail: '' }
  } else {
    try {
      r = await spec.check(env, data, stats, ctl)
    } catch (err) {
      r = { ok: false, detail: 'check threw ' + err.stack }
    }
  }

  // Every tag found dead by another thread was terminated or exited.
  const seenN = Math.min(Atomics.load(ctl, L.SEEN_N), L.SEEN_CAP)
  for (let i = 0; i < seenN; i++) {
    const t = Atomics.load(ctl, L.SEEN0 + i)
    if (!killed.has(t) && !exited.has(t)) errors.push(`thread ${t} was taken for dead but was neither terminated nor exited`)
  }
  if (Atomics.load(ctl, L.FAILS) !== fails.length) {
    errors.push(`${Atomics.load(ctl, L.FAILS)} invariant failures counted, ${fails.length} reported (a thread died reporting one)`)
  }
  // Nothing left waiting anywhere on the lot (a dead thread's records go
  // at its teardown, which may trail its exit event a little).
  let left = lotWaiters() - base
  for (let i = 0; i < 100 && left !== 0; i++) {
    await sleep(10)
    left = lotWaiters() - base
  }
  if (left !== 0) errors.push(`${left} waiters left on the parking lot`)
  env.dies()
  const problems = [...fails.slice(0, 5), ...errors.slice(0, 5)]
  const ok = r.ok && fails.length === 0 && errors.length === 0
  const deaths = `${stats.started} workers started, ${stats.killed} terminated, ${stats.exited} exited`
  return {
    ok,
    detail: `${r.detail}; ${deaths}; ${seenN} dead holders found and checked; lot waiters ${left}` +
      (base !== 0 ? ` (not counting ${base} left by an earlier scenario)` : '') +
      (problems.length ? `; PROBLEMS (${fails.length + errors.length}): ${problems.join(' | ')}` : '')
  }
}

function sum (i32, from, n) {
  let s = 0
  for (let i = 0; i < n; i++) s += i32[from + i]
  return s
}

function cells (x, n) {
  return new Int32Array(x.buffer, x.byteOffset, n)
}

// Waiters on the first n cells of a primitive (its header, tag included).
function waitersOn (x, n) {
  const c = cells(x, n)
  let w = 0
  for (let i = 0; i < n; i++) w += sabsync.waiters(c, i)
  return w
}

// Workers: half block in lock(timeout)/tryLock, half run two lockAsync loops.
const asyncOrSync = () => `
if (env.rnd() < 0.5) {
  while (!env.stopping()) L2.syncOp()
} else {
  for (let i = 0; i < 2; i++) (async () => { while (!env.stopping()) { await L2.asyncOp(); if (env.rnd() < 0.1) await env.tick() } })()
}`

// The calm after a scenario's chaos: n fresh workers run `body` (sabsync,
// workerData in scope) with nobody killed; resolves with the errors they
// threw or exited with. A scenario's check uses it to show that the
// primitive still does its whole job after every death and abort of the
// run, however little the run itself completed on a loaded machine (the
// chaos's own progress measures the machine as much as the code).
function calmWorkers (n, body, workerData) {
  const src = `'use strict'
const sabsync = require(${root})
const { workerData } = require('worker_threads')
${body}`
  const runs = []
  for (let i = 0; i < n; i++) {
    runs.push(new Promise(resolve => {
      const w = new Worker(src, { eval: true, workerData: { ...workerData, index: i } })
      let error
      w.once('error', err => { error = `calm worker ${i}: ${err && err.stack}` })
      w.once('exit', code => resolve(error || (code !== 0 ? `calm worker ${i} exited with ${code}` : undefined)))
    }))
  }
  return Promise.all(runs).then(errs => errs.filter(e => e !== undefined))
}

function mainTasks (env, n, op) {
  const tasks = []
  for (let i = 0; i < n; i++) {
    tasks.push((async () => {
      while (!env.stopping()) {
        await op()
        await env.tick() // let timers and exit events in
      }
    })())
  }
  return Promise.all(tasks)
}

module.exports = {
  root,
  MAX_TAGS,
  L,
  sleep,
  lotWaiters,
  envOf,
  holderSet,
  scenario,
  sum,
  cells,
  waitersOn,
  asyncOrSync,
  mainTasks,
  calmWorkers
}
