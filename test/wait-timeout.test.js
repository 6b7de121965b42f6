'use strict'
// Timeouts never fire early (against the monotonic clock), on blocking and
// async waits; odd timeouts behave as the spec says.
const t = require('tap')
const sabsync = require('..')
const { exited, fixture, message } = require('./helpers')

t.test('blocking timeouts are never early', async t => {
  const ta = new Int32Array(new SharedArrayBuffer(8))
  for (const ms of [1, 5, 12.5, 30]) {
    const t0 = performance.now()
    t.equal(sabsync.wait(ta, 0, 0, ms), 'timed-out')
    const took = performance.now() - t0
    t.ok(took >= ms, `wait(${ms}) took ${took.toFixed(2)} ms`)
  }
  t.equal(sabsync.wait(ta, 0, 0, 0), 'timed-out', '0 times out at once')
  t.equal(sabsync.wait(ta, 0, 0, -5), 'timed-out', 'negative is 0')
  t.equal(sabsync.wait(ta, 0, 0, -Infinity), 'timed-out', '-Infinity is 0')
  t.equal(sabsync.wait(ta, 0, 1, NaN), 'not-equal', 'NaN (forever) still compares first')
  t.equal(sabsync.waiters(ta, 0), 0)
})

t.test('blocking timeouts in a worker', async t => {
  const sab = new SharedArrayBuffer(8)
  const w = fixture('wait-timeout/blocking-timeouts', sab)
  const [out] = await Promise.all([message(w), exited(w)])
  for (const [ms, r, took] of out) {
    t.equal(r, 'timed-out')
    t.ok(took >= ms, `worker wait(${ms}) took ${took.toFixed(2)} ms`)
  }
})

t.test('async timeouts are never early and settle in deadline order', async t => {
  const ta = new Int32Array(new SharedArrayBuffer(8))
  const order = []
  const ms = [40, 5, 25, 1, 15, 60, 5.5]
  // Each wait's deadline lies between (time before the call) + ms and
  // (time after it) + ms: a loaded machine can stall between two calls, so
  // the order is checked for the pairs whose deadline windows are apart.
  const windows = []
  await Promise.all(ms.map((m, i) => {
    const before = performance.now()
    const r = sabsync.waitAsync(ta, 0, 0, m)
    windows[i] = [before + m, performance.now() + m]
    t.equal(r.async, true)
    return r.value.then(v => {
      const took = performance.now() - before
      t.equal(v, 'timed-out')
      t.ok(took >= m, `waitAsync(${m}) settled after ${took.toFixed(2)} ms`)
      order.push(i)
    })
  }))
  const wrong = []
  for (let a = 0; a < ms.length; a++) {
    for (let b = 0; b < ms.length; b++) {
      if (windows[a][1] < windows[b][0] && order.indexOf(a) > order.indexOf(b)) wrong.push(`${ms[a]} after ${ms[b]}`)
    }
  }
  t.same(wrong, [], `deadline order (settled: ${order.map(i => ms[i]).join(', ')})`)
  t.equal(sabsync.waiters(ta, 0), 0)
})

t.test('synchronous answers of waitAsync', async t => {
  const ta = new Int32Array(new SharedArrayBuffer(8))
  t.same(sabsync.waitAsync(ta, 0, 1), { async: false, value: 'not-equal' })
  t.same(sabsync.waitAsync(ta, 0, 0, 0), { async: false, value: 'timed-out' })
  t.same(sabsync.waitAsync(ta, 0, 0, -1), { async: false, value: 'timed-out' })
  t.same(sabsync.waitAsync(ta, 0, 1, 0), { async: false, value: 'not-equal' }, 'value compared before the timeout')
  t.equal(sabsync.waiters(ta, 0), 0)
})

t.test('a notify racing a timeout: count and result agree', async t => {
  const ta = new Int32Array(new SharedArrayBuffer(8))
  let agreed = 0
  for (let i = 0; i < 200; i++) {
    const p = sabsync.waitAsync(ta, 0, 0, 1).value
    const spinUntil = performance.now() + (i % 10) * 0.2
    while (performance.now() < spinUntil);
    await new Promise(resolve => setImmediate(resolve))
    const n = sabsync.notify(ta, 0)
    const v = await p
    t.equal(v, n === 1 ? 'ok' : 'timed-out', `round ${i}`)
    agreed++
  }
  t.equal(agreed, 200)
  t.equal(sabsync.waiters(ta, 0), 0)
})
