'use strict'
// The CondVar scenario of `npm run stress` (the harness and how the runs
// check exactly in spite of deaths: stress/harness.js).

const sabsync = require('..')
const { Mutex, CondVar } = sabsync
const { scenario, waitersOn, asyncOrSync, mainTasks } = require('./harness')

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

module.exports = { condScenario }
