'use strict'
// The RWLock scenario of `npm run stress` (the harness and how the runs
// check exactly in spite of deaths: stress/harness.js).

const sabsync = require('..')
const { RWLock } = sabsync
const { MAX_TAGS, L, holderSet, scenario, sum, waitersOn, asyncOrSync, mainTasks } = require('./harness')

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

module.exports = { rwScenario }
