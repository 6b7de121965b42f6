#!/usr/bin/env node
'use strict'
// A free request on Redis: the Web Locks LockManager against the Mutex,
// one client, one name, taken and given back. Per pair: the commands the
// client sent (round trips, bench/support/redis-count.js), the calls the
// server ran (INFO's total_commands_processed: scripts' calls included),
// the server's time in scripts (INFO commandstats), and the time, in
// passes that take turns (the order reversed each pass).
//
//   SABSYNC_REDIS_URL=redis://127.0.0.1:6379 node bench/redis-locks.js [passes] [ops]
//
// Subjects: Mutex tryLock()+unlock(); the Redis backend's request() +
// release() (what the front calls); LockManager.request(name, cb) (the
// spec's front on top: the callback runs, then the release).
const { sent } = require('./support/redis-count')
const Redis = require('ioredis')
const { Mutex, LockManager } = require('../lib/redis')
const { RedisLockBackend } = require('../lib/redis/locks')

const url = process.env.SABSYNC_REDIS_URL || 'redis://127.0.0.1:6379'
const passes = Number(process.argv[2] || 20)
const ops = Number(process.argv[3] || 200)

async function main () {
  const redis = new Redis(url)
  const admin = new Redis(url)
  const prefix = `bench-locks-${process.pid}`
  const mutex = new Mutex(redis, 'free', { prefix })
  const backend = new RedisLockBackend(redis, prefix)
  const locks = new LockManager(redis, prefix + 'f')
  const subjects = {
    'Mutex tryLock+unlock': async () => { await mutex.tryLock(); await mutex.unlock() },
    'locks backend request+release': async () => { await backend.release(await backend.request('free', true, 0)) },
    'LockManager.request(name, cb)': () => locks.request('free', () => {})
  }
  // The server's time in scripts (EVALSHA, EVAL), µs: INFO commandstats.
  const scriptUs = async () => {
    const info = await admin.info('commandstats')
    let us = 0
    for (const m of info.matchAll(/^cmdstat_(?:evalsha|eval):calls=\d+,usec=(\d+),/gm)) us += Number(m[1])
    return us
  }
  const serverCalls = async () => Number(/total_commands_processed:(\d+)/.exec(await admin.info('stats'))[1])
  const times = Object.fromEntries(Object.keys(subjects).map(k => [k, []]))
  const counts = {}
  for (const [name, fn] of Object.entries(subjects)) {
    for (let i = 0; i < 50; i++) await fn() // warm: scripts loaded, eviction checked
    const u0 = await scriptUs()
    const s0 = await serverCalls()
    const c0 = sent()
    for (let i = 0; i < ops; i++) await fn()
    const c1 = sent()
    const s1 = await serverCalls()
    const u1 = await scriptUs()
    // The second INFO is counted by the server before it answers.
    counts[name] = { sent: (c1 - c0) / ops, server: (s1 - s0 - 1) / ops, us: (u1 - u0) / ops }
  }
  const order = Object.keys(subjects)
  for (let p = 0; p < passes; p++) {
    for (const name of p % 2 ? [...order].reverse() : order) {
      const fn = subjects[name]
      const t0 = performance.now()
      for (let i = 0; i < ops; i++) await fn()
      times[name].push((performance.now() - t0) * 1000 / ops)
    }
  }
  const median = a => [...a].sort((x, y) => x - y)[a.length >> 1]
  const t0 = performance.now()
  for (let i = 0; i < ops; i++) await admin.ping()
  const ping = (performance.now() - t0) * 1000 / ops
  console.log(`${passes} passes × ${ops} pairs, one client, ${url}; PING ${ping.toFixed(1)} µs`)
  console.log('| subject | round trips a pair | server calls a pair (scripts\' included) | server µs a pair (scripts) | median µs a pair | range of passes |')
  console.log('|---|---|---|---|---|---|')
  for (const name of order) {
    const ts = times[name]
    console.log(`| ${name} | ${counts[name].sent} | ${counts[name].server.toFixed(1)} | ${counts[name].us.toFixed(1)} | ${median(ts).toFixed(1)} | ${Math.min(...ts).toFixed(1)}–${Math.max(...ts).toFixed(1)} |`)
  }
  // Hand-off between two clients (two machines): one holds, the other
  // waits; from the release sent to the waiter's grant in hand: the
  // release, the grant's PUBLISH, then the waiter's round trip that reads
  // the grant (the Mutex's beat, the locks' sync).
  const r2 = new Redis(url)
  const m2 = new Mutex(r2, 'hand', { prefix })
  const m1 = new Mutex(redis, 'hand', { prefix })
  const b2 = new RedisLockBackend(r2, prefix)
  const hands = { 'Mutex hand-off': [], 'locks hand-off': [] }
  for (let i = 0; i < passes * 5; i++) {
    await m1.lockAsync()
    const waiting = m2.lockAsync()
    while ((await m1.nrWaiting()) === 0) await new Promise(resolve => setTimeout(resolve, 1))
    let t0 = performance.now()
    await m1.unlock()
    await waiting
    hands['Mutex hand-off'].push((performance.now() - t0) * 1000)
    await m2.unlock()
    const held = await backend.request('hand', true, 0)
    const p = await b2.request('hand', true, 0)
    t0 = performance.now()
    const released = backend.release(held)
    const ticket = await p.promise
    hands['locks hand-off'].push((performance.now() - t0) * 1000)
    await released
    await b2.release(ticket)
  }
  for (const [name, ts] of Object.entries(hands)) {
    console.log(`| ${name}: release sent to the waiter's grant | | | | ${median(ts).toFixed(1)} | ${Math.min(...ts).toFixed(1)}–${Math.max(...ts).toFixed(1)} |`)
  }
  await b2.close()
  r2.disconnect()
  await backend.close()
  await locks.close()
  const keys = await admin.keys(`*${prefix}*`)
  if (keys.length > 0) await admin.del(...keys)
  redis.disconnect()
  admin.disconnect()
}

main().catch(err => { console.error(err); process.exit(1) })
