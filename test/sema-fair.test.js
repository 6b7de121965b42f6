'use strict'
// The Sema's bounded fairness (src/core/sema.c, F1-F4; docs/threads.md, "Sema"): a
// release whose oldest waiter has waited less than the bound (1 ms) leaves
// the token free and wakes that waiter to try again, so a running thread
// may take the token meanwhile (no convoy when threads outnumber CPUs); a
// waiter queued the bound or longer is handed the token, and nobody takes a
// token past it. Each test fails if the barge is gone (strict hand-off) or
// if the bound is broken (a waiter past it overtaken).
//
// The waiters are async acquires on workers whose event loops are held up
// (test/fixtures/sema-fair/async-waiter.js): a wake to try again waits
// there, so whether a release handed the token over or left it free is
// seen in the memory, whatever the machine's load. Waiting past the bound
// is made certain by sleeping more than it after the waiter queued; being
// under the bound, by a Sema made with a bound of a minute (FAIRNESS, the
// option RateLimit uses for its strict turn).
const t = require('tap')
const { Sema } = require('..')
const { FAIRNESS } = require('../lib/sema')
const { until, fixture, sleep, message } = require('./helpers')

const MINUTE = 60000
const handle = s => ({ buffer: s.buffer, byteOffset: s.byteOffset })

function waiter (s, data) {
  const go = new Int32Array(new SharedArrayBuffer(4))
  const w = fixture('sema-fair/async-waiter', { sema: handle(s), go, ...data })
  w.go = () => { Atomics.store(go, 0, 1); Atomics.notify(go, 0) }
  w.queued = message(w)
  return w
}

t.test('a running thread takes a token freed while the oldest waiter, under the bound, is on its way (the barge)', async t => {
  const s = new Sema(1, { [FAIRNESS]: MINUTE })
  const tok = s.tryAcquire()
  const w = waiter(s, { fairMs: MINUTE })
  t.equal(await w.queued, 'queued')
  await until(() => s.nrWaiting() === 1, 60000, 'the worker to queue')
  s.release(tok)
  t.equal(s.nrWaiting(), 1, 'woken to try again, the waiter still waits: counted while its place is kept')
  t.equal(s.tryAcquire(), tok, 'the token stayed free, and this thread took it (with a strict hand-off it would be the waiter\'s)')
  t.equal(s.tryAcquire(), undefined, 'never more than nr')
  // The waiter now tries, finds the token taken, and queues again in its
  // place; the next release wakes it again, and it gets the token.
  const got = message(w)
  w.go()
  await until(() => s.nrWaiting() === 1, 60000, 'the waiter to queue again')
  s.release(tok)
  t.equal(await got, tok, 'the waiter got it on its next wake: nothing lost, nobody stranded')
  t.equal(s.tryAcquire(), undefined, 'held by the waiter')
  await w.terminate()
  t.equal(s.tryAcquire(), tok, 'and back when the waiter\'s thread ended')
})

t.test('a waiter queued past the bound is handed the released token: a running thread cannot take it', async t => {
  const s = new Sema(1)
  const tok = s.tryAcquire()
  const w = waiter(s, {})
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
  t.equal(s.tryAcquire(), tok)
})

t.test('a free token while a waiter past the bound is queued goes to that waiter, not to a newcomer', async t => {
  const s = new Sema(2)
  const a = s.tryAcquire()
  const b = s.tryAcquire()
  const w = waiter(s, {})
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
})

t.test('waiters past the bound are served in arrival order, across threads, while this thread keeps trying to barge', async t => {
  const s = new Sema(1)
  const tok = s.tryAcquire()
  const order = new Int32Array(new SharedArrayBuffer(4 * 5))
  const ws = []
  for (let k = 1; k <= 4; k++) {
    const w = waiter(s, { order, k, release: true })
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
    const served = Atomics.load(order, 0)
    if (s.tryAcquire() !== undefined) {
      if (served < 4) barged++
      s.release()
    }
    return served === 4
  }, 60000, 'every waiter to be served')
  t.same(Array.from(order.subarray(1)), [1, 2, 3, 4], 'served in the order they queued')
  t.equal(barged, 0, 'no try took a token while a waiter past the bound was queued')
  await Promise.all(ws.map(w => w.terminate()))
  t.equal(s.nrWaiting(), 0)
  t.equal(s.tryAcquire(), 0, 'every token back')
})

t.test('a young waiter woken to try again whose thread ends passes the wake on', async t => {
  const s = new Sema(1, { [FAIRNESS]: MINUTE })
  const tok = s.tryAcquire()
  const w1 = waiter(s, { fairMs: MINUTE })
  await w1.queued
  await until(() => s.nrWaiting() === 1, 60000, 'the first worker to queue')
  const w2 = waiter(s, { fairMs: MINUTE })
  await w2.queued
  await until(() => s.nrWaiting() === 2, 60000, 'the second worker to queue')
  s.release(tok) // wakes w1 to try again: its loop is held up
  t.equal(s.nrWaiting(), 2, 'w1, woken to try again, still counts')
  await w1.terminate() // ... and never will: the wake goes on to w2
  const got = message(w2)
  w2.go()
  t.equal(await got, tok, 'the second waiter got the token')
  await w2.terminate()
  t.equal(s.tryAcquire(), tok)
})

t.test('a young waiter aborted while its wake to try again is on its way rejects, and passes the wake on', async t => {
  const s = new Sema(1, { [FAIRNESS]: MINUTE })
  const tok = s.tryAcquire()
  const w1 = waiter(s, { fairMs: MINUTE, abort: true })
  await w1.queued
  await until(() => s.nrWaiting() === 1, 60000, 'the first worker to queue')
  const w2 = waiter(s, { fairMs: MINUTE })
  await w2.queued
  await until(() => s.nrWaiting() === 2, 60000, 'the second worker to queue')
  s.release(tok) // wakes w1 to try again; its loop is held up
  t.equal(s.nrWaiting(), 2, 'w1, woken to try again, still counts')
  const r1 = message(w1)
  w1.go() // it aborts before the wake is delivered
  t.same(await r1, { rejected: 'aborted after the wake' }, 'the abort wins: no token, and no second wait')
  const got = message(w2)
  w2.go()
  t.equal(await got, tok, 'the wake went on to the next waiter')
  t.equal(s.nrWaiting(), 0)
  await Promise.all([w1.terminate(), w2.terminate()])
  t.equal(s.tryAcquire(), tok)
})
