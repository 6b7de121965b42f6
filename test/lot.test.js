'use strict'
// The parking lot's checks, one table run once per memory it serves: the
// memory of one process and a shared space (test/lot-memories.js). Wake
// order across blocking and async waiters, exact woken counts, a lock
// built on wait/notify, and the Sema's fairness past its bound (src/core/
// sema_fair.h, F1-F4): the same rules, written once, wherever the memory is.
// The Sema's checks under the bound need a bound of a minute, which only
// one process's Sema takes (FAIRNESS): they are in test/sema-fair.test.js.
const t = require('tap')
const sabsync = require('..')
const { Sema } = require('..')
const { memories, selected, attach } = require('./lot-memories')
const { until, fixture, sleep, message, exited } = require('./helpers')

const here = (t, place) => {
  const m = attach(place)
  t.teardown(() => m.close())
  return m
}

function semaWaiter (place, data) {
  const go = new Int32Array(new SharedArrayBuffer(4))
  const w = fixture('lot/sema-waiter', { place, go, ...data })
  w.go = () => { Atomics.store(go, 0, 1); Atomics.notify(go, 0) }
  w.queued = message(w)
  return w
}

const checks = {
  async 'FIFO across blocking and async waiters' (t, memory) {
    for (const pattern of ['babab', 'aabbaa', 'bbbaaa', 'abba']) {
      const place = memory.make(t)
      const { cells } = here(t, place)
      const workers = []
      const logged = () => Atomics.load(cells, 1)
      for (let id = 1; id <= pattern.length; id++) {
        if (pattern[id - 1] === 'b') {
          workers.push(fixture('lot/waiter', { place, id }))
        } else {
          const r = sabsync.waitAsync(cells, 0, 0)
          t.equal(r.async, true)
          r.value.then(v => {
            t.equal(v, 'ok')
            Atomics.store(cells, 2 + Atomics.add(cells, 1, 1), id)
          })
        }
        await until(() => sabsync.waiters(cells, 0) === id, 60000, `waiter ${id} queued`)
      }
      // Wake one at a time: each notify counts exactly 1 and wakes the oldest.
      for (let k = 1; k <= pattern.length; k++) {
        t.equal(sabsync.notify(cells, 0, 1), 1, `${pattern}: notify ${k} wakes one`)
        // A waiter counts itself (cell 1), then writes its id: wait for both.
        await until(() => logged() === k && Atomics.load(cells, 2 + k - 1) !== 0, 60000, `wake ${k} logged`)
        t.equal(Atomics.load(cells, 2 + k - 1), k, `${pattern}: wake ${k} went to waiter ${k}`)
      }
      t.equal(sabsync.notify(cells, 0), 0, 'nobody left')
      await Promise.all(workers.map(exited))
    }
  },

  async 'exact counts with partial notifies' (t, memory) {
    const place = memory.make(t)
    const { cells } = here(t, place)
    const N = 6
    const ws = []
    for (let i = 0; i < 3; i++) ws.push(fixture('lot/waiter', { place }))
    const ps = []
    for (let i = 0; i < 3; i++) ps.push(sabsync.waitAsync(cells, 0, 0).value)
    await until(() => sabsync.waiters(cells, 0) === N, 60000, 'every waiter to queue')
    t.equal(sabsync.notify(cells, 0, 0), 0, 'count 0 wakes none')
    t.equal(sabsync.notify(cells, 0, -3), 0, 'negative count wakes none')
    t.equal(sabsync.notify(cells, 0, 2.9), 2, 'count is truncated')
    t.equal(sabsync.waiters(cells, 0), N - 2)
    t.equal(sabsync.notify(cells, 1), 0, 'another cell has none')
    t.equal(sabsync.notify(cells, 0, 3), 3)
    t.equal(sabsync.notify(cells, 0, Infinity), 1)
    t.equal(sabsync.notify(cells, 0), 0)
    t.same(await Promise.all(ps), ['ok', 'ok', 'ok'])
    await Promise.all(ws.map(exited))
  },

  async 'changing the value without notify wakes nobody' (t, memory) {
    // Only sabsync's notify wakes sabsync's waiters: not a store, not the
    // built-in Atomics.notify. The worker queues first (its wait is long,
    // so a slow start under load cannot time it out), then this thread.
    const place = memory.make(t)
    const { cells } = here(t, place)
    const w = fixture('lot/waiter', { place, timeout: 30000 })
    const result = message(w)
    await until(() => sabsync.waiters(cells, 0) === 1, 60000, 'the worker queued')
    let settled = null
    const p = sabsync.waitAsync(cells, 0, 0, 300).value.then(v => { settled = v })
    t.equal(sabsync.waiters(cells, 0), 2)
    Atomics.store(cells, 0, 1)
    t.equal(Atomics.notify(cells, 0), 0, 'the built-in notify finds none of its own waiters')
    await p
    t.equal(settled, 'timed-out', 'the async waiter timed out')
    t.equal(sabsync.waiters(cells, 0), 1, 'the blocking waiter still waits')
    t.equal(sabsync.notify(cells, 0), 1, 'sabsync\'s notify wakes it')
    t.equal(await result, 'ok')
    await exited(w)
  },

  async 'a lock built on wait/notify: counter exact (N x K)' (t, memory) {
    // Workers and this thread (async) increment a plain counter under a
    // three-state lock whose slow path is sabsync's wait/notify.
    const N = 3
    const K = 3000
    for (let rep = 0; rep < 3; rep++) {
      const place = memory.make(t)
      const { cells: ta } = here(t, place)
      const ws = []
      for (let i = 0; i < N; i++) ws.push(fixture('lot/lock-counter', { place, K }))
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
  },

  async 'Sema: a waiter queued past the bound is handed the released token; a running thread cannot take it' (t, memory) {
    const place = memory.make(t, { nr: 1 })
    const { sema: s } = here(t, place)
    const tok = s.tryAcquire()
    const w = semaWaiter(place, {})
    t.equal(await w.queued, 'queued')
    await until(() => s.nrWaiting() === 1, 60000, 'the worker to queue')
    await sleep(20) // past the 1 ms bound, for certain
    s.release(tok)
    t.equal(s.nrWaiting(), 0)
    const taken = s.tryAcquire()
    t.equal(taken, undefined, 'the token was handed to the waiter, though its thread has not run yet')
    if (taken !== undefined) s.release(taken) // so that a failure here does not hang the test
    const got = message(w)
    w.go()
    t.equal(await got, tok)
    await w.terminate()
    await until(() => s.tryAcquire() === tok, 60000, 'the token back once the waiter\'s thread ended')
    s.release(tok)
  },

  async 'Sema: a free token while a waiter past the bound is queued goes to that waiter, not to a newcomer' (t, memory) {
    const place = memory.make(t, { nr: 2 })
    const { sema: s } = here(t, place)
    const a = s.tryAcquire()
    const b = s.tryAcquire()
    const w = semaWaiter(place, {})
    await w.queued
    await until(() => s.nrWaiting() === 1, 60000, 'the worker to queue')
    await sleep(20)
    // The fast give-back's CAS without its kick (a thread torn down between
    // them): a token free while a waiter past the bound is queued.
    const words = new Int32Array(s.buffer, s.byteOffset, Sema.byteLengthFor(2) / 4)
    const hold = 8 + 2
    const self = words[hold + a]
    t.equal(Atomics.compareExchange(words, hold + a, self, 0), self)
    const taken = s.tryAcquire()
    t.equal(taken, undefined, 'the newcomer does not take it (F1)')
    if (taken !== undefined) s.release(taken)
    t.equal(s.nrWaiting(), 0, 'the waiter was handed it instead')
    const got = message(w)
    w.go()
    t.equal(await got, a)
    s.release(b)
    await w.terminate()
  },

  async 'Sema: waiters past the bound are served in arrival order, across threads, while this thread keeps trying to barge' (t, memory) {
    const place = memory.make(t, { nr: 1 })
    const { sema: s } = here(t, place)
    const tok = s.tryAcquire()
    const order = new Int32Array(new SharedArrayBuffer(4 * 5))
    const ws = []
    for (let k = 1; k <= 4; k++) {
      const w = semaWaiter(place, { order, k, release: true })
      await w.queued
      await until(() => s.nrWaiting() === k, 60000, `worker ${k} to queue`)
      ws.push(w)
    }
    await sleep(20)
    s.release(tok)
    let barged = 0
    for (const w of ws) w.go()
    await until(() => {
      // A waiter not served yet (it records itself before it releases) is
      // still queued, past the bound: a token taken here then overtook it.
      // Read after the try: the last waiter may record and release between
      // a read before it and the try, which then takes a token nobody waits
      // for.
      if (s.tryAcquire() !== undefined) {
        if (Atomics.load(order, 0) < 4) barged++
        s.release()
      }
      return Atomics.load(order, 0) === 4
    }, 60000, 'every waiter to be served')
    t.same(Array.from(order.subarray(1)), [1, 2, 3, 4], 'served in the order they queued')
    t.equal(barged, 0, 'no try took a token while a waiter past the bound was queued')
    await Promise.all(ws.map(w => w.terminate()))
    t.equal(s.nrWaiting(), 0)
    t.equal(s.tryAcquire(), 0, 'every token back')
  }
}

for (const name of selected()) {
  t.test(name, async t => {
    for (const [check, run] of Object.entries(checks)) await t.test(check, t => run(t, memories[name]))
  })
}
