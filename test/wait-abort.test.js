'use strict'
// waitAsync's `signal` option: an abort takes the waiter out of the queue
// and rejects with signal.reason.
const t = require('tap')
const sabsync = require('..')

t.test('abort rejects with the reason and leaves the queue', async t => {
  const ta = new Int32Array(new SharedArrayBuffer(8))
  const ac = new AbortController()
  const r = sabsync.waitAsync(ta, 0, 0, Infinity, { signal: ac.signal })
  t.equal(r.async, true)
  t.equal(sabsync.waiters(ta, 0), 1)
  const reason = new Error('stop')
  ac.abort(reason)
  await t.rejects(r.value, reason)
  t.equal(sabsync.waiters(ta, 0), 0, 'the waiter left the queue')
  t.equal(sabsync.notify(ta, 0), 0, 'nothing to wake')
})

t.test('an already aborted signal', async t => {
  const ta = new Int32Array(new SharedArrayBuffer(8))
  const signal = AbortSignal.abort(new Error('early'))
  const r = sabsync.waitAsync(ta, 0, 0, 100, { signal })
  t.equal(r.async, true)
  await t.rejects(r.value, { message: 'early' })
  t.same(sabsync.waitAsync(ta, 0, 1, 100, { signal }), { async: false, value: 'not-equal' }, 'not-equal wins')
  t.equal(sabsync.waiters(ta, 0), 0)
})

t.test('one signal guards many waits; abort after a wake changes nothing', async t => {
  const ta = new Int32Array(new SharedArrayBuffer(8))
  const ac = new AbortController()
  const ps = []
  for (let i = 0; i < 20; i++) ps.push(sabsync.waitAsync(ta, 0, 0, Infinity, { signal: ac.signal }).value)
  t.equal(sabsync.notify(ta, 0, 5), 5)
  ac.abort()
  const results = await Promise.allSettled(ps)
  t.same(results.slice(0, 5).map(r => r.value), ['ok', 'ok', 'ok', 'ok', 'ok'], 'the first five were woken')
  t.ok(results.slice(5).every(r => r.status === 'rejected' && r.reason.name === 'AbortError'), 'the rest were aborted')
  t.equal(sabsync.waiters(ta, 0), 0)
})

t.test('abort with a timeout pending, and a timeout with a signal', async t => {
  const ta = new Int32Array(new SharedArrayBuffer(8))
  const ac = new AbortController()
  const a = sabsync.waitAsync(ta, 0, 0, 10000, { signal: ac.signal }).value
  const b = sabsync.waitAsync(ta, 0, 0, 5, { signal: ac.signal }).value
  t.equal(await b, 'timed-out')
  ac.abort('why')
  await t.rejects(a, 'why')
  t.equal(sabsync.waiters(ta, 0), 0)
})

t.test('bad options', async t => {
  const ta = new Int32Array(new SharedArrayBuffer(8))
  t.throws(() => sabsync.waitAsync(ta, 0, 0, 1, { signal: {} }), { name: 'TypeError', message: /options\.signal/ })
  t.throws(() => sabsync.waitAsync(ta, 0, 0, 1, { ref: 1 }), { name: 'TypeError', message: /options\.ref/ })
  t.throws(() => sabsync.waitAsync(ta, 0, 0, 1, 5), { name: 'TypeError', message: /options/ })
  t.equal(sabsync.waiters(ta, 0), 0)
})
