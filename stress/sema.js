'use strict'
// The Sema scenario of `npm run stress` (the harness and how the runs
// check exactly in spite of deaths: stress/harness.js).

const sabsync = require('..')
const { Sema } = sabsync
const { MAX_TAGS, L, holderSet, scenario, sum, mainTasks } = require('./harness')

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

module.exports = { semaScenario }
