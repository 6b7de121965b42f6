'use strict'
// The Barrier scenario of `npm run stress` (the harness and how the runs
// check exactly in spite of deaths: stress/harness.js).

const sabsync = require('..')
const { Barrier } = sabsync
const { scenario, waitersOn, calmWorkers } = require('./harness')

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

// After the chaos: reset(), then 6 fresh workers (wait) and the main
// thread (waitAsync) go through CALM_ROUNDS rounds with no timeout and
// nobody killed: every round completes with exactly one leader. How many
// rounds the chaos itself completed depends on the machine (at a load of
// 8 on 2 CPUs a new worker takes longer to start than the killer's
// interval, every round waits for a lane still empty and breaks), so the
// barrier's having survived all of it is checked here instead.
const CALM_ROUNDS = 50

async function calmRounds (b) {
  b.reset()
  const P = b.parties
  const leaders = new Int32Array(new SharedArrayBuffer(4 * CALM_ROUNDS))
  const workers = calmWorkers(P - 1, `
const b = sabsync.Barrier.from(workerData.b)
const leaders = new Int32Array(workerData.leaders)
for (let r = 0; r < workerData.rounds; r++) if (b.wait().isLeader) Atomics.add(leaders, r, 1)`,
  { b, leaders: leaders.buffer, rounds: CALM_ROUNDS })
  for (let r = 0; r < CALM_ROUNDS; r++) if ((await b.waitAsync()).isLeader) Atomics.add(leaders, r, 1)
  const errors = await workers
  const wrong = []
  for (let r = 0; r < CALM_ROUNDS; r++) if (leaders[r] !== 1) wrong.push(`round ${r}: ${leaders[r]} leaders`)
  return {
    ok: errors.length === 0 && wrong.length === 0,
    detail: `${CALM_ROUNDS} rounds of ${P} fresh parties, ${CALM_ROUNDS - wrong.length} with exactly one leader` +
      (wrong.length || errors.length ? `; BAD: ${[...wrong, ...errors].slice(0, 5).join('; ')}` : '')
  }
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
      const calm = await calmRounds(b)
      return {
        ok: r.bad.length === 0 && r.overflow === 0 && waiting === 0 && calm.ok,
        detail: `${stats.epochs} epochs (reset()s), ${r.completed} rounds completed with exactly one leader, ${r.broken} rounds broken with none, ` +
          `${r.missing} answers missing from parties that died; waiters ${waiting}; after the run: ${calm.detail}` +
          (r.bad.length ? `; BAD: ${r.bad.slice(0, 5).join('; ')}` : '')
      }
    }
  })
}

module.exports = { barrierScenario }
