'use strict'
// Latch: waiters (blocking and async) are released when the count reaches 0,
// and not before.
const t = require('tap')
const { Latch } = require('..')
const { until, fixture, sleep, message } = require('./helpers')

t.test('shape and counting', async t => {
  t.equal(Latch.byteLength, 8)
  const l = new Latch(3)
  t.same(Object.keys(l).sort(), ['buffer', 'byteOffset'])
  t.equal(l.count, 3)
  t.notOk(l.tryWait())
  l.countDown()
  l.countDown(0)
  t.equal(Latch.from(l).count, 2, 'from() attaches')
  t.throws(() => l.countDown(3), { name: 'RangeError', message: /"n"/ }, 'below 0 is refused')
  t.equal(l.count, 2, 'and nothing was taken')
  l.countDown(2)
  t.ok(l.tryWait())
  t.equal(l.wait(), true)
  t.equal(await l.waitAsync(), true)
  t.equal(new Latch(0).wait(0), true)
  t.equal(new Latch(1).arriveAndWait(), true)
})

t.test('blocking and async waiters are released together, at 0', async t => {
  for (let round = 0; round < 3; round++) {
    const n = 4
    const l = new Latch(n)
    const sab = new SharedArrayBuffer(16)
    const c = new Int32Array(sab)
    const ws = []
    for (let i = 0; i < n; i++) {
      ws.push(fixture('latch/wait-released', { l, sab, i }))
    }
    const seen = await Promise.all([l.waitAsync(), l.waitAsync({ timeout: 20000 })].map(p => p.then(r => [r, l.count])))
    t.same(seen, [[true, 0], [true, 0]], 'async waiters released at 0')
    await Promise.all(ws.map(w => w.exited))
    t.equal(Atomics.load(c, 1), n, 'every worker passed')
    t.equal(Atomics.load(c, 2), 0, 'nobody passed early')
  }
})

t.test('waiters stay parked above 0', async t => {
  const l = new Latch(2)
  const w = fixture('latch/wait-parked', l)
  const msgs = []
  w.on('message', m => msgs.push(m))
  await until(() => msgs.length === 1)
  await sleep(20)
  l.countDown()
  await sleep(30)
  t.equal(msgs.length, 1, 'not released at 1')
  l.countDown()
  await until(() => msgs.length === 2)
  t.same(msgs[1], [true, 0])
  await w.exited
})

t.test('timeouts, abort, bad input', async t => {
  const l = new Latch(1)
  const t0 = performance.now()
  t.equal(await l.waitAsync({ timeout: 20 }), false)
  t.ok(performance.now() - t0 >= 20, 'not early')
  const w = fixture('latch/wait-timeouts', l)
  const [r, took] = await message(w)
  t.equal(r, false)
  t.ok(took >= 15, `wait(15) took ${took.toFixed(1)} ms`)
  const ac = new AbortController()
  const p = l.waitAsync({ signal: ac.signal })
  ac.abort(new Error('stop'))
  await t.rejects(p, { message: 'stop' })
  t.throws(() => new Latch(-1), { name: 'RangeError', message: /"count"/ })
  t.throws(() => new Latch(1.5), { name: 'RangeError', message: /"count"/ })
  t.throws(() => new Latch('3'), { name: 'RangeError', message: /"count"/ })
  t.throws(() => new Latch(), { name: 'RangeError', message: /"count"/ })
  t.throws(() => l.countDown(-1), { name: 'RangeError', message: /"n"/ })
  t.throws(() => l.countDown(NaN), { name: 'RangeError', message: /"n"/ })
  t.throws(() => l.wait('x'), { name: 'TypeError', message: /"timeout"/ })
  t.throws(() => l.waitAsync(null), { name: 'TypeError', message: /"options"/ })
  t.throws(() => Latch.from(5), { name: 'TypeError', message: /handle/ })
})
