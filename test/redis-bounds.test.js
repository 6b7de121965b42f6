'use strict'
// sabsync/redis scripts do bounded work per call: 20,000 holders of a Sema
// die (SIGKILL), their leases run out, and the calls that reap them never
// block the server for long (SLOWLOG records every script's time: none
// reaches 50 ms), however much piled up; likewise 20,000 waiters of a
// Mutex whose process died, skipped in front of a live one. A server of
// this file's own (CONFIG SET slowlog-*).
const t = require('tap')
const path = require('path')
const { fork } = require('child_process')
const { redisSuite, until } = require('./fixtures/redis/suite')
const { queuedMs } = require('./fixtures/run-queue')
const { Mutex, Sema } = require('../lib/redis')
const { BATCH, WAITERS } = require('../lib/redis/scripts')

const NR = 20000
const LEASE = 1000

redisSuite(t, async s => {
  const { client, admin } = s

  // How long the server's main thread (the one that runs commands) has
  // waited, runnable, for a CPU (µs).
  async function serverQueuedUs () {
    return queuedMs(Number(/^process_id:(\d+)/m.exec(await admin.info('server'))[1])) * 1000
  }

  // Runs fn, and answers how many script calls the server ran meanwhile
  // (INFO commandstats) and the longest of them (SLOWLOG, which records
  // every call of 1 ms or more, and the calls inside a script too), less
  // the time the server waited for a CPU meanwhile (queuedUs): a script
  // the kernel stopped for a busier process did not take that time to do
  // its work. On a quiet machine nothing is taken out.
  async function scriptCalls (t, fn) {
    await admin.config('SET', 'slowlog-log-slower-than', '1000')
    await admin.config('SET', 'slowlog-max-len', '100000')
    t.teardown(() => admin.config('SET', 'slowlog-log-slower-than', '10000'))
    await admin.slowlog('RESET')
    await admin.config('RESETSTAT')
    const q0 = await serverQueuedUs()
    await fn()
    const queuedUs = await serverQueuedUs() - q0
    const stats = await admin.info('commandstats')
    const log = await admin.slowlog('GET', 100000)
    await admin.config('SET', 'slowlog-log-slower-than', '10000')
    const calls = [...stats.matchAll(/^cmdstat_eval(?:sha)?:calls=(\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0)
    // [id, time, µs, [command, ...args], ...]
    const slowest = Math.max(0, ...log.filter(e => /^eval/i.test(String(e[3][0]))).map(e => e[2]))
    return { calls, longest: Math.max(0, slowest - queuedUs), slowest, queuedUs }
  }
  const blocked = r => `no script call blocked the server 50 ms: the slowest took ${(r.slowest / 1000).toFixed(1)} ms, ` +
    `${(r.longest / 1000).toFixed(1)} ms less the ${(r.queuedUs / 1000).toFixed(1)} ms the server waited for a CPU during the run`

  s.test(`${NR} dead Sema holders are reaped ${BATCH} a call, no script blocking the server 50 ms`, async (t, { prefix }) => {
    const tag = `{${prefix}:sema:big}`
    const child = fork(path.join(__dirname, 'fixtures', 'redis', 'sema-holders.js'), [s.url, 'big', prefix, String(NR), String(LEASE)],
      { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [] })
    t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })
    const held = await new Promise((resolve, reject) => {
      child.on('message', m => m.op === 'held' ? resolve(m) : reject(new Error(m.message)))
      child.on('exit', code => reject(new Error('the holders\' process exited with ' + code)))
    })
    t.equal(held.n, NR, `a process holds all ${NR} tokens (taken in ${Math.round(held.ms)} ms)`)
    child.kill('SIGKILL')
    t.equal(await admin.zcard(tag + ':l'), NR, 'and dies holding them')
    // Until every lease has run out on the server's clock.
    await until(async () => {
      const [[, last], [sec, us]] = [await admin.zrange(tag + ':l', -1, -1, 'WITHSCORES'), await admin.time()]
      return Number(last) < Number(sec) * 1000 + Number(us) / 1000
    }, 'the dead holders\' leases to run out', 30000)

    const sema = new Sema(client(), 'big', NR, { prefix })
    let token
    let calls = 0
    const r = await scriptCalls(t, async () => {
      token = await sema.tryAcquire()
      calls = 1
      while (await admin.zcard(tag + ':l') > 1) {
        await sema.nrWaiting() // each call reaps up to BATCH
        calls++
        if (calls > 2 * NR / BATCH + 10) break
      }
    })
    t.type(token, 'number', 'the first call after the leases end gets a token at once')
    t.equal(await admin.zcard(tag + ':l'), 1, `every dead holder reaped, in ${calls} calls`)
    t.ok(calls >= NR / BATCH, `no call reaped more than ${BATCH}`)
    t.ok(r.calls >= calls, `the server ran ${r.calls} script calls`)
    t.ok(r.longest < 50000, blocked(r))
    t.equal(await admin.hget(tag + ':m', 'held'), '1', 'the state counts one holder')
    t.equal(await admin.llen(tag + ':f'), NR - 1, 'and the other slots free')
    const second = await sema.tryAcquire()
    t.ok(second !== token && second >= 0 && second < NR, 'a second token, another slot')
    await sema.release(second)
    await sema.release(token)
    t.equal(await admin.exists(tag + ':m', tag + ':l', tag + ':f'), 0, 'idle again: nothing left')
  })

  s.test(`${NR} dead waiters of a Mutex are skipped ${WAITERS} a call; the live one behind them gets the lock`, async (t, { prefix }) => {
    const tag = `{${prefix}:mutex:queue}`
    const [a, b] = [client(), client()]
    const holder = new Mutex(a, 'queue', { prefix, lease: 60000 })
    await holder.lockAsync()
    const child = fork(path.join(__dirname, 'fixtures', 'redis', 'dead-waiters.js'), [s.url, 'queue', prefix, String(NR), '300'],
      { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [] })
    t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })
    const queued = await new Promise((resolve, reject) => {
      child.on('message', m => m.op === 'queued' ? resolve(m) : reject(new Error(m.message)))
      child.on('exit', code => reject(new Error('the waiters\' process exited with ' + code)))
    })
    t.equal(queued.n, NR, `a process queues ${NR} waiters (in ${Math.round(queued.ms)} ms)`)
    child.kill('SIGKILL')
    const live = new Mutex(b, 'queue', { prefix, heartbeat: 300 })
    const waiting = live.lockAsync()
    await until(async () => (await admin.zcard(tag + ':q')) === NR + 1, 'the live waiter to queue behind them')
    await s.tick(400) // the dead client's heartbeat (300 ms) runs out

    let fence
    const r = await scriptCalls(t, async () => {
      t.equal(await holder.unlock(), true)
      fence = await waiting
    })
    t.type(fence, 'number', 'the live waiter is granted')
    t.ok(r.calls >= NR / WAITERS, `by ${r.calls} script calls (the release, then the live waiter's heartbeats)`)
    t.ok(r.longest < 50000, blocked(r))
    t.equal(await admin.exists(tag + ':q', tag + ':b'), 0, 'the queue is gone')
    t.equal(await live.unlock(), true)
  })
}, { own: true })
