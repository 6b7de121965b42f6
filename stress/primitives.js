'use strict'
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
const { Mutex, AtomicFlag, Once, Latch, CondVar, RWLock, Barrier, Sema, RateLimit } = sabsync

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

// ---- Mutex ----
//
// d: [COUNTER] the guarded counter; [HOLDER] who is inside (Atomics);
// journal [JTAG, JCOUNT, JDONE]; [TAKEOVERS, REPAIRS]; [DONE0 + tag] the
// updates each thread made (plain, under the lock).

function mutexLogic (env, m, d) {
  const COUNTER = 0; const HOLDER = 1; const JTAG = 2; const JCOUNT = 3; const JDONE = 4
  const TAKEOVERS = 5; const REPAIRS = 6; const TIMEOUTS = 7; const ABORTS = 8; const DONE0 = 16
  const tag = env.tag
  function enter () {
    const died = m.ownerDied
    const prev = Atomics.exchange(d, HOLDER, tag)
    if (prev !== 0) {
      if (!died) env.fail(`mutex: thread ${prev} still inside when ${tag} got it, and ownerDied is false`)
      else env.sawDead(prev, 'mutex holder')
    }
    const j = Atomics.load(d, JTAG)
    if (died) {
      d[TAKEOVERS]++
      if (j !== 0) {
        env.sawDead(j, 'half-done update')
        d[COUNTER] = d[JCOUNT]
        d[DONE0 + j] = d[JDONE]
        Atomics.store(d, JTAG, 0)
        d[REPAIRS]++
      }
    } else if (j !== 0) {
      env.fail(`mutex: a half-done update by ${j} and ownerDied is false`)
    }
  }
  function begin () {
    d[JCOUNT] = d[COUNTER]
    d[JDONE] = d[DONE0 + tag]
    Atomics.store(d, JTAG, tag)
    return d[COUNTER]
  }
  function commit (v) {
    d[COUNTER] = v + 1
    d[DONE0 + tag]++
    Atomics.store(d, JTAG, 0)
  }
  function out () {
    if (Atomics.compareExchange(d, HOLDER, tag, 0) !== tag) env.fail('mutex: HOLDER changed while held')
  }
  function syncOp () {
    const got = env.rnd() < 0.1 ? m.tryLock() : m.lock(env.timeout())
    if (!got) {
      Atomics.add(d, TIMEOUTS, 1)
      return
    }
    enter()
    const v = begin()
    env.spin(env.rnd() * 200)
    env.maybeExit(0.0004)
    commit(v)
    env.maybeExit(0.0002)
    out()
    m.unlock()
  }
  async function asyncOp () {
    const o = env.options()
    try {
      if (env.rnd() < 0.2) {
        await m.runExclusive(async () => {
          enter()
          const v = begin()
          if (env.rnd() < 0.3) await env.tick()
          commit(v)
          out()
        }, o)
        return
      }
      if (!(await m.lockAsync(o))) {
        Atomics.add(d, TIMEOUTS, 1)
        return
      }
    } catch (err) {
      if (err && err.code === 'ERR_SABSYNC_TIMEOUT') Atomics.add(d, TIMEOUTS, 1)
      else {
        Atomics.add(d, ABORTS, 1)
        env.expectAbort(err, 'lockAsync')
      }
      return
    }
    enter()
    const v = begin()
    if (env.rnd() < 0.3) await env.tick()
    env.maybeExit(0.001)
    commit(v)
    out()
    m.unlock()
  }
  return { syncOp, asyncOp, enter, begin, commit, out, DONE0, COUNTER, TAKEOVERS, REPAIRS, TIMEOUTS, ABORTS }
}

// Workers: half block in lock(timeout)/tryLock, half run two lockAsync loops.
const asyncOrSync = () => `
if (env.rnd() < 0.5) {
  while (!env.stopping()) L2.syncOp()
} else {
  for (let i = 0; i < 2; i++) (async () => { while (!env.stopping()) { await L2.asyncOp(); if (env.rnd() < 0.1) await env.tick() } })()
}`

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

function mutexScenario () {
  return scenario({
    seed: 11,
    functions: [mutexLogic],
    setup () {
      const m = new Mutex()
      const d = new Int32Array(new SharedArrayBuffer(4 * (16 + MAX_TAGS)))
      return { m, d, shared: { m, d: d.buffer } }
    },
    worker: `
const L2 = mutexLogic(env, sabsync.Mutex.from(data.m), new Int32Array(data.d))
${asyncOrSync()}`,
    main: (env, { m, d }) => mainTasks(env, 3, mutexLogic(env, m, d).asyncOp),
    async check (env, { m, d }) {
      const L2 = mutexLogic(env, m, d)
      // A last holder may have died inside: take it over, roll back.
      if (!(await m.lockAsync({ timeout: 5000 }))) return { ok: false, detail: 'the final lockAsync timed out' }
      L2.enter()
      L2.out()
      m.unlock()
      const total = sum(d, L2.DONE0, MAX_TAGS)
      const counter = d[L2.COUNTER]
      const waiting = waitersOn(m, 4)
      return {
        ok: counter === total && counter > 1000 && waiting === 0 && !m.isLocked,
        detail: `counter ${counter} === sum of per-thread updates ${total}; ${d[L2.TAKEOVERS]} ownerDied takeovers, ` +
          `${d[L2.REPAIRS]} half-done updates rolled back; ${Atomics.load(d, L2.TIMEOUTS)} timeouts, ${Atomics.load(d, L2.ABORTS)} aborts; ` +
          `waiters on the mutex ${waiting}`
      }
    }
  })
}

// ---- AtomicFlag (as a lock: testAndSet / wait / clear + notify) ----

function flagLogic (env, f, d) {
  const COUNTER = 0; const HOLDER = 1; const JTAG = 2; const JCOUNT = 3; const JDONE = 4
  const TIMEOUTS = 5; const ABORTS = 6; const WAITS = 7; const DONE0 = 16
  const tag = env.tag
  function enter () {
    const prev = Atomics.exchange(d, HOLDER, tag)
    if (prev !== 0) env.fail(`flag: thread ${prev} still inside when ${tag} set the flag`)
    if (Atomics.load(d, JTAG) !== 0) env.fail('flag: a half-done update left')
  }
  function update () {
    d[JCOUNT] = d[COUNTER]
    d[JDONE] = d[DONE0 + tag]
    Atomics.store(d, JTAG, tag)
    const v = d[COUNTER]
    env.spin(env.rnd() * 2000)
    env.maybeExit(0.0005) // the main thread repairs, clears and notifies
    d[COUNTER] = v + 1
    d[DONE0 + tag]++
    Atomics.store(d, JTAG, 0)
  }
  function leave () {
    if (Atomics.compareExchange(d, HOLDER, tag, 0) !== tag) env.fail('flag: HOLDER changed while held')
    f.clear()
    if (env.rnd() < 0.2) f.notifyAll()
    else f.notifyOne()
  }
  function syncOp () {
    const t = env.timeout()
    const end = t === undefined ? Infinity : performance.now() + t
    env.busy()
    while (f.testAndSet()) {
      env.idle() // may be terminated while it waits
      const left = end - performance.now()
      if (left <= 0) {
        Atomics.add(d, TIMEOUTS, 1)
        return
      }
      Atomics.add(d, WAITS, 1)
      const changed = f.wait(true, end === Infinity ? undefined : left)
      env.busy()
      if (!changed && f.test() && performance.now() >= end) {
        env.idle()
        Atomics.add(d, TIMEOUTS, 1)
        return
      }
    }
    enter()
    update()
    leave()
    env.idle()
  }
  async function asyncOp () {
    const o = env.options()
    env.busy()
    while (f.testAndSet()) {
      env.idle()
      let changed
      Atomics.add(d, WAITS, 1)
      try {
        changed = await f.waitAsync(true, o)
      } catch (err) {
        Atomics.add(d, ABORTS, 1)
        return env.expectAbort(err, 'waitAsync')
      }
      if (!changed) {
        Atomics.add(d, TIMEOUTS, 1)
        return
      }
      env.busy()
    }
    enter()
    const v = d[COUNTER]
    if (env.rnd() < 0.3) await env.tick()
    env.maybeExit(0.001)
    d[COUNTER] = v + 1
    d[DONE0 + tag]++
    leave()
    env.idle()
  }
  // The main thread, for a worker that died (exited) holding the flag.
  function recover (dead) {
    if (Atomics.load(d, HOLDER) !== dead) return false
    const j = Atomics.load(d, JTAG)
    if (j !== 0) {
      if (j !== dead) env.fail(`flag: half-done update by ${j}, holder ${dead}`)
      d[COUNTER] = d[JCOUNT]
      d[DONE0 + j] = d[JDONE]
      Atomics.store(d, JTAG, 0)
    }
    Atomics.store(d, HOLDER, 0)
    f.clear()
    f.notifyAll()
    return true
  }
  return { syncOp, asyncOp, recover, COUNTER, HOLDER, DONE0, TIMEOUTS, ABORTS, WAITS }
}

function flagScenario () {
  let recovered = 0
  let compensated = 0
  return scenario({
    seed: 12,
    guarded: true,
    functions: [flagLogic],
    setup () {
      const f = new AtomicFlag()
      const d = new Int32Array(new SharedArrayBuffer(4 * (16 + MAX_TAGS)))
      return { f, d, shared: { f, d: d.buffer } }
    },
    worker: `
const L2 = flagLogic(env, sabsync.AtomicFlag.from(data.f), new Int32Array(data.d))
${asyncOrSync()}`,
    main: (env, { f, d }) => mainTasks(env, 3, flagLogic(env, f, d).asyncOp),
    onDeath (tag, how, lane, { f, d }, env) {
      if (how === 'exited' || how === 'killed') {
        // Killed: only while idle or waiting, never holding (the handshake).
        if (how === 'killed' && Atomics.load(d, 1) === tag) env.fail(`flag: thread ${tag} was terminated holding the flag`)
        if (flagLogic(env, f, d).recover(tag)) recovered++
        else if (how === 'killed') {
          // It may have been woken by a notifyOne and died before acting on
          // it (a flag has no owner to pass it on): notify in its place.
          f.notifyOne()
          compensated++
        }
      }
    },
    release ({ f }) { f.notifyAll() },
    async check (env, { f, d }) {
      const L2 = flagLogic(env, f, d)
      const total = sum(d, L2.DONE0, MAX_TAGS)
      const counter = d[L2.COUNTER]
      const waiting = waitersOn(f, 2)
      return {
        ok: counter === total && counter > 1000 && !f.test() && Atomics.load(d, L2.HOLDER) === 0 && waiting === 0,
        detail: `counter ${counter} === sum of per-thread updates ${total}; ${recovered} flags left set by an exited holder recovered, ` +
          `${compensated} notifies for terminated waiters; ${Atomics.load(d, L2.WAITS)} waits, ${Atomics.load(d, L2.TIMEOUTS)} timeouts, ` +
          `${Atomics.load(d, L2.ABORTS)} aborts; flag clear, waiters ${waiting}`
      }
    }
  })
}

// ---- Once ----
//
// NONCE Onces side by side; every thread works near a common frontier so
// that they meet on the same ones. fn sleeps (others wait), throws (another
// caller runs it), or its thread exits or is terminated inside it (a
// waiting or later caller runs it). d: [IN0 + k] who is inside fn k;
// [COMPLETES0 + k] completed runs; [COMPLETER0 + k] who completed last;
// [RERUNS0 + k] runs started after a completed one whose thread died
// before Once recorded it (legitimate: checked dead at once).

const NONCE = 16000

function onceLogic (env, onceAt, d, N) {
  const FRONT = 0; const STARTS = 1; const THROWS = 2; const TIMEOUTS = 3; const ABORTS = 4; const FALSES = 5
  const IN0 = 16; const COMPLETES0 = IN0 + N; const COMPLETER0 = COMPLETES0 + N; const RERUNS0 = COMPLETER0 + N
  const tag = env.tag
  const POISON = new Error('thrown by fn on purpose')
  function start (k) {
    const prev = Atomics.exchange(d, IN0 + k, tag)
    if (prev !== 0) env.sawDead(prev, `Once ${k}: fn still running`)
    if (Atomics.load(d, COMPLETES0 + k) > 0) {
      env.sawDead(Atomics.load(d, COMPLETER0 + k), `Once ${k}: fn runs again after it completed`)
      Atomics.add(d, RERUNS0 + k, 1)
    }
    Atomics.add(d, STARTS, 1)
  }
  function maybeThrow (k) {
    if (env.rnd() < 0.15) {
      Atomics.compareExchange(d, IN0 + k, tag, 0)
      Atomics.add(d, THROWS, 1)
      throw POISON
    }
  }
  function finish (k, call) {
    Atomics.store(d, COMPLETER0 + k, tag)
    Atomics.add(d, COMPLETES0 + k, 1)
    if (Atomics.compareExchange(d, IN0 + k, tag, 0) !== tag) env.fail(`Once ${k}: IN changed while fn ran`)
    call.ran = true
  }
  function pick () {
    const front = Atomics.load(d, FRONT)
    return Math.min(N - 1, front + Math.floor(env.rnd() * 4))
  }
  function advance () {
    for (let f = Atomics.load(d, FRONT); f < N && onceAt(f).done;) {
      const seen = Atomics.compareExchange(d, FRONT, f, f + 1)
      f = seen === f ? f + 1 : seen
    }
  }
  // What run()/runAsync() answered: true iff this call completed fn.
  function answered (k, r, what, call) {
    const mine = call.ran
    if (r === true && !mine) env.fail(`Once ${k}: ${what} answered true but this call did not complete fn`)
    if (r !== true && mine) env.fail(`Once ${k}: ${what} answered ${r} after this call completed fn`)
    if (r === false && !onceAt(k).done) env.fail(`Once ${k}: ${what} answered false but done is false`)
    if (r === false) Atomics.add(d, FALSES, 1)
    if (r === undefined) Atomics.add(d, TIMEOUTS, 1)
    if (r !== true && r !== false && r !== undefined) env.fail(`Once ${k}: ${what} answered ${r}`)
  }
  function syncOp () {
    if (Atomics.load(d, FRONT) >= N) return env.sleep(1)
    const k = pick()
    const nap = env.rnd() < 0.5 ? env.rnd() * 1.5 : 0
    const call = { ran: false }
    let r
    try {
      r = onceAt(k).run(() => {
        start(k)
        if (nap > 0) env.sleep(nap)
        env.maybeExit(0.004)
        maybeThrow(k)
        finish(k, call)
      }, env.timeout())
    } catch (err) {
      if (err !== POISON) env.fail(`Once ${k}: run threw ${err && err.stack}`)
      return
    }
    answered(k, r, 'run', call)
    advance()
  }
  async function asyncOp () {
    if (Atomics.load(d, FRONT) >= N) return env.tick()
    const k = pick()
    const nap = env.rnd() < 0.5 ? env.rnd() * 1.5 : 0
    const call = { ran: false }
    let r
    try {
      r = await onceAt(k).runAsync(async () => {
        start(k)
        if (nap > 0) await new Promise(resolve => setTimeout(resolve, nap))
        env.maybeExit(0.004)
        maybeThrow(k)
        finish(k, call)
      }, env.options())
    } catch (err) {
      if (err !== POISON) {
        Atomics.add(d, ABORTS, 1)
        env.expectAbort(err, `Once ${k}: runAsync`)
      }
      return
    }
    answered(k, r, 'runAsync', call)
    advance()
  }
  // The main thread at the end: make sure every fn has run.
  async function finishAll () {
    for (let k = 0; k < N; k++) {
      const call = { ran: false }
      const r = await onceAt(k).runAsync(async () => {
        start(k)
        finish(k, call)
      })
      answered(k, r, 'the final runAsync', call)
    }
  }
  return { syncOp, asyncOp, finishAll, FRONT, STARTS, THROWS, TIMEOUTS, ABORTS, FALSES, COMPLETES0, RERUNS0 }
}

function onceOf (sabsync, buffer) {
  const all = []
  return k => all[k] || (all[k] = sabsync.Once.from({ buffer, byteOffset: k * 8 }))
}

function onceScenario () {
  return scenario({
    seed: 13,
    functions: [onceLogic, onceOf],
    setup () {
      const buffer = new SharedArrayBuffer(8 * NONCE)
      for (let k = 0; k < NONCE; k++) new Once({ buffer, byteOffset: k * 8 }) // eslint-disable-line no-new
      const d = new Int32Array(new SharedArrayBuffer(4 * (16 + 4 * NONCE)))
      return { buffer, d, shared: { buffer, d: d.buffer, N: NONCE } }
    },
    worker: `
const L2 = onceLogic(env, onceOf(sabsync, data.buffer), new Int32Array(data.d), data.N)
${asyncOrSync()}`,
    main: (env, { buffer, d }) => mainTasks(env, 3, onceLogic(env, onceOf(sabsync, buffer), d, NONCE).asyncOp),
    async check (env, { buffer, d }) {
      const at = onceOf(sabsync, buffer)
      const L2 = onceLogic(env, at, d, NONCE)
      const front = Atomics.load(d, L2.FRONT)
      await L2.finishAll()
      let bad = 0
      let reruns = 0
      let waiting = 0
      for (let k = 0; k < NONCE; k++) {
        const c = d[L2.COMPLETES0 + k]
        const rr = d[L2.RERUNS0 + k]
        reruns += rr
        if (!at(k).done || c !== 1 + rr) bad++
        waiting += waitersOn(at(k), 2)
      }
      return {
        ok: bad === 0 && waiting === 0 && front > 500,
        detail: `${front} of ${NONCE} Onces done during the run, each fn completed exactly once (${bad} not), ` +
          `${reruns} reruns after a completer died before Once recorded it; ${d[L2.STARTS]} fn starts, ${d[L2.THROWS]} throws, ` +
          `${d[L2.FALSES]} already-done answers, ${d[L2.TIMEOUTS]} timeouts, ${d[L2.ABORTS]} aborts; waiters ${waiting}`
      }
    }
  })
}

// ---- Latch ----
//
// NLATCH latches with random counts 0-6; threads count down and wait on a
// window of them that the main thread moves on (counting down whatever the
// old ones still had). A latch has no owner: terminations hit only threads
// that are not between a countDown and its record (the handshake).

const NLATCH = 20000
const LWIN = 24

function latchLogic (env, latchAt, d, N, W) {
  const LO = 0; const TIMEOUTS = 1; const ABORTS = 2; const RANGES = 3; const OKS = 4
  const INIT0 = 16; const DOWNS0 = INIT0 + N
  function pick () { return Math.min(N - 1, Atomics.load(d, LO) + Math.floor(env.rnd() * W)) }
  function released (k, r, what) {
    if (r === true) {
      Atomics.add(d, OKS, 1)
      if (latchAt(k).count !== 0) env.fail(`latch ${k}: ${what} answered true with count ${latchAt(k).count}`)
    } else if (r === false) Atomics.add(d, TIMEOUTS, 1)
    else env.fail(`latch ${k}: ${what} answered ${r}`)
  }
  function down (k, n, andWait) {
    env.busy()
    try {
      const r = andWait ? latchAt(k).arriveAndWait(n, env.rnd() * 2) : (latchAt(k).countDown(n), undefined)
      Atomics.add(d, DOWNS0 + k, n)
      if (andWait) released(k, r, 'arriveAndWait')
    } catch (err) {
      if (!(err instanceof RangeError)) env.fail(`latch ${k}: countDown threw ${err && err.stack}`)
      Atomics.add(d, RANGES, 1)
    }
    env.idle()
  }
  function syncOp () {
    const k = pick()
    const r = env.rnd()
    const n = env.rnd() < 0.1 ? 0 : env.rnd() < 0.8 ? 1 : 2
    if (r < 0.35) down(k, n, false)
    else if (r < 0.45) down(k, n, true)
    else if (r < 0.5) {
      if (latchAt(k).tryWait() && latchAt(k).count !== 0) env.fail(`latch ${k}: tryWait true with count > 0`)
    } else {
      released(k, latchAt(k).wait(env.timeout()), 'wait')
    }
    env.maybeExit(0.001)
  }
  async function asyncOp () {
    const k = pick()
    if (env.rnd() < 0.3) return down(k, env.rnd() < 0.8 ? 1 : 2, false)
    let r
    try {
      r = await latchAt(k).waitAsync(env.options())
    } catch (err) {
      Atomics.add(d, ABORTS, 1)
      return env.expectAbort(err, `latch ${k}: waitAsync`)
    }
    released(k, r, 'waitAsync')
  }
  // Count latch k down to 0 (the main thread), recording it.
  function finish (k) {
    for (let c; (c = latchAt(k).count) > 0;) {
      try {
        latchAt(k).countDown(c)
        Atomics.add(d, DOWNS0 + k, c)
      } catch (err) {
        if (!(err instanceof RangeError)) throw err
      }
    }
  }
  return { syncOp, asyncOp, finish, LO, TIMEOUTS, ABORTS, RANGES, OKS, INIT0, DOWNS0 }
}

function latchOf (sabsync, buffer) {
  const all = []
  return k => all[k] || (all[k] = sabsync.Latch.from({ buffer, byteOffset: k * 8 }))
}

function latchScenario () {
  return scenario({
    seed: 14,
    guarded: true,
    functions: [latchLogic, latchOf],
    setup (env) {
      const buffer = new SharedArrayBuffer(8 * NLATCH)
      const d = new Int32Array(new SharedArrayBuffer(4 * (16 + 2 * NLATCH)))
      for (let k = 0; k < NLATCH; k++) {
        const c = Math.floor(env.rnd() * 7)
        new Latch(c, { buffer, byteOffset: k * 8 }) // eslint-disable-line no-new
        d[16 + k] = c
      }
      return { buffer, d, shared: { buffer, d: d.buffer, N: NLATCH, W: LWIN } }
    },
    worker: `
const L2 = latchLogic(env, latchOf(sabsync, data.buffer), new Int32Array(data.d), data.N, data.W)
${asyncOrSync()}`,
    main (env, { buffer, d }) {
      const L2 = latchLogic(env, latchOf(sabsync, buffer), d, NLATCH, LWIN)
      const mover = (async () => {
        // Move the window on: the latches left behind are counted down.
        while (!env.stopping()) {
          await sleep(30)
          const lo = Atomics.load(d, L2.LO)
          if (lo + 8 + LWIN > NLATCH) continue
          for (let k = lo; k < lo + 8; k++) L2.finish(k)
          Atomics.store(d, L2.LO, lo + 8)
        }
      })()
      return Promise.all([mover, mainTasks(env, 3, L2.asyncOp)])
    },
    release ({ buffer, d }) {
      // Let every waiter of the window go (recorded as the main thread's).
      const L2 = latchLogic(null, latchOf(sabsync, buffer), d, NLATCH, LWIN)
      const lo = Atomics.load(d, L2.LO)
      for (let k = lo; k < Math.min(NLATCH, lo + LWIN); k++) L2.finish(k)
    },
    async check (env, { buffer, d }) {
      const at = latchOf(sabsync, buffer)
      const L2 = latchLogic(env, at, d, NLATCH, LWIN)
      const hi = Math.min(NLATCH, Atomics.load(d, L2.LO) + LWIN)
      let bad = 0
      let downs = 0
      let waiting = 0
      for (let k = 0; k < NLATCH; k++) {
        const init = d[L2.INIT0 + k]
        const dn = d[L2.DOWNS0 + k]
        downs += dn
        if (k < hi ? dn !== init || at(k).count !== 0 : dn !== 0 || at(k).count !== init) bad++
        waiting += waitersOn(at(k), 2)
      }
      return {
        ok: bad === 0 && waiting === 0 && hi > 200,
        detail: `${hi} latches used, each counted down exactly its count (${bad} not; ${downs} decrements recorded); ` +
          `${d[L2.OKS]} waits released, ${d[L2.TIMEOUTS]} timeouts, ${d[L2.ABORTS]} aborts, ${d[L2.RANGES]} RangeErrors for n > count; waiters ${waiting}`
      }
    }
  })
}

// ---- CondVar: a bounded queue (a Mutex and two CondVars) ----
//
// Items are numbered 1, 2, ...; seen[item] marks it consumed. The queue is
// plain memory under the mutex, with a journal that an ownerDied holder
// rolls back. At the end the main thread drains the queue: every item
// produced was consumed exactly once.

const QCAP = 8
const MAX_ITEMS = 1 << 21

function condLogic (env, m, notFull, notEmpty, d, seen) {
  const HEAD = 0; const TAIL = 1; const NEXT = 2; const HOLDER = 3; const JTAG = 4; const JOP = 5
  const JHEAD = 6; const JTAIL = 7; const JNEXT = 8; const JITEM = 9; const TAKEOVERS = 10; const REPAIRS = 11
  const TIMEOUTS = 12; const ABORTS = 13; const WAITS = 14; const ITEMS0 = 16
  const Q = 8
  const PUSH = 1; const POP = 2
  const tag = env.tag
  function enter () {
    const died = m.ownerDied
    const prev = Atomics.exchange(d, HOLDER, tag)
    if (prev !== 0) {
      if (!died) env.fail(`queue: thread ${prev} still inside when ${tag} got the mutex, and ownerDied is false`)
      else env.sawDead(prev, 'queue mutex holder')
    }
    const j = Atomics.load(d, JTAG)
    if (died) {
      d[TAKEOVERS]++
      if (j !== 0) {
        env.sawDead(j, 'half-done queue update')
        d[HEAD] = d[JHEAD]
        d[TAIL] = d[JTAIL]
        d[NEXT] = d[JNEXT]
        if (d[JOP] === POP) seen[d[JITEM]] = 0
        Atomics.store(d, JTAG, 0)
        d[REPAIRS]++
      }
    } else if (j !== 0) {
      env.fail(`queue: a half-done update by ${j} and ownerDied is false`)
    }
  }
  function out () {
    if (Atomics.compareExchange(d, HOLDER, tag, 0) !== tag) env.fail('queue: HOLDER changed while held')
  }
  function journal (op, item) {
    d[JHEAD] = d[HEAD]
    d[JTAIL] = d[TAIL]
    d[JNEXT] = d[NEXT]
    d[JOP] = op
    d[JITEM] = item
    Atomics.store(d, JTAG, tag)
  }
  function push () {
    journal(PUSH, 0)
    const item = d[NEXT] + 1
    d[NEXT] = item
    env.maybeExit(0.0005)
    d[ITEMS0 + (d[TAIL] % Q)] = item
    d[TAIL] = d[TAIL] + 1
    Atomics.store(d, JTAG, 0)
  }
  function pop () {
    const item = d[ITEMS0 + (d[HEAD] % Q)]
    journal(POP, item)
    if (item < 1 || item > d[NEXT]) env.fail(`queue: popped item ${item} of ${d[NEXT]}`)
    else if (seen[item] !== 0) env.fail(`queue: item ${item} consumed twice`)
    seen[item] = 1
    env.maybeExit(0.0005)
    d[HEAD] = d[HEAD] + 1
    Atomics.store(d, JTAG, 0)
  }
  const full = () => d[TAIL] - d[HEAD] >= Q || d[NEXT] >= seen.length - 1
  const empty = () => d[TAIL] === d[HEAD]
  function syncOp () {
    const producer = env.rnd() < 0.5
    if (!m.lock(env.timeout())) { Atomics.add(d, TIMEOUTS, 1); return }
    enter()
    const cv = producer ? notFull : notEmpty
    while (producer ? full() : empty()) {
      if (env.stopping()) {
        out()
        return m.unlock()
      }
      out()
      Atomics.add(d, WAITS, 1)
      const notified = cv.wait(m, env.timeout())
      enter()
      if (!notified && (producer ? full() : empty())) {
        Atomics.add(d, TIMEOUTS, 1)
        out()
        return m.unlock()
      }
    }
    producer ? push() : pop()
    const other = producer ? notEmpty : notFull
    env.rnd() < 0.1 ? other.notifyAll() : other.notifyOne()
    out()
    m.unlock()
  }
  async function asyncOp () {
    const producer = env.rnd() < 0.5
    try {
      if (!(await m.lockAsync(env.options()))) { Atomics.add(d, TIMEOUTS, 1); return }
    } catch (err) {
      Atomics.add(d, ABORTS, 1)
      return env.expectAbort(err, 'queue lockAsync')
    }
    enter()
    const cv = producer ? notFull : notEmpty
    while (producer ? full() : empty()) {
      if (env.stopping()) {
        out()
        return m.unlock()
      }
      out()
      Atomics.add(d, WAITS, 1)
      let notified
      try {
        notified = await cv.waitAsync(m, env.options())
      } catch (err) {
        // The mutex is held again when the abort rejects.
        enter()
        Atomics.add(d, ABORTS, 1)
        env.expectAbort(err, 'CondVar waitAsync')
        out()
        return m.unlock()
      }
      enter()
      if (!notified && (producer ? full() : empty())) {
        Atomics.add(d, TIMEOUTS, 1)
        out()
        return m.unlock()
      }
    }
    if (env.rnd() < 0.2) await env.tick() // hold it across a turn of the loop
    producer ? push() : pop()
    const other = producer ? notEmpty : notFull
    env.rnd() < 0.1 ? other.notifyAll() : other.notifyOne()
    out()
    m.unlock()
  }
  return { syncOp, asyncOp, enter, out, pop, empty, NEXT, HEAD, TAIL, TAKEOVERS, REPAIRS, TIMEOUTS, ABORTS, WAITS }
}

function condScenario () {
  let compensated = 0
  return scenario({
    seed: 15,
    functions: [condLogic],
    setup () {
      const m = new Mutex()
      const notFull = new CondVar()
      const notEmpty = new CondVar()
      const d = new Int32Array(new SharedArrayBuffer(4 * (16 + QCAP)))
      const seen = new Uint8Array(new SharedArrayBuffer(MAX_ITEMS))
      return { m, notFull, notEmpty, d, seen, shared: { m, notFull, notEmpty, d: d.buffer, seen: seen.buffer } }
    },
    worker: `
const L2 = condLogic(env, sabsync.Mutex.from(data.m), sabsync.CondVar.from(data.notFull), sabsync.CondVar.from(data.notEmpty),
  new Int32Array(data.d), new Uint8Array(data.seen))
${asyncOrSync()}`,
    main: (env, { m, notFull, notEmpty, d, seen }) => mainTasks(env, 3, condLogic(env, m, notFull, notEmpty, d, seen).asyncOp),
    onDeath (tag, how, lane, { notFull, notEmpty }) {
      // A dead thread may have been the one a notifyOne woke: notify in
      // its place (waiters loop on their predicate, as with any CondVar).
      notFull.notifyAll()
      notEmpty.notifyAll()
      compensated++
    },
    release ({ notFull, notEmpty }) {
      notFull.notifyAll()
      notEmpty.notifyAll()
    },
    async check (env, { m, notFull, notEmpty, d, seen }) {
      const L2 = condLogic(env, m, notFull, notEmpty, d, seen)
      if (!(await m.lockAsync({ timeout: 5000 }))) return { ok: false, detail: 'the final lockAsync timed out' }
      L2.enter()
      const left = d[L2.TAIL] - d[L2.HEAD]
      while (!L2.empty()) L2.pop()
      L2.out()
      m.unlock()
      const next = d[L2.NEXT]
      let bad = 0
      for (let i = 1; i <= next; i++) if (seen[i] !== 1) bad++
      for (let i = next + 1; i < Math.min(seen.length, next + 1000); i++) if (seen[i] !== 0) bad++
      const waiting = waitersOn(m, 4) + waitersOn(notFull, 2) + waitersOn(notEmpty, 2)
      return {
        ok: bad === 0 && next > 1000 && waiting === 0,
        detail: `${next} items produced, each consumed exactly once (${bad} not; ${left} drained at the end); ` +
          `${d[L2.TAKEOVERS]} ownerDied takeovers, ${d[L2.REPAIRS]} half-done updates rolled back; ${d[L2.WAITS]} CondVar waits, ` +
          `${d[L2.TIMEOUTS]} timeouts, ${d[L2.ABORTS]} aborts; ${compensated} notifyAll for dead threads; waiters ${waiting}`
      }
    }
  })
}

// ---- RWLock ----
//
// Writers keep d[A] === d[B] (A++, then B++, behind a journal that an
// ownerDied writer rolls back); readers check it (torn data is allowed only
// while ownerDied says a writer died in the middle). Readers are counted in
// a holder set: never more reader threads than readerSlots, never a live
// reader while a writer is in, never a live writer while a reader is in.

const RSLOTS = 3

function rwLogic (env, rw, d, hs, slots) {
  const A = 0; const B = 1; const WRITER = 2; const JTAG = 3; const JA = 4; const JDONE = 5; const TAKEOVERS = 6
  const REPAIRS = 7; const TIMEOUTS = 8; const ABORTS = 9; const READS = 10; const TORN = 11; const MAXR = 13; const DONE0 = 16
  const tag = env.tag
  let reads = 0 // this thread's read holds (async tasks share them)
  function readIn () {
    if (reads++ > 0) return
    const live = hs.live(hs.enter())
    const threads = live.workers + (live.main > 0 ? 1 : 0)
    if (threads > slots) env.fail(`rwlock: ${threads} reader threads with ${slots} reader slots`)
    if (threads > Atomics.load(d, MAXR)) Atomics.store(d, MAXR, threads)
    const w = Atomics.load(d, WRITER)
    if (w !== 0 && env.alive(w)) env.fail(`rwlock: reading while thread ${w} writes`)
    if (d[A] !== d[B]) {
      if (rw.ownerDied) Atomics.add(d, TORN, 1)
      else env.fail('rwlock: a reader saw torn data and ownerDied is false')
    }
    Atomics.add(d, READS, 1)
  }
  function readOut () {
    if (--reads === 0) hs.leave()
  }
  function writeIn () {
    const died = rw.ownerDied
    const prev = Atomics.exchange(d, WRITER, tag)
    if (prev !== 0) {
      if (!died) env.fail(`rwlock: writer ${prev} still inside when ${tag} got the write lock, and ownerDied is false`)
      else env.sawDead(prev, 'rwlock writer')
    }
    const snap = hs.snapshot()
    const live = hs.live(snap)
    if (live.workers + live.main > 0) env.fail(`rwlock: writing with ${live.workers + live.main} live readers in (holders 0x${snap.toString(16)}, lane ${env.lane}, reads ${reads})`)
    const j = Atomics.load(d, JTAG)
    if (j !== 0) {
      if (!died) env.fail(`rwlock: a half-done write by ${j} and ownerDied is false`)
      env.sawDead(j, 'half-done write')
      d[A] = d[B] = d[JA]
      d[DONE0 + j] = d[JDONE]
      Atomics.store(d, JTAG, 0)
      d[REPAIRS]++
    }
    if (died) d[TAKEOVERS]++
    if (d[A] !== d[B]) env.fail('rwlock: torn data that no journal explains')
  }
  function write () {
    d[JA] = d[A]
    d[JDONE] = d[DONE0 + tag]
    Atomics.store(d, JTAG, tag)
    const a = d[A]
    d[A] = a + 1
    env.spin(env.rnd() * 200)
    env.maybeExit(0.0005)
    d[B] = a + 1
    d[DONE0 + tag]++
    Atomics.store(d, JTAG, 0)
  }
  function writeOut () {
    if (Atomics.compareExchange(d, WRITER, tag, 0) !== tag) env.fail('rwlock: WRITER changed while held')
    rw.writeUnlock()
  }
  function syncOp () {
    if (env.rnd() < 0.35) {
      if (!(env.rnd() < 0.15 ? rw.tryWriteLock() : rw.writeLock(env.timeout()))) { Atomics.add(d, TIMEOUTS, 1); return }
      writeIn()
      write()
      writeOut()
    } else {
      if (!(env.rnd() < 0.15 ? rw.tryReadLock() : rw.readLock(env.timeout()))) { Atomics.add(d, TIMEOUTS, 1); return }
      readIn()
      if (env.rnd() < 0.2) {
        if (!rw.readLock(0)) env.fail('rwlock: a recursive readLock was refused')
        else rw.readUnlock()
      }
      env.spin(env.rnd() * 200)
      env.maybeExit(0.0005)
      readOut()
      rw.readUnlock()
    }
  }
  async function asyncOp () {
    const o = env.options()
    const writer = env.rnd() < 0.35
    try {
      if (!(await (writer ? rw.writeLockAsync(o) : rw.readLockAsync(o)))) { Atomics.add(d, TIMEOUTS, 1); return }
    } catch (err) {
      Atomics.add(d, ABORTS, 1)
      return env.expectAbort(err, writer ? 'writeLockAsync' : 'readLockAsync')
    }
    if (writer) {
      writeIn()
      if (env.rnd() < 0.3) await env.tick()
      write()
      writeOut()
    } else {
      readIn()
      if (env.rnd() < 0.3) await env.tick()
      env.maybeExit(0.0005)
      readOut()
      rw.readUnlock()
    }
  }
  return { syncOp, asyncOp, writeIn, writeOut, A, B, DONE0, TAKEOVERS, REPAIRS, TIMEOUTS, ABORTS, READS, TORN, MAXR }
}

function rwScenario () {
  return scenario({
    seed: 16,
    functions: [rwLogic],
    setup (env) {
      const rw = new RWLock({ readerSlots: RSLOTS })
      const d = new Int32Array(new SharedArrayBuffer(4 * (16 + MAX_TAGS)))
      return { rw, d, shared: { rw, d: d.buffer, slots: RSLOTS } }
    },
    worker: `
const d = new Int32Array(data.d)
const L2 = rwLogic(env, sabsync.RWLock.from(data.rw), d, holderSet(env, new Int32Array(workerData.ctl), d, 12, L), data.slots)
${asyncOrSync()}`,
    main: (env, { rw, d }, ctl) => mainTasks(env, 3, rwLogic(env, rw, d, holderSet(env, ctl, d, 12, L), RSLOTS).asyncOp),
    onDeath (tag, how, lane, { d }, env) { holderSet(env, null, d, 12, L).clearLane(lane) },
    async check (env, { rw, d }, stats, ctl) {
      const L2 = rwLogic(env, rw, d, holderSet(env, ctl, d, 12, L), RSLOTS)
      if (!(await rw.writeLockAsync({ timeout: 5000 }))) return { ok: false, detail: 'the final writeLockAsync timed out' }
      L2.writeIn()
      L2.writeOut()
      const total = sum(d, L2.DONE0, MAX_TAGS)
      const waiting = waitersOn(rw, 12)
      return {
        ok: d[L2.A] === total && d[L2.B] === total && total > 500 && waiting === 0,
        detail: `A = B = ${d[L2.A]} === sum of per-thread writes ${total}; ${d[L2.READS]} reads (at most ${d[L2.MAXR]} reader threads of ${RSLOTS} slots), ` +
          `${d[L2.TORN]} torn reads, all under ownerDied; ${d[L2.TAKEOVERS]} ownerDied writers, ${d[L2.REPAIRS]} half-done writes rolled back; ` +
          `${Atomics.load(d, L2.TIMEOUTS)} timeouts, ${Atomics.load(d, L2.ABORTS)} aborts; waiters ${waiting}`
      }
    }
  })
}

// ---- Barrier ----
//
// 6 workers + the main thread are the 7 parties. The run is cut into
// epochs: the main thread ends each one (its wait times out, now and then
// an abort, a death or a worker's timeout ends it sooner), waits until
// every party has left, reset()s the barrier and starts the next. Each
// party records, per (epoch, round), what its wait answered: leader,
// non-leader, broken or timed out. A round either completed (one leader,
// the others non-leaders; a party that died before recording is missing,
// and it must have died in that epoch) or broke (no leader, no success).

function barrierLogic (env, b, d, P, sabsync) {
  const EMAX = 1024; const RMAX = 2048 // epochs, rounds per epoch
  const EPOCH = 0; const CLOSING = 1; const OVERFLOW = 2; const JOIN0 = 8; const OUT0 = 24; const RES0 = 64
  const SUCCESS = 1; const LEADER = 1 << 8; const BROKEN = 1 << 16; const TIMEDOUT = 1 << 24
  function record (e, r, kind) {
    if (r >= RMAX || e >= EMAX) { Atomics.add(d, OVERFLOW, 1); return }
    Atomics.add(d, RES0 + e * RMAX + r, kind)
  }
  function kindOf (res, err) {
    if (err === undefined) return res === undefined ? TIMEDOUT : res.isLeader === true ? LEADER : res.isLeader === false ? SUCCESS : -1
    if (err && err.code === 'ERR_SABSYNC_BARRIER_BROKEN') return BROKEN
    if (err === env.ABORT) return TIMEDOUT
    env.fail(`barrier: wait threw ${err && err.stack}`)
    return BROKEN
  }
  function timeout () {
    const x = env.rnd()
    return x < 0.005 ? env.rnd() * 3 : x < 0.02 ? 20 + env.rnd() * 100 : undefined
  }
  // A worker: joins each epoch from minEpoch on, waits round after round.
  function workerLoop (minEpoch) {
    let e = 0
    while (!env.stopping()) {
      let cur
      while ((cur = Atomics.load(d, EPOCH)) <= e || cur < minEpoch) {
        if (env.stopping()) return
        sabsync.wait(d, EPOCH, cur, 20)
      }
      e = cur
      Atomics.store(d, JOIN0 + env.lane, e * 4096 + env.tag)
      if (Atomics.load(d, CLOSING) < e) {
        for (let r = 0; !env.stopping(); r++) {
          env.maybeExit(0.0003)
          let res, err
          try {
            res = b.wait(timeout())
          } catch (e) {
            err = e
          }
          const kind = kindOf(res, err)
          record(e, r, kind)
          if (kind !== SUCCESS && kind !== LEADER) break
        }
      }
      Atomics.store(d, OUT0 + env.lane, e)
    }
  }
  // The main thread: a party and the epochs' keeper.
  async function mainLoop (stats) {
    const lane = P - 1
    for (let e = 1; e < EMAX && !env.stopping(); e++) {
      Atomics.store(d, JOIN0 + lane, e * 4096 + env.tag)
      Atomics.store(d, EPOCH, e)
      sabsync.notify(d, EPOCH)
      const end = performance.now() + 100 + env.rnd() * 500
      for (let r = 0; ; r++) {
        const o = { timeout: env.stopping() || r >= RMAX - 2 ? 0 : Math.max(0, end - performance.now()) }
        if (env.rnd() < 0.002) {
          const ac = new AbortController()
          o.signal = ac.signal
          setTimeout(() => ac.abort(env.ABORT), env.rnd() * 3)
        }
        let res, err
        try {
          res = await b.waitAsync(o)
        } catch (e) {
          err = e
        }
        const kind = kindOf(res, err)
        record(e, r, kind)
        if (kind !== SUCCESS && kind !== LEADER) break
        if ((r & 31) === 31) await env.tick()
      }
      // Close the epoch: every party that joined it leaves (or is dead).
      Atomics.store(d, CLOSING, e)
      Atomics.store(d, OUT0 + lane, e)
      const t0 = performance.now()
      for (;;) {
        let open = 0
        for (let l = 0; l < lane; l++) {
          const j = Atomics.load(d, JOIN0 + l)
          if (Math.floor(j / 4096) === e && Atomics.load(d, OUT0 + l) !== e && env.alive(j % 4096)) open++
        }
        if (open === 0) break
        if (performance.now() - t0 > 10000) {
          env.fail(`barrier: ${open} parties still in epoch ${e} 10 s after it ended`)
          break
        }
        await new Promise(resolve => setTimeout(resolve, 1))
      }
      b.reset()
      stats.epochs = e
    }
  }
  function check (epochs, deadIn) {
    let completed = 0
    let broken = 0
    let missing = 0
    const bad = []
    for (let e = 1; e <= epochs; e++) {
      for (let r = 0; r < RMAX; r++) {
        const c = Atomics.load(d, RES0 + e * RMAX + r)
        if (c === 0) continue
        const s = c & 0xFF; const l = (c >>> 8) & 0xFF; const br = (c >>> 16) & 0xFF; const t = (c >>> 24) & 0xFF
        const n = s + l + br + t
        if (n > P || l > 1) bad.push(`epoch ${e} round ${r}: ${l} leaders, ${n} answers`)
        else if (s + l > 0) {
          completed++
          const m = P - n
          missing += m
          if (br + t > 0) bad.push(`epoch ${e} round ${r}: completed for ${s + l} parties, broken for ${br + t}`)
          else if (l === 0 && m === 0) bad.push(`epoch ${e} round ${r}: completed without a leader`)
          else if (m > (deadIn[e] || 0)) bad.push(`epoch ${e} round ${r}: ${m} parties missing, ${deadIn[e] || 0} died`)
        } else broken++
      }
    }
    return { completed, broken, missing, bad, overflow: Atomics.load(d, OVERFLOW) }
  }
  return { workerLoop, mainLoop, check, JOIN0, EPOCH, EMAX, RMAX }
}

function barrierScenario () {
  const lanes = 6
  const P = lanes + 1
  const deadIn = []
  const stats = { epochs: 0 }
  return scenario({
    seed: 17,
    lanes,
    killMs: 150,
    functions: [barrierLogic],
    setup () {
      const b = new Barrier(P)
      const { EMAX, RMAX } = barrierLogic(null, null, null, P, sabsync)
      const d = new Int32Array(new SharedArrayBuffer(4 * (64 + EMAX * RMAX)))
      return { b, d, shared: { b, d: d.buffer, P } }
    },
    spawning (workerData, { d }) { workerData.minEpoch = Atomics.load(d, 0) + 1 },
    worker: `
barrierLogic(env, sabsync.Barrier.from(data.b), new Int32Array(data.d), data.P, sabsync).workerLoop(workerData.minEpoch)`,
    main: (env, { b, d }) => barrierLogic(env, b, d, P, sabsync).mainLoop(stats),
    onDeath (tag, how, lane, { d }) {
      const j = Atomics.load(d, 8 + lane)
      if (j % 4096 === tag) {
        const e = Math.floor(j / 4096)
        deadIn[e] = (deadIn[e] || 0) + 1
      }
    },
    async check (env, { b, d }) {
      const r = barrierLogic(env, b, d, P, sabsync).check(stats.epochs, deadIn)
      const waiting = waitersOn(b, 2)
      return {
        ok: r.bad.length === 0 && r.overflow === 0 && r.completed > 100 && waiting === 0,
        detail: `${stats.epochs} epochs (reset()s), ${r.completed} rounds completed with exactly one leader, ${r.broken} rounds broken with none, ` +
          `${r.missing} answers missing from parties that died; waiters ${waiting}` + (r.bad.length ? `; BAD: ${r.bad.slice(0, 5).join('; ')}` : '')
      }
    }
  })
}

// ---- Sema ----
//
// 3 tokens. Each token guards its own counter (plain, journaled; a holder
// that gets a token with recovered() rolls a half-done update back). USE0 +
// t says who holds token t: a newcomer finding it set must have got the
// token with recovered(), from a dead thread. A holder set counts the
// holders (never more than 3). At the end every token comes back (drain).

const NTOKENS = 3

function semaLogic (env, s, d, hs, nr) {
  const TIMEOUTS = 0; const ABORTS = 1; const RECOVERED = 2; const REPAIRS = 3; const MAXH = 4
  const USE0 = 16; const ACC0 = 32; const J0 = 48; const DONE0 = 64
  const tag = env.tag
  function got (t) {
    if (!(Number.isInteger(t) && t >= 0 && t < nr)) return env.fail(`sema: got token ${t}`)
    const rec = s.recovered(t)
    const prev = Atomics.exchange(d, USE0 + t, tag)
    if (prev !== 0) {
      if (!rec) env.fail(`sema: token ${t} still held by ${prev} when ${tag} got it, and recovered() is false`)
      else env.sawDead(prev, `sema token ${t} holder`)
    }
    const j = Atomics.load(d, J0 + 3 * t)
    if (rec) {
      Atomics.add(d, RECOVERED, 1)
      if (j !== 0) {
        env.sawDead(j, 'half-done update')
        d[ACC0 + t] = d[J0 + 3 * t + 1]
        d[DONE0 + j] = d[J0 + 3 * t + 2]
        Atomics.store(d, J0 + 3 * t, 0)
        Atomics.add(d, REPAIRS, 1)
      }
    } else if (j !== 0) {
      env.fail(`sema: a half-done update by ${j} on token ${t} and recovered() is false`)
    }
    const live = hs.live(hs.enter())
    const n = live.workers + live.main
    if (n > nr) env.fail(`sema: ${n} holders of ${nr} tokens`)
    if (n > Atomics.load(d, MAXH)) Atomics.store(d, MAXH, n)
  }
  function work (t) {
    d[J0 + 3 * t + 1] = d[ACC0 + t]
    d[J0 + 3 * t + 2] = d[DONE0 + tag]
    Atomics.store(d, J0 + 3 * t, tag)
    const v = d[ACC0 + t]
    env.spin(env.rnd() * 200)
    env.maybeExit(0.0005)
    d[ACC0 + t] = v + 1
    d[DONE0 + tag]++
    Atomics.store(d, J0 + 3 * t, 0)
  }
  function put (t, bare) {
    hs.leave()
    if (Atomics.compareExchange(d, USE0 + t, tag, 0) !== tag) env.fail(`sema: USE of token ${t} changed while held`)
    bare ? s.release() : s.release(t)
  }
  function syncOp () {
    const t = env.rnd() < 0.15 ? s.tryAcquire() : s.acquireSync(env.timeout())
    if (t === undefined) { Atomics.add(d, TIMEOUTS, 1); return }
    got(t)
    work(t)
    env.maybeExit(0.0003)
    put(t, env.rnd() < 0.3)
  }
  async function asyncOp () {
    let t
    try {
      t = await s.acquire(env.options())
    } catch (err) {
      Atomics.add(d, ABORTS, 1)
      return env.expectAbort(err, 'acquire')
    }
    if (t === undefined) { Atomics.add(d, TIMEOUTS, 1); return }
    got(t)
    if (env.rnd() < 0.3) await env.tick()
    work(t)
    put(t, false) // release() without a token would be another task's
  }
  return { syncOp, asyncOp, got, put, ACC0, DONE0, TIMEOUTS, ABORTS, RECOVERED, REPAIRS, MAXH }
}

function semaScenario () {
  return scenario({
    seed: 18,
    functions: [semaLogic],
    setup () {
      const s = new Sema(NTOKENS)
      const d = new Int32Array(new SharedArrayBuffer(4 * (64 + MAX_TAGS)))
      return { s, d, shared: { s, d: d.buffer, nr: NTOKENS } }
    },
    worker: `
const d = new Int32Array(data.d)
const L2 = semaLogic(env, sabsync.Sema.from(data.s), d, holderSet(env, new Int32Array(workerData.ctl), d, 5, L), data.nr)
if (env.rnd() < 0.5) {
  while (!env.stopping()) L2.syncOp()
} else {
  // one acquire at a time: a worker counts as one holder in the holder set
  (async () => { while (!env.stopping()) { await L2.asyncOp(); if (env.rnd() < 0.1) await env.tick() } })()
}`,
    main: (env, { s, d }, ctl) => mainTasks(env, 3, semaLogic(env, s, d, holderSet(env, ctl, d, 5, L), NTOKENS).asyncOp),
    onDeath (tag, how, lane, { d }, env) { holderSet(env, null, d, 5, L).clearLane(lane) },
    async check (env, { s, d }, stats, ctl) {
      const L2 = semaLogic(env, s, d, holderSet(env, ctl, d, 5, L), NTOKENS)
      // Every token comes back, those of dead threads included.
      const all = await s.drain({ timeout: 5000 })
      const ok = all.length === NTOKENS && all.every(t => t !== undefined) && new Set(all).size === NTOKENS
      if (ok) {
        for (const t of all) L2.got(t) // rolls back what a dead holder left half-done
        for (const t of all) L2.put(t, false)
      }
      let acc = 0
      for (let t = 0; t < NTOKENS; t++) acc += d[L2.ACC0 + t]
      const total = sum(d, L2.DONE0, MAX_TAGS)
      const waiting = s.nrWaiting()
      return {
        ok: ok && acc === total && total > 1000 && waiting === 0 && s.tryAcquire() !== undefined,
        detail: `drain() got back all ${NTOKENS} tokens: ${ok} (${all.join(',')}); counters ${acc} === sum of per-thread updates ${total}; ` +
          `at most ${d[L2.MAXH]} holders; ${d[L2.RECOVERED]} tokens recovered from dead threads, ${d[L2.REPAIRS]} half-done updates rolled back; ` +
          `${Atomics.load(d, L2.TIMEOUTS)} timeouts, ${Atomics.load(d, L2.ABORTS)} aborts; nrWaiting ${waiting}`
      }
    }
  })
}

// ---- RateLimit ----
//
// Two limiters shared by all: A (20 per 50 ms) and B (10 per 40 ms, uniform:
// grants at least 4 ms apart). Every grant's time is recorded (one lost now
// and then: its thread exited right after the grant, which only makes the
// check looser); at the end no window of timeUnit holds more than rps of
// them, and the limiters were busy: deaths leak no capacity.

function rateLogic (env, limits, d, times) {
  const N0 = 0; const TIMEOUTS = 2; const ABORTS = 3
  function note (i, t) {
    if (typeof t !== 'number' || !(t > 0)) return env.fail(`ratelimit: a grant answered ${t}`)
    const n = Atomics.add(d, N0 + i, 1)
    if (n < times[i].length) times[i][n] = t
  }
  function syncOp () {
    const i = env.rnd() < 0.5 ? 0 : 1
    const x = env.rnd()
    const t = limits[i].sync(x < 0.3 ? undefined : x < 0.4 ? 0 : env.rnd() * 30)
    env.maybeExit(0.002)
    if (t === undefined) Atomics.add(d, TIMEOUTS, 1)
    else note(i, t)
  }
  async function asyncOp () {
    const i = env.rnd() < 0.5 ? 0 : 1
    const o = env.options()
    let t
    try {
      t = await limits[i](o.signal === undefined ? undefined : { signal: o.signal })
    } catch (err) {
      Atomics.add(d, ABORTS, 1)
      return env.expectAbort(err, 'limit()')
    }
    env.maybeExit(0.002)
    note(i, t)
  }
  return { syncOp, asyncOp, TIMEOUTS, ABORTS }
}

const RATES = [[20, 50, false], [10, 40, true]]
const TIMES = 1 << 16

function rateScenario () {
  const durationMs = 6000
  return scenario({
    seed: 19,
    durationMs,
    functions: [rateLogic],
    setup () {
      const limits = RATES.map(([rps, timeUnit, uniformDistribution]) => RateLimit(rps, { timeUnit, uniformDistribution }))
      const d = new Int32Array(new SharedArrayBuffer(64))
      const times = RATES.map(() => new Float64Array(new SharedArrayBuffer(8 * TIMES)))
      const t0 = Number(process.hrtime.bigint()) / 1e6
      const handles = limits.map(l => ({ buffer: l.buffer, byteOffset: l.byteOffset }))
      return { limits, d, times, t0, shared: { limits: handles, d: d.buffer, times: times.map(t => t.buffer) } }
    },
    worker: `
const L2 = rateLogic(env, data.limits.map(h => sabsync.RateLimit.from(h)), new Int32Array(data.d), data.times.map(b => new Float64Array(b)))
${asyncOrSync()}`,
    main: (env, { limits, d, times }) => mainTasks(env, 3, rateLogic(env, limits, d, times).asyncOp),
    async check (env, { limits, d, times, t0 }) {
      const L2 = rateLogic(env, limits, d, times)
      const ms = Number(process.hrtime.bigint()) / 1e6 - t0
      const parts = []
      let ok = true
      RATES.forEach(([rps, unit, uniform], i) => {
        const n = Math.min(Atomics.load(d, i), TIMES)
        const ts = Array.from(times[i].subarray(0, n)).sort((a, b) => a - b)
        let worst = Infinity
        for (let k = rps; k < n; k++) worst = Math.min(worst, ts[k] - ts[k - rps])
        let gap = Infinity
        if (uniform) for (let k = 1; k < n; k++) gap = Math.min(gap, ts[k] - ts[k - 1])
        const capacity = Math.floor(ms / unit) * rps
        const eps = 1e-6
        const fine = worst >= unit - eps && (!uniform || gap >= unit / rps - eps) && n >= capacity * 0.5 && n <= capacity + rps
        ok = ok && fine
        parts.push(`${uniform ? 'uniform ' : ''}${rps}/${unit} ms: ${n} grants of ${capacity} possible, the tightest ${rps + 1} span ${worst.toFixed(3)} ms` +
          (uniform ? `, closest two ${gap.toFixed(3)} ms apart` : ''))
      })
      return {
        ok,
        detail: `${parts.join('; ')}; ${Atomics.load(d, L2.TIMEOUTS)} timeouts, ${Atomics.load(d, L2.ABORTS)} aborts`
      }
    }
  })
}

// ---- soak: 1,000,000 lock/unlock cycles with lockAsync ----
//
// The main thread runs 4 tasks of lockAsync / counter++ / unlock; a worker
// contends (lock / counter++ / unlock in a loop) during every other 10 ms
// slice. First 300,000 cycles unmeasured (V8's heap sizing and malloc
// settle, as in the waitAsync soak of stress/core.js), then RSS and heap
// are measured (after a gc) around 1,000,000 more.

async function soakLockAsync ({ total = 1000000, warm = 300000, tasks = 4 } = {}) {
  const m = new Mutex()
  const d = new Int32Array(new SharedArrayBuffer(64)) // [0] counter, [1] contend, [2] worker's cycles, [3] stop
  const w = new Worker(`'use strict'
const sabsync = require(${root})
const { workerData } = require('worker_threads')
const m = sabsync.Mutex.from(workerData.m)
const d = new Int32Array(workerData.d)
while (Atomics.load(d, 3) === 0) {
  if (Atomics.load(d, 1) === 0) {
    sabsync.wait(d, 1, 0, 50)
    continue
  }
  m.lock()
  d[0]++
  d[2]++
  m.unlock()
}`, { eval: true, workerData: { m, d: d.buffer } })
  const exited = new Promise((resolve, reject) => { w.once('exit', resolve); w.once('error', reject) })
  const toggle = setInterval(() => {
    Atomics.store(d, 1, Atomics.load(d, 1) ^ 1)
    sabsync.notify(d, 1)
  }, 10)
  let mine = 0
  let contended = 0
  const run = async (n) => {
    const one = async (k) => {
      for (let i = 0; i < k; i++) {
        if (!(await m.lockAsync())) throw new Error('lockAsync answered false without a timeout')
        d[0]++
        m.unlock()
        mine++
        if (Atomics.load(d, 1) === 1) contended++
        if ((i & 255) === 255) await new Promise(resolve => setImmediate(resolve))
      }
    }
    const all = []
    for (let t = 0; t < tasks; t++) all.push(one(n / tasks))
    await Promise.all(all)
  }
  const measure = () => { global.gc && global.gc(); return process.memoryUsage() }
  await run(warm)
  const before = measure()
  const mine0 = mine
  const contended0 = contended
  const t0 = performance.now()
  await run(total)
  const secs = (performance.now() - t0) / 1000
  const after = measure()
  clearInterval(toggle)
  Atomics.store(d, 3, 1)
  Atomics.store(d, 1, 1)
  sabsync.notify(d, 1)
  await exited
  const growth = (after.rss - before.rss) / 2 ** 20
  const heap = (after.heapUsed - before.heapUsed) / 2 ** 20
  const exact = d[0] === mine + d[2]
  const waiting = waitersOn(m, 4)
  return {
    ok: exact && mine - mine0 === total && growth < 10 && heap < 10 && waiting === 0 && !m.isLocked && global.gc !== undefined,
    detail: `${mine - mine0} lockAsync/unlock cycles measured in ${secs.toFixed(1)} s after ${warm} unmeasured, ` +
      `${contended - contended0} of them while a worker contended (it made ${d[2]} cycles in all); counter ${d[0]} === ${mine} + ${d[2]}: ${exact}; ` +
      `RSS ${growth >= 0 ? '+' : ''}${growth.toFixed(1)} MB, heap ${heap >= 0 ? '+' : ''}${heap.toFixed(1)} MB; waiters left ${waiting}` +
      (global.gc ? '' : '; run with --expose-gc')
  }
}

module.exports = {
  soakLockAsync,
  scenario,
  mutexScenario,
  flagScenario,
  onceScenario,
  latchScenario,
  condScenario,
  rwScenario,
  barrierScenario,
  semaScenario,
  rateScenario
}
