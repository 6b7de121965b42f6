'use strict'
// sabsync/redis: isHeld and lost follow the local deadline (a lease counted
// from before the request that granted or last renewed it), not the next
// run of the renewal timer, which a blocked event loop delays. Code that
// checks isHeld before it writes is told the truth in the first turn after
// a stall.
const t = require('tap')
const { redisSuite } = require('./fixtures/redis/suite')
const { Mutex, Sema } = require('../lib/redis')

// Block this thread's event loop for `ms`.
const block = ms => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
const immediate = () => new Promise(resolve => setImmediate(resolve))

redisSuite(t, async s => {
  const { client } = s

  s.test('a stall of 1000 ms past a 300 ms lease: isHeld false in the first setImmediate', async (t, { opts }) => {
    const r = client()
    const m = new Mutex(r, 'stall', opts({ lease: 300 }))
    const sema = new Sema(r, 'stall', 2, opts({ lease: 300 }))
    await m.lockAsync()
    const token = await sema.acquire()
    const signal = m.lost
    t.equal(m.isHeld, true)
    block(1000)
    await immediate()
    t.equal(m.isHeld, false, 'isHeld is false')
    t.equal(m.lost.aborted, true, 'lost has aborted')
    t.equal(signal.aborted, true, 'the same signal, read before the stall')
    t.equal(m.lost.reason.code, 'ERR_SABSYNC_LEASE_LOST')
    t.match(m.lost.reason.message, /ran out before a renewal was confirmed/)
    t.equal(sema.lost(token).aborted, true, 'a Sema token\'s lost too')
    t.equal(await m.unlock(), false, 'unlock answers false')
    await sema.release(token)
  })

  s.test('a stall inside runExclusive: the result is not believed', async (t, { opts }) => {
    const m = new Mutex(client(), 'run', opts({ lease: 300 }))
    let inside
    const err = await m.runExclusive(({ signal }) => {
      inside = signal
      block(1000)
      return 'done'
    }).catch(e => e)
    t.equal(err.code, 'ERR_SABSYNC_LEASE_LOST', 'runExclusive rejects: fn did not run alone')
    t.equal(inside.aborted, true, 'fn\'s signal has aborted')
  })

  s.test('a stall shorter than the lease loses nothing', async (t, { opts }) => {
    const m = new Mutex(client(), 'short', opts({ lease: 3000 }))
    await m.lockAsync()
    block(200)
    await immediate()
    t.equal(m.isHeld, true)
    t.equal(m.lost.aborted, false)
    t.equal(await m.unlock(), true)
  })
})
