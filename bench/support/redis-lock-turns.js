'use strict'
// Uncontended lock+unlock on Redis, sabsync's Mutex against
// redis-semaphore's, in one process: each subject on a connection of its
// own, rounds of pairs taking turns (the order reversed every round), so
// that a change of the machine's speed falls on all of them; prints each
// subject's median µs a pair, the median of its time over
// redis-semaphore's within a round, this process's CPU time a pair (user
// and system, all threads) while it ran, and the server's: the time INFO
// commandstats adds to the commands the subject sends itself (EVALSHA,
// and redis-semaphore's SET; a script's includes the calls inside it).
//
//   SABSYNC_REDIS_URL=redis://... node bench/support/redis-lock-turns.js [pairs] [rounds]
//
// pairs per subject a round (default 500); rounds (default 30). Subjects:
// sabsync (this tree), script (sabsync's two scripts for a free lock sent
// as bare EVALSHA with the same key and arguments: against sabsync, what
// its JavaScript costs), lease (./lease-floor.js: the least script work a
// lease on the server's clock without a TTL needs), redis-semaphore (a
// SET NX PX, then a script that deletes the key if it still holds its
// id), and "before" when SABSYNC_BENCH_BEFORE names another checkout's
// lib/redis. Writes keys under {lock-turns-*} and lock-turns-*, deleted
// at the end.
const path = require('path')
const RedisSemaphore = require('redis-semaphore')
const { Mutex } = require(path.join(__dirname, '..', '..', 'lib', 'redis'))
const { direct } = require(path.join(__dirname, '..', '..', 'lib', 'redis', 'scripts'))
const lease = require('./lease-floor')
const { median, connections } = require('./turns')

const per = Number(process.argv[2]) || 500
const rounds = Number(process.argv[3]) || 30

async function main () {
  const { client, end } = connections()
  const subjects = {}
  const ours = new Mutex(client(), 'lock-turns-sabsync')
  subjects.sabsync = async () => { await ours.lockAsync(); await ours.unlock() }
  if (process.env.SABSYNC_BENCH_BEFORE) {
    const Before = require(path.resolve(process.env.SABSYNC_BENCH_BEFORE)).Mutex
    const before = new Before(client(), 'lock-turns-before')
    subjects.before = async () => { await before.lockAsync(); await before.unlock() }
  }
  // Ids shaped as sabsync's ("<16 hex digits>:<base 36 count>").
  let n = 0
  const id = () => 'a1b2c3d4e5f60718:' + (++n).toString(36)
  const bare = client()
  const take = direct.sabsync2TakeFree
  const leave = direct.sabsync2LeaveFree
  await bare.script('LOAD', take.lua)
  await bare.script('LOAD', leave.lua)
  subjects.script = async () => {
    const me = id()
    await bare.evalsha(take.sha, 1, '{lock-turns-script}:m', me, 10000, 1)
    await bare.evalsha(leave.sha, 1, '{lock-turns-script}:m', me)
  }
  const floor = client()
  const floorTake = await floor.script('LOAD', lease.take)
  const floorLeave = await floor.script('LOAD', lease.leave)
  subjects.lease = async () => {
    const me = id()
    await floor.evalsha(floorTake, 1, '{lock-turns-lease}:m', me, 10000)
    await floor.evalsha(floorLeave, 1, '{lock-turns-lease}:m', me)
  }
  const theirs = new RedisSemaphore.Mutex(client(), 'lock-turns-rs', { lockTimeout: 10000 })
  subjects['redis-semaphore'] = async () => { await theirs.acquire(); await theirs.release() }

  const sends = s => s === 'redis-semaphore' ? ['evalsha', 'eval', 'set'] : ['evalsha', 'eval']
  const admin = client()
  const serverUs = async s => {
    const info = await admin.info('commandstats')
    let us = 0
    for (const cmd of sends(s)) {
      const m = new RegExp(`^cmdstat_${cmd}:calls=\\d+,usec=(\\d+)`, 'm').exec(info)
      if (m) us += Number(m[1])
    }
    return us
  }
  const names = Object.keys(subjects)
  const us = Object.fromEntries(names.map(s => [s, []]))
  const cpu = Object.fromEntries(names.map(s => [s, []]))
  const server = Object.fromEntries(names.map(s => [s, []]))
  const run = async (s, k) => {
    const f = subjects[s]
    const s0 = await serverUs(s)
    const c0 = process.cpuUsage()
    const t0 = process.hrtime.bigint()
    for (let i = 0; i < k; i++) await f()
    const t = Number(process.hrtime.bigint() - t0) / 1e3 / k
    const c = process.cpuUsage(c0)
    return [t, (c.user + c.system) / k, ((await serverUs(s)) - s0) / k]
  }
  for (const s of names) await run(s, per) // connect, load, warm up
  for (let r = 0; r < rounds; r++) {
    for (const s of r % 2 ? [...names].reverse() : names) {
      const [t, c, on] = await run(s, per)
      us[s].push(t)
      cpu[s].push(c)
      server[s].push(on)
    }
  }
  console.log(`${rounds} rounds of ${per} lock+unlock pairs a subject`)
  for (const s of names) {
    const inRound = median(us[s].map((x, i) => x / us['redis-semaphore'][i]))
    console.log(`${s.padEnd(16)} ${median(us[s]).toFixed(1)} µs a pair, ${inRound.toFixed(3)}× redis-semaphore's time within a round, ` +
      `CPU ${median(cpu[s]).toFixed(1)} µs a pair, the server's ${median(server[s]).toFixed(1)}`)
  }
  await end(['{lock-turns-*', 'lock-turns-*'])
}

main().catch(err => { console.error(err); process.exit(1) })
