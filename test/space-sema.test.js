'use strict'
// Sema and RateLimit in a shared space, across processes: never more than
// nr holders, arrival order, tokens of a holder killed with SIGKILL coming
// back as recovered, and a rate never exceeded in any window across 4
// processes.
const t = require('tap')

// Real processes, each starting Node and opening the space: seconds apiece
// on a loaded machine, so past the suite's 120 s for a file there.
t.setTimeout(600000)
const { openShared } = require('..')
const { spaceName, spawn } = require('./space-helpers')
const { until, fixtureSource } = require('./helpers')

t.test('never more than nr holders across processes and threads', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const cells = space.int32Array('cells', 4)
  const K = 150
  const body = `
    const cells = space.int32Array('cells', 4)
    const pool = space.sema('pool', 2)
    const inside = () => {
      const n = Atomics.add(cells, 0, 1) + 1
      for (let seen = Atomics.load(cells, 1); n > seen && Atomics.compareExchange(cells, 1, seen, n) !== seen;) seen = Atomics.load(cells, 1)
    }
    const w = new Worker(${JSON.stringify(fixtureSource('space-sema/holder'))}, { eval: true, workerData: { root, name: space.name, K: ${K} } })
    const exited = new Promise(resolve => w.once('exit', resolve))
    for (let i = 0; i < ${K}; i++) {
      const tok = await pool.acquire()
      inside()
      await new Promise(resolve => setImmediate(resolve))
      Atomics.sub(cells, 0, 1)
      Atomics.add(cells, 2, 1)
      pool.release(tok)
    }
    await exited`
  const kids = [spawn(t, name, body), spawn(t, name, body), spawn(t, name, body)]
  await Promise.all(kids.map(k => k.done))
  await Promise.all(kids.map(k => k.exited)) // their threads ended: nothing of theirs waits
  t.equal(cells[2], 3 * 2 * K, 'every acquire was served')
  t.ok(cells[1] >= 1 && cells[1] <= 2, `at most 2 holders at once (saw ${cells[1]})`)
  const pool = space.sema('pool', 2)
  t.equal(pool.nrWaiting(), 0)
  t.same([pool.tryAcquire(), pool.tryAcquire(), pool.tryAcquire()].sort(), [0, 1, undefined], 'both tokens free')
  pool.release(0)
  pool.release(1)
  t.equal(space.sema('pool', 3).nr, 3, 'another nr is another version of the key (the default)')
})

t.test('waiters of every process are served in arrival order', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const pool = space.sema('pool', 1)
  const mine = pool.acquireSync()
  // Started side by side; each queues when told to, one after the other.
  const kids = [0, 1, 2, 3].map(k => spawn(t, name, `
      const cells = space.int32Array('cells', 4)
      const pool = space.sema('pool', 1)
      await next()
      const tok = ${k % 2 === 0} ? await pool.acquire() : pool.acquireSync()
      const turn = Atomics.add(cells, 0, 1)
      pool.release(tok)
      return turn`))
  for (let k = 0; k < 4; k++) {
    kids[k].send('go')
    await until(() => pool.nrWaiting() === k + 1, 60000, `waiter ${k}`)
  }
  pool.release(mine)
  t.same(await Promise.all(kids.map(k => k.done)), [0, 1, 2, 3])
})

t.test('tokens of a holder killed with SIGKILL come back, recovered', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const pool = space.sema('pool', 2, { initFn: slot => 'conn' + slot })
  const hold = `
    const pool = space.sema('pool', 2)
    pool.acquireSync()
    await pool.acquire()
    send('holding')
    await new Promise(() => setInterval(() => {}, 1000))`
  // A waiter queued here when the holder dies.
  let holder = spawn(t, name, hold)
  await holder.message(m => m === 'holding')
  t.equal(pool.tryAcquire(), undefined, 'both held by the other process')
  const a = pool.acquire()
  const b = pool.acquire({ timeout: 60000 })
  holder.kill('SIGKILL')
  const got = [await a, await b].sort()
  t.same(got, ['conn0', 'conn1'], 'both came back, as this thread\'s values')
  t.ok(pool.recovered('conn0') && pool.recovered('conn1'), 'marked recovered')
  pool.release('conn0')
  pool.release('conn1')
  t.notOk(pool.recovered(), 'nothing held here now')
  // Nobody waiting: a try finds the dead holder's tokens itself.
  holder = spawn(t, name, hold)
  await holder.message(m => m === 'holding')
  holder.kill('SIGKILL')
  await holder.exited
  const tok = pool.tryAcquire()
  t.ok(tok !== undefined && pool.recovered(tok), 'a try got one back at once')
  pool.release(tok)
  t.throws(() => pool.release(tok), { code: 'ERR_SABSYNC_BAD_TOKEN' })
})

t.test('a RateLimit of rps is never exceeded in any window across 4 processes', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const rps = 20
  const unit = 100
  const limit = space.rateLimit('api', rps, { timeUnit: unit })
  t.equal(limit.rps, rps)
  // Without versions a key keeps its rps and unit (by default they are
  // versioned, as a Sema's nr: test/space-versioned.test.js).
  const fixed = openShared(name, { versioned: false })
  fixed.rateLimit('api-fixed', rps, { timeUnit: unit })
  t.throws(() => fixed.rateLimit('api-fixed', rps, { timeUnit: 200 }), { code: 'ERR_SABSYNC_SHARED_MISMATCH' })
  t.throws(() => fixed.rateLimit('api-fixed', rps + 1, { timeUnit: unit }), { code: 'ERR_SABSYNC_SHARED_MISMATCH' })
  fixed.close()
  const body = `
    const limit = space.rateLimit('api', ${rps}, { timeUnit: ${unit} })
    const times = []
    for (let i = 0; i < 15; i++) times.push(i % 3 === 0 ? limit.sync() : await limit())
    return times`
  const kids = [0, 1, 2, 3].map(() => spawn(t, name, body))
  const times = (await Promise.all(kids.map(k => k.done))).flat().sort((x, y) => x - y)
  t.equal(times.length, 60)
  let worst = 0
  for (let i = 0; i + rps < times.length; i++) {
    const span = times[i + rps] - times[i]
    if (worst === 0 || span < worst) worst = span
  }
  t.ok(worst >= unit - 0.001, `any ${rps + 1} grants span at least ${unit} ms (the shortest: ${worst.toFixed(2)} ms)`)
})

// In a space a caller that finds the limiter's turn free, with nobody
// queued for it, is granted without taking the turn (lib/rate-limit.js).
// It must never overtake: while the turn is held by a caller that sleeps
// until its grant is due, a newcomer queues behind it; and a grant taken
// by another process at any moment keeps the window.
t.test('a RateLimit in a space: a caller with nobody ahead is granted at once, a newcomer never overtakes the turn\'s holder', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const unit = 400
  const limit = space.rateLimit('one', 1, { timeUnit: unit })
  const kid = spawn(t, name, `
    const limit = space.rateLimit('one', 1, { timeUnit: ${unit} })
    send('ready')
    await next()
    return limit.sync()`)
  await kid.message(m => m === 'ready')
  const first = await limit() // the turn free, nobody queued: at once
  t.equal(limit.nrWaiting(), 0)
  const second = limit() // holds the turn, sleeps until first + unit
  const third = limit() // queues for the turn
  t.equal(limit.nrWaiting(), 1, 'the newcomer queued for the turn')
  kid.send('go') // joins in whenever it runs: before, between or after these
  const [g2, g3] = await Promise.all([second, third])
  const g4 = await kid.done
  t.ok(g2 - first >= unit - 0.001, `the turn's holder waited out the window (${(g2 - first).toFixed(1)} ms)`)
  t.ok(g3 - g2 >= unit - 0.001, `the newcomer came after it (${(g3 - g2).toFixed(1)} ms)`)
  const all = [first, g2, g3, g4].sort((x, y) => x - y)
  const gaps = all.slice(1).map((g, i) => g - all[i])
  t.ok(gaps.every(d => d >= unit - 0.001), `the other process's grant kept the window too (gaps ${gaps.map(d => d.toFixed(1)).join(', ')} ms)`)
  t.equal(limit.nrWaiting(), 0)
})

// API.md, "RateLimit": timeout 0 and try() in a space, from two processes.
t.test('a RateLimit in a space: timeout 0 and try() grant when the limit has room now, and only then', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const limit = space.rateLimit('try', 3, { timeUnit: 60000 })
  t.type(limit.try(), 'number', 'an idle limiter: try() grants, synchronously')
  t.type(await limit({ timeout: 0 }), 'number', 'room: timeout 0 grants')
  const kid = spawn(t, name, `
    const limit = space.rateLimit('try', 3, { timeUnit: 60000 })
    return [limit.try(), await limit({ timeout: 0 }), limit.try()].map(g => typeof g === 'number' && g > 0)`)
  t.same(await kid.done, [true, false, false], 'another process: the last grant, then undefined')
  t.equal(limit.try(), undefined, 'a full limiter: try() answers undefined')
  t.equal(await limit({ timeout: 0 }), undefined, 'and so does timeout 0')
  t.equal(await limit({ timeout: 30 }), undefined, 'and a timeout shorter than the window')
  t.equal(limit.nrWaiting(), 0, 'nobody queued')
})

t.test('a worker terminated while blocked in a space leaves the queue, and a slot or wake it was handed goes on', async t => {
  // The blocking calls of a space park in the binding's one park loop, as
  // in-process ones do: terminate() ends them within a slice, and a slot
  // handed to the dying thread (a release just before the terminate) is
  // not lost with it.
  const { Worker } = require('worker_threads')
  const sabsync = require('..')
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const pool = space.sema('pool', 1)
  const cells = space.int32Array('cells', 4)
  const root = require('path').join(__dirname, '..')
  const blocked = code => new Worker(`
    const { workerData: { root, name } } = require('worker_threads')
    const sabsync = require(root)
    const space = sabsync.openShared(name)
    const pool = space.sema('pool', 1)
    const cells = space.int32Array('cells', 4)
    ${code}`, { eval: true, workerData: { root, name } }).on('error', err => t.error(err))
  for (let round = 0; round < 6; round++) {
    const mine = pool.acquireSync()
    t.type(mine, 'number')
    const doomed = blocked('pool.acquireSync(); Atomics.add(cells, 1, 1)')
    await until(() => pool.nrWaiting() === 1, 60000, 'the first worker to queue')
    const next = blocked('const tok = pool.acquireSync(); Atomics.add(cells, 2, 1); pool.release(tok)')
    const served = new Promise(resolve => next.once('exit', resolve))
    await until(() => pool.nrWaiting() === 2, 60000, 'the second worker to queue')
    const sleeper = blocked('sabsync.wait(cells, 0, 0)')
    await until(() => sabsync.waiters(cells, 0) === 1, 60000, 'a worker to wait on a cell')
    // Round 0 and even ones: terminated before the release; odd ones: just
    // after it, when the slot may already be the dying worker's.
    if (round % 2 === 1) pool.release(mine)
    const gone = Promise.all([doomed.terminate(), sleeper.terminate()])
    if (round % 2 === 0) pool.release(mine)
    await gone
    await served
    t.equal(Atomics.load(cells, 2), round + 1, `round ${round}: the second worker was served`)
    t.equal(sabsync.waiters(cells, 0), 0, 'the terminated waiter left the cell\'s queue')
    t.equal(pool.nrWaiting(), 0, 'nobody left queued')
  }
  const again = pool.tryAcquire()
  t.type(again, 'number', 'the slot is free again')
  pool.release(again)
})
