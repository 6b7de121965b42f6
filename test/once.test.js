'use strict'
// Once: fn runs exactly once across threads; a throwing or dying runner
// hands the job to a waiting caller.
const t = require('tap')
const { Once } = require('..')
const { until, fixture, sleep, message } = require('./helpers')

t.test('shape', async t => {
  t.equal(Once.byteLength, 8)
  const o = new Once()
  t.same(Object.keys(o).sort(), ['buffer', 'byteOffset'])
  t.equal(o.done, false)
  t.equal(o.run(() => {}), true)
  t.equal(Once.from(o).done, true, 'from() attaches')
  t.equal(o.run(() => { throw new Error('not called') }), false)
  t.equal(await o.runAsync(() => { throw new Error('not called') }), false)
  const o2 = new Once()
  t.throws(() => o2.run(() => o2.run(() => {})), { code: 'ERR_SABSYNC_DEADLOCK' }, 'run() inside its own fn')
  t.equal(o2.done, false, 'the failed run left it undone')
  t.equal(o2.run(() => {}), true)
})

t.test('exactly once across workers and the main thread', async t => {
  for (let round = 0; round < 5; round++) {
    const o = new Once()
    const sab = new SharedArrayBuffer(16)
    const c = new Int32Array(sab)
    const ws = []
    for (let i = 0; i < 4; i++) {
      ws.push(fixture('once/run-once', { o, sab }))
    }
    const ran = await o.runAsync(async () => { const v = c[0]; await sleep(3); c[0] = v + 1 })
    if (c[0] !== 1) Atomics.store(c, 2, 1)
    if (ran) Atomics.add(c, 1, 1)
    await Promise.all(ws.map(w => w.exited))
    t.equal(c[0], 1, `round ${round}: fn ran once`)
    t.equal(Atomics.load(c, 1), 1, 'exactly one caller answered true')
    t.equal(Atomics.load(c, 2), 0, 'nobody returned before fn finished')
    t.ok(o.done)
  }
})

t.test('a throwing runner: a waiting caller runs fn', async t => {
  const o = new Once()
  const sab = new SharedArrayBuffer(8)
  const c = new Int32Array(sab)
  const w = fixture('once/throwing-runner', { o, sab })
  const thrown = message(w)
  await until(() => Atomics.load(c, 0) === 1)
  const ran = await o.runAsync(() => { Atomics.store(c, 0, 2) })
  t.equal(await thrown, 'init failed', 'the runner saw its exception')
  t.equal(ran, true, 'the waiter ran fn instead')
  t.equal(Atomics.load(c, 0), 2)
  t.ok(o.done)
  await w.exited

  // In one thread: runAsync whose fn rejects, with another runAsync waiting.
  const o2 = new Once()
  const calls = []
  const a = o2.runAsync(async () => { calls.push('a'); await sleep(5); throw new Error('a failed') })
  const b = o2.runAsync(async () => { calls.push('b') })
  await t.rejects(a, { message: 'a failed' })
  t.equal(await b, true)
  t.same(calls, ['a', 'b'])
})

for (const how of ['terminate', 'exit', 'throw']) {
  t.test(`a runner that dies (${how}): a waiter runs fn`, async t => {
    const o = new Once()
    const sab = new SharedArrayBuffer(8)
    const c = new Int32Array(sab)
    const w = fixture('once/dying-runner', { o, sab, how })
    w.on('error', () => {})
    await until(() => Atomics.load(c, 0) === 1)
    const waiter = fixture('once/waiter', { o, sab })
    const got = message(waiter)
    if (how === 'terminate') await w.terminate()
    await w.exited
    t.equal(await got, true, 'the waiter ran fn')
    t.equal(Atomics.load(c, 0), 3)
    t.ok(o.done)
    await waiter.exited
  })
}

t.test('timeout, abort, bad input', async t => {
  const o = new Once()
  let release
  const running = o.runAsync(() => new Promise(resolve => { release = resolve }))
  const t0 = performance.now()
  t.equal(await o.runAsync(() => {}, { timeout: 20 }), undefined, 'undefined on timeout')
  t.ok(performance.now() - t0 >= 20)
  const ac = new AbortController()
  const p = o.runAsync(() => {}, { signal: ac.signal })
  ac.abort(new Error('stop'))
  await t.rejects(p, { message: 'stop' })
  release()
  t.equal(await running, true)
  t.throws(() => o.run('x'), { name: 'TypeError', message: /"fn"/ })
  await t.rejects(o.runAsync(null), { name: 'TypeError', message: /"fn"/ })
  t.throws(() => new Once().run(() => {}, 'soon'), { name: 'TypeError', message: /"timeout"/ })
})
