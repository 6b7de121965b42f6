'use strict'
// wait / waitAsync / notify on the cells of a shared space, across
// processes: FIFO order, and waiters killed with SIGKILL (the slow half of
// test/space-wait.test.js: many processes apiece; npm run test:all).
const t = require('tap')

// Real processes, each starting Node and opening the space: seconds apiece
// on a loaded machine, so past the suite's 120 s for a file there.
t.setTimeout(600000)
const { openShared, notify, waiters } = require('..')
const { spaceName, spawn } = require('./space-helpers')
const { until } = require('./helpers')

t.test('waiters are woken in arrival order across processes (FIFO)', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const cells = space.int32Array('cells', 4)
  // Started side by side (a process takes a while to start); each queues
  // when told to, one after the other.
  const kids = [0, 1, 2, 3].map(k => spawn(t, name, `
      const cells = space.int32Array('cells', 4)
      await next()
      const r = ${k % 2 === 0}
        ? sabsync.wait(cells, 0, 0, 60000)
        : await sabsync.waitAsync(cells, 0, 0, 60000).value
      return [r, Atomics.add(cells, 1, 1)]`))
  for (let k = 0; k < 4; k++) {
    kids[k].send('go')
    await until(() => waiters(cells, 0) === k + 1, 60000, `waiter ${k}`)
  }
  for (let k = 0; k < 4; k++) {
    t.equal(notify(cells, 0, 1), 1)
    t.same(await kids[k].done, ['ok', k], `process ${k} woke ${k}th`)
  }
})

t.test('a waiter killed with SIGKILL is not counted, and its wake is not lost', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const cells = space.int32Array('cells', 4)
  const body = `
    const cells = space.int32Array('cells', 4)
    await next()
    return sabsync.wait(cells, 0, 0, 60000)`
  for (let round = 0; round < 2; round++) {
    const doomed = spawn(t, name, body)
    const survivor = spawn(t, name, body)
    doomed.send('go')
    await until(() => waiters(cells, 0) === 1, 60000, 'the doomed waiter')
    survivor.send('go')
    await until(() => waiters(cells, 0) === 2, 60000, 'two waiters')
    doomed.kill('SIGKILL')
    await doomed.exited
    t.equal(notify(cells, 0, 1), 1, 'the live waiter counted, the dead one not')
    t.equal(await survivor.done, 'ok')
    t.equal(waiters(cells, 0), 0)
  }
  // Killed as soon as it is queued (it may still be spinning before it sleeps).
  const early = spawn(t, name, body)
  early.send('go')
  await until(() => waiters(cells, 0) === 1, 60000, 'queued')
  early.kill('SIGKILL')
  await early.exited
  t.equal(waiters(cells, 0), 0, 'gone from the queue')
  t.equal(notify(cells, 0), 0)
})
