'use strict'
// The RateLimit scenario of `npm run stress` (the harness and how the runs
// check exactly in spite of deaths: stress/harness.js).

const sabsync = require('..')
const { RateLimit } = sabsync
const { scenario, asyncOrSync, mainTasks } = require('./harness')

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

module.exports = { rateScenario }
