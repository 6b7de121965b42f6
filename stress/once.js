'use strict'
// The Once scenario of `npm run stress` (the harness and how the runs
// check exactly in spite of deaths: stress/harness.js).

const sabsync = require('..')
const { Once } = sabsync
const { scenario, waitersOn, asyncOrSync, mainTasks } = require('./harness')

// ---- Once ----
//
// NONCE Onces side by side; every thread works near a common frontier so
// that they meet on the same ones. fn sleeps (others wait), throws (another
// caller runs it), or its thread exits or is terminated inside it (a
// waiting or later caller runs it). d: [IN0 + k] who is inside fn k;
// [COMPLETES0 + k] completed runs; [COMPLETER0 + k] who completed last;
// [RERUNS0 + k] completions whose thread died before Once recorded them,
// found by the run that started next (legitimate: checked dead at once);
// [COUNTED0 + k] how many completions those reruns have accounted for.

const NONCE = 16000

function onceLogic (env, onceAt, d, N) {
  const FRONT = 0; const STARTS = 1; const THROWS = 2; const TIMEOUTS = 3; const ABORTS = 4; const FALSES = 5
  const IN0 = 16; const COMPLETES0 = IN0 + N; const COMPLETER0 = COMPLETES0 + N; const RERUNS0 = COMPLETER0 + N
  const COUNTED0 = RERUNS0 + N
  const tag = env.tag
  const POISON = new Error('thrown by fn on purpose')
  function start (k) {
    const prev = Atomics.exchange(d, IN0 + k, tag)
    if (prev !== 0) env.sawDead(prev, `Once ${k}: fn still running`)
    const completes = Atomics.load(d, COMPLETES0 + k)
    if (completes > 0) {
      env.sawDead(Atomics.load(d, COMPLETER0 + k), `Once ${k}: fn runs again after it completed`)
      // One rerun per completion that its thread did not live to record:
      // a rerun that throws or dies leaves that completion to the next
      // run, which must not count it again (it did, and the check saw
      // 1 + reruns > completions: CI, once).
      if (Atomics.load(d, COUNTED0 + k) < completes) {
        Atomics.store(d, COUNTED0 + k, completes)
        Atomics.add(d, RERUNS0 + k, 1)
      }
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
      const d = new Int32Array(new SharedArrayBuffer(4 * (16 + 5 * NONCE)))
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

module.exports = { onceScenario }
