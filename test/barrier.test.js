'use strict'
// Barrier: one leader per round, reusable, broken by a dead party, a
// timeout or an abort until reset().
const t = require('tap')
const { Barrier } = require('..')
const { until, fixture, sleep, message } = require('./helpers')

const BROKEN = { code: 'ERR_SABSYNC_BARRIER_BROKEN', name: 'SabsyncError' }

t.test('shape and bad input', async t => {
  t.equal(Barrier.byteLength, Barrier.byteLengthFor(64))
  t.equal(Barrier.byteLengthFor(1), 24)
  const sab = new SharedArrayBuffer(Barrier.byteLengthFor(3) + 16)
  const b = new Barrier(3, { buffer: sab, byteOffset: 16 })
  t.same(Object.keys(b).sort(), ['buffer', 'byteLength', 'byteOffset'])
  t.equal(b.byteLength, Barrier.byteLengthFor(3))
  t.equal(Barrier.from({ buffer: sab, byteOffset: 16 }).parties, 3)
  t.same(new Barrier(1).wait(), { isLeader: true }, 'one party: always the leader')
  t.throws(() => new Barrier(0), { name: 'RangeError', message: /"parties"/ })
  t.throws(() => new Barrier(2.5), { name: 'RangeError', message: /"parties"/ })
  t.throws(() => new Barrier('2'), { name: 'RangeError', message: /"parties"/ })
  t.throws(() => new Barrier(), { name: 'RangeError', message: /"parties"/ })
  t.throws(() => new Barrier(100, { buffer: new SharedArrayBuffer(64) }), { name: 'RangeError', message: /byteOffset/ })
  t.throws(() => Barrier.from({ buffer: new SharedArrayBuffer(64) }), { name: 'SabsyncError', code: 'ERR_SABSYNC_BAD_MEMORY', message: /zeroed/ }, 'uninitialised memory')
  t.throws(() => b.wait('x'), { name: 'TypeError', message: /"timeout"/ })
  t.throws(() => b.waitAsync({ timeout: NaN }), { name: 'TypeError', message: /"options.timeout"/ })
  t.notOk(b.isBroken)
})

t.test('many rounds, exactly one leader each, nobody ahead', async t => {
  const P = 4
  const ROUNDS = 60
  const b = new Barrier(P)
  const sab = new SharedArrayBuffer(4 * (ROUNDS + 8))
  const c = new Int32Array(sab) // [0..P) phase of each party, [8 + r] leaders of round r, [7] violation
  const ws = []
  for (let id = 1; id < P; id++) ws.push(fixture('barrier/round-party', { b, sab, id, P, ROUNDS }))
  // The main thread is party 0: the loop of test/fixtures/barrier/round-party.js, with waitAsync.
  for (let r = 0; r < ROUNDS; r++) {
    c[0] = r + 1
    const { isLeader } = await b.waitAsync({ timeout: 20000 })
    for (let p = 0; p < P; p++) if (Atomics.load(c, p) < r + 1) Atomics.store(c, 7, 1)
    if (isLeader) Atomics.add(c, 8 + r, 1)
  }
  await Promise.all(ws.map(w => w.exited))
  t.equal(Atomics.load(c, 7), 0, 'no party passed a round before all arrived')
  const leaders = Array.from(c.subarray(8, 8 + ROUNDS))
  t.same(leaders, new Array(ROUNDS).fill(1), 'one leader per round')
  t.notOk(b.isBroken)
})

// Two workers wait at a 4-party barrier; `breakIt` breaks the round (the
// fourth party never comes); both must get ERR_SABSYNC_BARRIER_BROKEN, and so
// must a later wait().
async function brokenRound (t, b, breakIt) {
  const ws = []
  const results = []
  for (let i = 0; i < 2; i++) {
    const w = fixture('barrier/broken-round-party', b)
    results.push(message(w))
    ws.push(w)
  }
  await until(() => b.arrived === 2)
  await breakIt()
  t.same(await Promise.all(results), ['ERR_SABSYNC_BARRIER_BROKEN', 'ERR_SABSYNC_BARRIER_BROKEN'], 'its waiters get BARRIER_BROKEN')
  await Promise.all(ws.map(w => w.exited))
  t.ok(b.isBroken)
  t.throws(() => b.wait(), BROKEN, 'so does every later wait()')
  await t.rejects(b.waitAsync(), BROKEN)
  b.reset()
  t.notOk(b.isBroken, 'until reset()')
  // and it works again
  const ws2 = [0, 1, 2].map(() => fixture('barrier/wait-once', b))
  const r2 = ws2.map(message)
  const mine = await b.waitAsync()
  const all = [mine, ...(await Promise.all(r2))]
  t.equal(all.filter(r => r.isLeader).length, 1, 'one leader after reset')
  await Promise.all(ws2.map(w => w.exited))
}

t.test('broken by a timeout', async t => {
  const b = new Barrier(4)
  await brokenRound(t, b, async () => {
    const t0 = performance.now()
    t.equal(await b.waitAsync({ timeout: 20 }), undefined, 'the waiter that timed out answers undefined')
    t.ok(performance.now() - t0 >= 20, 'not early')
  })
})

t.test('broken by an abort', async t => {
  const b = new Barrier(4)
  await brokenRound(t, b, async () => {
    const ac = new AbortController()
    const p = b.waitAsync({ signal: ac.signal })
    await sleep(5)
    ac.abort(new Error('stop'))
    await t.rejects(p, { message: 'stop' }, 'the aborted waiter gets signal.reason')
  })
})

t.test('broken by reset() while parties wait', async t => {
  const b = new Barrier(3)
  const ws = [0, 1].map(() => fixture('barrier/wait-reset', b))
  const rs = ws.map(message)
  await until(() => b.arrived === 2)
  b.reset()
  t.same(await Promise.all(rs), ['ERR_SABSYNC_BARRIER_BROKEN', 'ERR_SABSYNC_BARRIER_BROKEN'])
  t.notOk(b.isBroken, 'and the barrier is fresh')
  await Promise.all(ws.map(w => w.exited))
})

for (const how of ['terminate', 'exit', 'throw']) {
  t.test(`broken by a party that dies while waiting (${how})`, async t => {
    const b = new Barrier(4)
    await brokenRound(t, b, async () => {
      // A third party arrives and dies while waiting; the fourth never comes.
      const w = fixture('barrier/dies-while-waiting', { b, how })
      w.on('error', () => {})
      await until(() => b.arrived === 3)
      if (how === 'terminate') await w.terminate()
      await w.exited
    }).catch(err => t.fail(err))
  })
}

t.test('broken by a party of the last round that dies before arriving', async t => {
  const b = new Barrier(3)
  const sab = new SharedArrayBuffer(8)
  // Round 1 with two workers; then one of them ends, the other waits for round 2.
  const leaver = fixture('barrier/leaver', b)
  const stayer = fixture('barrier/stayer', { b, sab })
  const result = message(stayer)
  await b.waitAsync({ timeout: 20000 })
  await leaver.exited
  await until(() => Atomics.load(new Int32Array(sab), 0) === 1)
  t.equal(await result, 'ERR_SABSYNC_BARRIER_BROKEN', 'the waiter learns the round cannot complete')
  await t.rejects(b.waitAsync({ timeout: 20000 }), BROKEN)
  await stayer.exited
})
