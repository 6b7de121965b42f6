'use strict'
// The AtomicFlag scenario of `npm run stress` (the harness and how the runs
// check exactly in spite of deaths: stress/harness.js).

const sabsync = require('..')
const { AtomicFlag } = sabsync
const { MAX_TAGS, scenario, sum, waitersOn, asyncOrSync, mainTasks } = require('./harness')

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

module.exports = { flagScenario }
