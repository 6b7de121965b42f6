'use strict'
// Letting go on SIGTERM / SIGINT (issue 31), each tier with real processes
// and real signals, the way docs/processes.md and docs/redis.md show:
//   - a space: a process stopped in the middle of its work closes the
//     space; what it held passes on at once (ownerDied: it did not finish);
//   - Redis: letGo(redis) gives back every lock and token held through the
//     client at once, not when their 30 s leases run out;
//   - threads: worker.terminate() on the signal passes a worker's lock on.
const t = require('tap')
const path = require('path')
const { fork } = require('child_process')
const { spaceName, spawn } = require('./space-helpers')
const { redisSuite } = require('./fixtures/redis/suite')
const { openShared } = require('..')
const { Mutex: RedisMutex, Sema: RedisSema } = require('../lib/redis')

t.setTimeout(120000)
const linux = process.platform === 'linux'

t.test('a space: SIGTERM in the middle of the work, the space closed, the lock taken over at once', { skip: !linux && 'shared spaces need Linux' }, async t => {
  for (const signal of ['SIGTERM', 'SIGINT']) {
    const name = spaceName(t)
    const space = openShared(name)
    const lock = space.mutex('job')
    const pool = space.sema('pool', 1)
    const child = spawn(t, name, `
      const lock = space.mutex('job')
      const pool = space.sema('pool', 1)
      lock.lock()
      pool.acquireSync()
      const stop = () => { space.close(); process.exit(0) } // what it held passes on
      process.once('SIGTERM', stop)
      process.once('SIGINT', stop)
      send({ held: true })
      await new Promise(() => {}) // the work, never finished here`)
    await child.message(m => m.held)
    t.equal(lock.tryLock(), false, 'the child holds the lock')
    const sent = performance.now()
    child.kill(signal)
    const got = await lock.lockAsync({ timeout: 10000 })
    const ms = performance.now() - sent
    t.equal(got, true, `${signal}: the lock is taken over`)
    t.ok(ms < 2000, `${signal}: within ${Math.round(ms)} ms of the signal`)
    t.equal(lock.ownerDied, true, 'and the taker is told its holder did not finish')
    lock.unlock()
    t.type(await pool.acquire({ timeout: 2000 }), 'number', 'the token came back too')
    t.same(await child.exited, { code: 0, signal: null }, 'the child exited 0')
    space.close()
  }
})

t.test('threads: SIGTERM terminates the worker, and its lock passes to the main thread', async t => {
  const p = fork(path.join(__dirname, 'fixtures', 'deploy', 'thread-holder.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [] })
  t.teardown(() => { if (p.exitCode === null) p.kill('SIGKILL') })
  await new Promise(resolve => p.once('message', resolve))
  const answer = new Promise(resolve => p.once('message', resolve))
  p.kill('SIGTERM')
  t.same(await answer, { got: true, ownerDied: true })
})

redisSuite(t, async s => {
  s.test('Redis: letGo() on SIGTERM / SIGINT gives the lock and the token back at once, not at lease end', async (t, k) => {
    for (const signal of ['SIGTERM', 'SIGINT']) {
      const p = fork(path.join(__dirname, 'fixtures', 'deploy', 'redis-holder.js'), [s.url, k.prefix + signal, 'letGo'], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [] })
      t.teardown(() => { if (p.exitCode === null) p.kill('SIGKILL') })
      const exited = new Promise(resolve => p.once('exit', (code, sig) => resolve({ code, signal: sig })))
      const messages = []
      p.on('message', m => messages.push(m))
      await s.until(() => messages.some(m => m.held), 'the child holds')
      const r = s.client()
      const lock = new RedisMutex(r, 'job', { prefix: k.prefix + signal })
      const pool = new RedisSema(r, 'pool', 1, { prefix: k.prefix + signal })
      const sent = performance.now()
      const waits = [lock.lockAsync({ timeout: 20000 }), pool.acquire({ timeout: 20000 })]
      await s.tick(50) // queued behind the child
      p.kill(signal)
      const [fence, token] = await Promise.all(waits)
      const ms = performance.now() - sent
      t.ok(fence > messages.find(m => m.held).held.fence, `${signal}: the lock, with a larger fence`)
      t.equal(token, 0, `${signal}: the token`)
      t.ok(ms < 3000, `${signal}: within ${Math.round(ms)} ms of the signal, not the 30 s lease`)
      t.same(await exited, { code: 0, signal: null }, 'the child exited 0')
      const bye = messages.find(m => m.signal)
      t.same(bye, { signal, released: 2, lost: true }, 'letGo gave back 2 leases; the holder\'s `lost` signal aborted')
      await lock.unlock()
      await pool.release(token)
    }
  })
})
