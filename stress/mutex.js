'use strict'
// The Mutex scenarios of `npm run stress` (the harness and how the runs
// check exactly in spite of deaths: stress/harness.js).

const { Worker } = require('worker_threads')
const sabsync = require('..')
const { Mutex } = sabsync
const { root, MAX_TAGS, scenario, sum, waitersOn, asyncOrSync, mainTasks } = require('./harness')

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

module.exports = { mutexScenario, soakLockAsync }
