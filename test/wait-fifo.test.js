'use strict'
// FIFO wake order across blocking (worker) and async (main thread) waiters
// on one cell, and exact woken counts.
const t = require('tap')
const sabsync = require('..')
const { until, exited, fixture, message } = require('./helpers')

// Worker: wait on cell 0 for value 0, then append its id to the log.

async function round (t, pattern) {
  const sab = new SharedArrayBuffer(4 * (2 + pattern.length))
  const ta = new Int32Array(sab)
  const workers = []
  const logged = () => Atomics.load(ta, 1)
  for (let id = 1; id <= pattern.length; id++) {
    if (pattern[id - 1] === 'b') {
      const w = fixture('wait-fifo/waiter', { sab, id })
      workers.push(w)
    } else {
      const r = sabsync.waitAsync(ta, 0, 0)
      t.equal(r.async, true)
      r.value.then(v => {
        t.equal(v, 'ok')
        const at = Atomics.add(ta, 1, 1)
        Atomics.store(ta, 2 + at, id)
      })
    }
    await until(() => sabsync.waiters(ta, 0) === id, 60000, `waiter ${id} queued`)
  }
  // Wake one at a time: each notify counts exactly 1 and wakes the oldest.
  for (let k = 1; k <= pattern.length; k++) {
    t.equal(sabsync.notify(ta, 0, 1), 1, `notify ${k} wakes one`)
    await until(() => logged() === k, 60000, `wake ${k} logged`)
    t.equal(Atomics.load(ta, 2 + k - 1), k, `wake ${k} went to waiter ${k}`)
  }
  t.equal(sabsync.notify(ta, 0), 0, 'nobody left')
  await Promise.all(workers.map(exited))
}

t.test('FIFO across blocking and async waiters', async t => {
  for (const pattern of ['babab', 'aabbaa', 'bbbaaa', 'abba']) await round(t, pattern)
})

t.test('exact counts with partial notifies', async t => {
  const sab = new SharedArrayBuffer(16)
  const ta = new Int32Array(sab)
  const N = 6
  const ws = []
  for (let i = 0; i < 3; i++) ws.push(fixture('wait-fifo/wait-0', sab))
  const ps = []
  for (let i = 0; i < 3; i++) ps.push(sabsync.waitAsync(ta, 0, 0).value)
  await until(() => sabsync.waiters(ta, 0) === N)
  t.equal(sabsync.notify(ta, 0, 0), 0, 'count 0 wakes none')
  t.equal(sabsync.notify(ta, 0, -3), 0, 'negative count wakes none')
  t.equal(sabsync.notify(ta, 0, 2.9), 2, 'count is truncated')
  t.equal(sabsync.waiters(ta, 0), N - 2)
  t.equal(sabsync.notify(ta, 1), 0, 'another cell has none')
  t.equal(sabsync.notify(ta, 0, 3), 3)
  t.equal(sabsync.notify(ta, 0, Infinity), 1)
  t.equal(sabsync.notify(ta, 0), 0)
  t.same(await Promise.all(ps), ['ok', 'ok', 'ok'])
  await Promise.all(ws.map(exited))
})

t.test('changing the value without notify wakes nobody', async t => {
  // Only sabsync's notify wakes sabsync's waiters: not a store, not the
  // built-in Atomics.notify. The worker queues first (its wait is long, so
  // a slow start under load cannot time it out), then the main thread.
  const sab = new SharedArrayBuffer(8)
  const ta = new Int32Array(sab)
  const w = fixture('wait-fifo/no-notify', sab)
  const result = message(w)
  await until(() => sabsync.waiters(ta, 0) === 1, 60000, 'the worker queued')
  let settled = null
  const p = sabsync.waitAsync(ta, 0, 0, 300).value.then(v => { settled = v })
  t.equal(sabsync.waiters(ta, 0), 2)
  Atomics.store(ta, 0, 1)
  t.equal(Atomics.notify(ta, 0), 0, 'the built-in notify finds none of its own waiters')
  await p
  t.equal(settled, 'timed-out', 'the async waiter timed out')
  t.equal(sabsync.waiters(ta, 0), 1, 'the blocking waiter still waits')
  t.equal(sabsync.notify(ta, 0), 1, 'sabsync\'s notify wakes it')
  t.equal(await result, 'ok')
  await exited(w)
})

t.test('a lock built on wait/notify: counter exact (N x K)', async t => {
  // Workers and the main thread (async) increment a plain counter under a
  // three-state lock whose slow path is sabsync's wait/notify.
  const N = 3
  const K = 3000
  const sab = new SharedArrayBuffer(16)
  const ta = new Int32Array(sab)
  for (let rep = 0; rep < 3; rep++) {
    Atomics.store(ta, 1, 0)
    const ws = []
    for (let i = 0; i < N; i++) {
      ws.push(fixture('wait-fifo/lock-counter', { sab, K }))
    }
    // The main thread joins in with async waits.
    for (let k = 0; k < 300; k++) {
      let c = Atomics.compareExchange(ta, 0, 0, 1)
      if (c !== 0) {
        if (c !== 2) c = Atomics.exchange(ta, 0, 2)
        while (c !== 0) {
          const r = sabsync.waitAsync(ta, 0, 2)
          if (r.async) await r.value
          c = Atomics.exchange(ta, 0, 2)
        }
      }
      ta[1] = ta[1] + 1
      if (Atomics.exchange(ta, 0, 0) === 2) sabsync.notify(ta, 0, 1)
      if (k % 50 === 0) await new Promise(resolve => setImmediate(resolve))
    }
    await Promise.all(ws.map(exited))
    t.equal(Atomics.load(ta, 1), N * K + 300, `round ${rep}: counter exact`)
    t.equal(sabsync.waiters(ta, 0), 0)
  }
})
