'use strict'
// The Latch scenario of `npm run stress` (the harness and how the runs
// check exactly in spite of deaths: stress/harness.js).

const sabsync = require('..')
const { Latch } = sabsync
const { sleep, scenario, waitersOn, asyncOrSync, mainTasks } = require('./harness')

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
          // Stopped while asleep: the window stays where release() counts
          // it down. Moved now, after release()'s last pass, it would take
          // 8 latches nobody counted down into the checked range (CI's
          // stress run: "each counted down exactly its count (8 not)").
          if (env.stopping()) break
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

module.exports = { latchScenario }
