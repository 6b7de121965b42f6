'use strict'
// Deadlocks in a space (lib/inspect.js, lib/inside.js): two processes, and
// two worker threads of one process, each holding one mutex and waiting
// for the other's (ABBA), reported naming both by space.inspect(), by
// `sabsync inspect` (exit code 5) and on the sabsync:deadlock channel
// within a second of waiting; an RWLock writer waiting for a reader that
// waits for a mutex the writer holds; and no report for a plain wait.
const t = require('tap')
const path = require('path')
const { spawnSync } = require('child_process')
const { Worker } = require('worker_threads')
const sabsync = require('..')
const { spaceName, spawn, seen } = require('./space-helpers')

const root = path.join(__dirname, '..')
const bin = path.join(root, 'bin', 'sabsync.js')

// Locks `first`, says so, waits for the word, then locks `second` with a
// timeout of `ms` (which ends the deadlock), reporting what the
// sabsync:deadlock channel told it meanwhile.
const abba = (first, second, ms) => `
  const dc = require('diagnostics_channel')
  const told = []
  dc.subscribe('sabsync:deadlock', m => told.push(m))
  space.mutex(${JSON.stringify(first)}).lock()
  send('holding')
  await next()
  const got = space.mutex(${JSON.stringify(second)}).lock(${ms})
  return { got, told }
`

t.test('two processes, ABBA: inspect(), the command and the channel name both', async t => {
  const name = spaceName(t)
  const space = sabsync.openShared(name)
  t.teardown(() => space.close())
  // The first's timeout ends the cycle, and the command must see it first:
  // eight seconds leave room for a node that starts slowly on a loaded
  // machine (at four, CI's uv build once saw exit code 0).
  const p1 = spawn(t, name, abba('A', 'B', 8000))
  const p2 = spawn(t, name, abba('B', 'A', 12000))
  await Promise.all([p1.message(m => m === 'holding'), p2.message(m => m === 'holding')])
  p1.send('go')
  p2.send('go')
  const snap = await seen(t, () => {
    const s = space.inspect()
    return s.deadlocks.length > 0 ? s : null
  }, 'inspect() finds the cycle')
  t.equal(snap.deadlocks.length, 1, 'one cycle')
  const parties = snap.deadlocks[0].parties.map(p => ({ pid: p.pid, holds: p.holds, waitsFor: p.waitsFor.key })).sort((a, b) => a.pid - b.pid)
  t.same(parties, [
    { pid: p1.pid, holds: ['A'], waitsFor: 'B' },
    { pid: p2.pid, holds: ['B'], waitsFor: 'A' }
  ].sort((a, b) => a.pid - b.pid), 'each party: what it holds, what it waits for')

  const r = spawnSync(process.execPath, [bin, 'inspect', name], { encoding: 'utf8' })
  t.equal(r.status, 5, 'sabsync inspect: exit code 5')
  t.match(r.stdout, /DEADLOCK: a cycle of waits/)
  t.match(r.stdout, new RegExp(`pid ${p1.pid} thread 0 holds "A", waits for mutex "B"`))
  t.match(r.stdout, new RegExp(`pid ${p2.pid} thread 0 holds "B", waits for mutex "A"`))

  const [d1, d2] = await Promise.all([p1.done, p2.done])
  t.equal(d1.got, false, 'the first times out, which ends the deadlock')
  t.equal(d2.got, true, 'and the other gets its lock')
  const told = [...d1.told, ...d2.told]
  t.ok(d1.told.length === 1, 'the channel told the first process, while it waited')
  t.ok(told.length >= 1)
  const m = d1.told[0]
  t.equal(m.tier, 'space')
  t.equal(m.space, name)
  t.same(m.parties.map(p => p.pid).sort(), [p1.pid, p2.pid].sort(), 'naming both processes')
  t.same(space.inspect().deadlocks, [], 'no cycle once it ended')
})

t.test('two worker threads of one process, ABBA with lockAsync, seen on the channel', async t => {
  const name = spaceName(t)
  const workers = ['A', 'B'].map((first, i) => new Worker(`
    const { parentPort, workerData } = require('worker_threads')
    const dc = require('diagnostics_channel')
    const sabsync = require(${JSON.stringify(root)})
    const space = sabsync.openShared(workerData.name)
    const told = []
    dc.subscribe('sabsync:deadlock', m => told.push(m))
    space.mutex(workerData.first).lock()
    parentPort.postMessage('holding')
    parentPort.once('message', async () => {
      const got = await space.mutex(workerData.second).lockAsync({ timeout: workerData.ms })
      parentPort.postMessage({ got, told })
      space.close()
    })
  `, { eval: true, workerData: { name, first, second: first === 'A' ? 'B' : 'A', ms: 3000 + i * 3000 } }))
  t.teardown(() => Promise.all(workers.map(w => w.terminate())))
  const ids = workers.map(w => w.threadId) // -1 once a worker has ended
  await Promise.all(workers.map(w => new Promise(resolve => w.once('message', resolve))))
  const results = workers.map(w => new Promise(resolve => w.once('message', resolve)))
  for (const w of workers) w.postMessage('go')
  const [r1] = await Promise.all(results)
  t.equal(r1.got, false, 'the first times out')
  t.equal(r1.told.length, 1, 'after the channel told it of the cycle')
  const parties = r1.told[0].parties
  t.same(parties.map(p => p.pid), [process.pid, process.pid], 'both parties are threads of this process')
  t.same(parties.map(p => p.threadId).sort(), ids.sort(), 'named by their threadIds')
})

t.test('an RWLock writer waiting for a reader that waits for the writer\'s mutex', async t => {
  const name = spaceName(t)
  const space = sabsync.openShared(name)
  t.teardown(() => space.close())
  const reader = spawn(t, name, `
    space.rwlock('config').readLock()
    send('reading')
    await next()
    return space.mutex('m').lock(3000)
  `)
  await reader.message(m => m === 'reading')
  const m = space.mutex('m')
  m.lock()
  reader.send('go')
  const writing = space.rwlock('config').writeLockAsync({ timeout: 6000 })
  const snap = await seen(t, () => {
    const s = space.inspect()
    return s.deadlocks.length > 0 ? s : null
  }, 'the cycle through the rwlock is found')
  const byPid = Object.fromEntries(snap.deadlocks[0].parties.map(p => [p.pid, p]))
  t.same(byPid[process.pid].waitsFor, { key: 'config', kind: 'rwlock' }, 'the writer waits for the rwlock')
  t.same(byPid[process.pid].holds.sort(), ['config', 'm'], 'it holds m, and config against other writers while it drains the readers')
  t.same(byPid[reader.pid].holds, ['config'], 'the reader holds a read lock')
  t.same(byPid[reader.pid].waitsFor, { key: 'm', kind: 'mutex' })
  t.equal(await reader.done, false, 'the reader times out')
  t.equal(await writing, true, 'then the writer gets in')
  space.rwlock('config').writeUnlock()
  m.unlock()
})

t.test('two processes, ABBA on the space\'s named locks alone: inspect() and the channel name both', async t => {
  const name = spaceName(t)
  const space = sabsync.openShared(name)
  t.teardown(() => space.close())
  const named = (first, second, ms) => `
    const dc = require('diagnostics_channel')
    const told = []
    dc.subscribe('sabsync:deadlock', m => told.push(m))
    let release
    await new Promise(resolve => space.locks.request(${JSON.stringify(first)}, () => { resolve(); return new Promise(r => { release = r }) }))
    send('holding')
    await next()
    const got = await space.locks.request(${JSON.stringify(second)}, { signal: AbortSignal.timeout(${ms}) }, () => true).catch(e => e.name)
    release()
    return { got, told }
  `
  const p1 = spawn(t, name, named('x', 'y', 3000))
  const p2 = spawn(t, name, named('y', 'x', 8000))
  await Promise.all([p1.message(m => m === 'holding'), p2.message(m => m === 'holding')])
  p1.send('go')
  p2.send('go')
  const snap = await seen(t, () => {
    const s = space.inspect()
    return s.deadlocks.length > 0 ? s : null
  }, 'inspect() finds the cycle')
  t.same(snap.deadlocks[0].parties.map(p => ({ pid: p.pid, holds: p.holds, waitsFor: p.waitsFor })).sort((a, b) => a.pid - b.pid), [
    { pid: p1.pid, holds: ['x'], waitsFor: { key: 'y', kind: 'locks' } },
    { pid: p2.pid, holds: ['y'], waitsFor: { key: 'x', kind: 'locks' } }
  ].sort((a, b) => a.pid - b.pid), 'each party: the name it holds, the name it waits for')
  const [d1, d2] = await Promise.all([p1.done, p2.done])
  t.equal(d1.got, 'TimeoutError', 'the first gives up')
  t.equal(d2.got, true, 'the other is granted')
  t.equal(d1.told.length, 1, 'the channel told the first process, from its request\'s looks')
  t.match(d1.told[0], { tier: 'space', space: name })
  t.same(d1.told[0].parties.map(p => p.pid).sort(), [p1.pid, p2.pid].sort(), 'naming both processes')
})

t.test('a plain wait is no deadlock', async t => {
  const name = spaceName(t)
  const space = sabsync.openShared(name)
  t.teardown(() => space.close())
  const holder = spawn(t, name, 'space.mutex(\'m\').lock(); send(\'holding\'); await next()')
  await holder.message(m => m === 'holding')
  const waiting = space.mutex('m').lockAsync({ timeout: 10000 })
  await seen(t, () => space.mutex('m').nrWaiting() === 1, 'queued')
  t.same(space.inspect().deadlocks, [])
  t.equal(spawnSync(process.execPath, [bin, 'inspect', name], { encoding: 'utf8' }).status, 0, 'exit code 0')
  holder.send('go')
  t.equal(await waiting, true)
  space.mutex('m').unlock()
})
