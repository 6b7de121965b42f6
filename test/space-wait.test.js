'use strict'
// wait / waitAsync / notify / waiters on the cells of a shared space, across
// processes (and threads in them): exact counts, BigInt64 cells, timeouts and
// aborts. FIFO order and waiters killed with SIGKILL: space-wait-order.test.js.
const t = require('tap')

// Real processes, each starting Node and opening the space: seconds apiece
// on a loaded machine, so past the suite's 120 s for a file there.
t.setTimeout(600000)
const { openShared, wait, waitAsync, notify, waiters } = require('..')
const { spaceName, spawn } = require('./space-helpers')
const { until, fixtureSource } = require('./helpers')

// A child whose main thread waits asynchronously and whose worker thread
// blocks, both on cells[0] while it holds 0; each reports its result.
const waitBoth = `
  const cells = space.int32Array('cells', 4)
  const w = new Worker(${JSON.stringify(fixtureSource('space-wait/waiter'))}, { eval: true, workerData: { root, name: space.name } })
  const fromWorker = new Promise(resolve => w.once('message', resolve))
  const r = sabsync.waitAsync(cells, 0, 0, 60000)
  const mine = r.async ? await r.value : r.value
  return [mine, await fromWorker]`

t.test('notify wakes exactly count waiters across processes and threads', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const cells = space.int32Array('cells', 4)
  const kids = [spawn(t, name, waitBoth), spawn(t, name, waitBoth)]
  await until(() => waiters(cells, 0) === 4, 60000, 'four waiters')
  t.equal(notify(cells, 0, 3), 3, 'three of four')
  await until(() => waiters(cells, 0) === 1, 60000, 'one left')
  t.equal(notify(cells, 0, 5), 1, 'the last one')
  t.equal(notify(cells, 0), 0, 'nobody left')
  const results = (await Promise.all(kids.map(k => k.done))).flat()
  t.same(results, ['ok', 'ok', 'ok', 'ok'])
})

t.test('BigInt64 cells, timeouts, not-equal, and an abort', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const big = space.bigInt64Array('big', 2)
  const cells = space.int32Array('cells', 4)
  const kid = spawn(t, name, `
    const big = space.bigInt64Array('big', 2)
    return sabsync.wait(big, 1, 5n, 60000)`)
  big[1] = 5n
  await until(() => waiters(big, 1) === 1, 60000, 'the child waits')
  big[1] = 6n
  t.equal(notify(big, 1), 1)
  t.equal(await kid.done, 'ok')
  t.equal(wait(cells, 0, 1, 10), 'not-equal')
  t.equal(wait(cells, 0, 0, 10), 'timed-out')
  t.same(waitAsync(cells, 0, 1), { async: false, value: 'not-equal' })
  t.equal(await waitAsync(cells, 0, 0, 5).value, 'timed-out')
  const ac = new AbortController()
  const r = waitAsync(cells, 0, 0, Infinity, { signal: ac.signal })
  t.equal(waiters(cells, 0), 1)
  ac.abort(new Error('stop'))
  await t.rejects(r.value, { message: 'stop' })
  t.equal(waiters(cells, 0), 0, 'the aborted waiter left the queue')
  t.throws(() => wait(cells, 4, 0), RangeError, 'index checked as for a SharedArrayBuffer')
})

t.test('a notify finds the waiters of every cell: the bucket counter JS reads is the one a waiter raises (the addon\'s hash)', async t => {
  const space = openShared(spaceName(t))
  t.teardown(() => space.close())
  const cells = space.int32Array('many', 1024)
  for (let i = 0; i < 1024; i += 37) {
    const r = waitAsync(cells, i, 0, 60000)
    t.equal(r.async, true)
    if (notify(cells, i, 1) !== 1) t.fail(`cell ${i}: the notify skipped its waiter`)
    t.equal(await r.value, 'ok')
  }
  t.equal(waiters(cells, 0), 0)
})
