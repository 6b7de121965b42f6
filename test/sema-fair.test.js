'use strict'
// The Sema's bounded fairness (src/core/sema.c, F1-F4; docs/threads.md, "Sema"): a
// release whose oldest waiter has waited less than the bound (1 ms) leaves
// the token free and wakes that waiter to try again, so a running thread
// may take the token meanwhile (no convoy when threads outnumber CPUs); a
// waiter queued the bound or longer is handed the token, and nobody takes a
// token past it. Each test fails if the barge is gone (strict hand-off) or
// if the bound is broken (a waiter past it overtaken).
//
// Here, the checks under the bound, in one process: they need a bound of a
// minute (below), which a space's Sema does not take. Those past the bound
// run in every memory, in test/lot.test.js.
//
// The waiters are async acquires on workers whose event loops are held up
// (test/fixtures/lot/sema-waiter.js): a wake to try again waits
// there, so whether a release handed the token over or left it free is
// seen in the memory, whatever the machine's load. Waiting past the bound
// is made certain by sleeping more than it after the waiter queued; being
// under the bound, by a Sema made with a bound of a minute (FAIRNESS, the
// option RateLimit uses for its strict turn).
const t = require('tap')
const { Sema } = require('..')
const { FAIRNESS } = require('../lib/sema')
const { until, fixture, message } = require('./helpers')

const MINUTE = 60000
const place = s => ({ sema: { buffer: s.buffer, byteOffset: s.byteOffset, byteLength: s.byteLength } })

function waiter (s, data) {
  const go = new Int32Array(new SharedArrayBuffer(4))
  const w = fixture('lot/sema-waiter', { place: place(s), go, ...data })
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
