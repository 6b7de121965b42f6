'use strict'
// sabsync/redis scripts do bounded work per call: 20,000 holders of a Sema
// die (SIGKILL), their leases run out, and the calls that reap them never
// block the server for long (SLOWLOG records every script's time: none
// reaches 50 ms), however much piled up. A server of this file's own
// (CONFIG SET slowlog-*).
const t = require('tap')
const path = require('path')
const { fork } = require('child_process')
const { redisSuite, until } = require('./fixtures/redis/suite')
const { Sema } = require('../lib/redis')
const { BATCH } = require('../lib/redis/scripts')

const NR = 20000
const LEASE = 1000

redisSuite(t, async s => {
  const { client, admin } = s

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

    await admin.config('SET', 'slowlog-log-slower-than', '0')
    await admin.config('SET', 'slowlog-max-len', '10000')
    t.teardown(() => admin.config('SET', 'slowlog-log-slower-than', '10000'))
    await admin.slowlog('RESET')
    const sema = new Sema(client(), 'big', NR, { prefix })
    const token = await sema.tryAcquire()
    t.type(token, 'number', 'the first call after the leases end gets a token at once')
    let calls = 1
    while (await admin.zcard(tag + ':l') > 1) {
      await sema.nrWaiting() // each call reaps up to BATCH
      calls++
      if (calls > 2 * NR / BATCH + 10) break
    }
    const log = await admin.slowlog('GET', 10000)
    await admin.config('SET', 'slowlog-log-slower-than', '10000')
    // [id, time, µs, [command, ...args], ...]
    const scripts = log.filter(e => /^eval/i.test(String(e[3][0])))
    const longest = Math.max(...scripts.map(e => e[2]))
    t.equal(await admin.zcard(tag + ':l'), 1, `every dead holder reaped, in ${calls} calls`)
    t.ok(calls >= NR / BATCH, `no call reaped more than ${BATCH}`)
    t.ok(scripts.length >= calls, `SLOWLOG recorded ${scripts.length} script calls`)
    t.ok(longest < 50000, `the longest script call blocked the server ${(longest / 1000).toFixed(1)} ms (< 50)`)
    t.equal(await admin.hget(tag + ':m', 'held'), '1', 'the state counts one holder')
    t.equal(await admin.llen(tag + ':f'), NR - 1, 'and the other slots free')
    const second = await sema.tryAcquire()
    t.ok(second !== token && second >= 0 && second < NR, 'a second token, another slot')
    await sema.release(second)
    await sema.release(token)
    t.equal(await admin.exists(tag + ':m', tag + ':l', tag + ':f'), 0, 'idle again: nothing left')
  })
}, { own: true })
