'use strict'
// The RateLimit scenario of `npm run stress` (the harness and how the runs
// check exactly in spite of deaths: stress/harness.js).

const sabsync = require('..')
const { RateLimit } = sabsync
const { scenario, asyncOrSync, mainTasks, calmWorkers } = require('./harness')

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

// After the chaos: 3 fresh workers each ask every limiter for 2 × rps
// grants (sync, 10 s each, nobody killed). All are granted, and these
// grants too keep the window: no capacity was left with a dead thread or
// an aborted caller. How many grants the chaos itself got depends on how
// promptly a turn's holder wakes on a loaded machine (at a load of 8 on 2
// CPUs, about a fifth of the possible), so the limiters' having survived
// it is checked here, not by a share of the capacity.
async function calmGrants (limits) {
  const users = 3
  const per = RATES.map(([rps]) => 2 * rps)
  const times = RATES.map((r, i) => new Float64Array(new SharedArrayBuffer(8 * users * per[i])))
  const errors = await calmWorkers(users, `
const limits = workerData.limits.map(h => sabsync.RateLimit.from(h))
workerData.times.forEach((buf, i) => {
  const t = new Float64Array(buf)
  for (let k = 0; k < workerData.per[i]; k++) {
    const at = limits[i].sync(10000)
    if (at === undefined) throw new Error('limiter ' + i + ': no grant within 10 s')
    t[workerData.index * workerData.per[i] + k] = at
  }
})`, { limits: limits.map(l => ({ buffer: l.buffer, byteOffset: l.byteOffset })), times: times.map(t => t.buffer), per })
  const bad = []
  RATES.forEach(([rps, unit, uniform], i) => {
    const ts = Array.from(times[i]).sort((a, b) => a - b)
    for (let k = rps; k < ts.length; k++) if (ts[k] - ts[k - rps] < unit - 1e-6) bad.push(`limiter ${i}: ${rps + 1} grants within ${(ts[k] - ts[k - rps]).toFixed(3)} ms`)
    if (uniform) for (let k = 1; k < ts.length; k++) if (ts[k] - ts[k - 1] < unit / rps - 1e-6) bad.push(`limiter ${i}: two grants ${(ts[k] - ts[k - 1]).toFixed(3)} ms apart`)
  })
  return {
    ok: errors.length === 0 && bad.length === 0,
    detail: `${users} fresh workers granted ${per.map(n => n * users).join(' and ')}, windows kept` +
      (errors.length || bad.length ? `; BAD: ${[...errors, ...bad].slice(0, 5).join('; ')}` : '')
  }
}

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
        const fine = worst >= unit - eps && (!uniform || gap >= unit / rps - eps) && n > 0 && n <= capacity + rps
        ok = ok && fine
        parts.push(`${uniform ? 'uniform ' : ''}${rps}/${unit} ms: ${n} grants of ${capacity} possible, the tightest ${rps + 1} span ${worst.toFixed(3)} ms` +
          (uniform ? `, closest two ${gap.toFixed(3)} ms apart` : ''))
      })
      const calm = await calmGrants(limits)
      return {
        ok: ok && calm.ok,
        detail: `${parts.join('; ')}; ${Atomics.load(d, L2.TIMEOUTS)} timeouts, ${Atomics.load(d, L2.ABORTS)} aborts; after the run: ${calm.detail}`
      }
    }
  })
}

module.exports = { rateScenario }
