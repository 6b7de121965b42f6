#!/usr/bin/env node
'use strict'
// sabsync/redis against its peers, all against one Redis server in one run:
//
//   npm run bench:redis              (-- --quick for a shorter pass)
//
// The server is SABSYNC_REDIS_URL's, or one started here (redis-server on
// PATH, no persistence, stopped at the end). Prints a table; writes
// nothing (bench/RESULTS.md is the harness's). `npm run bench` runs this
// after its own cases when a server can be had.
//
// Cases, every subject in the same run, repeated and interleaved:
// - uncontended lock+unlock: one client, one lock; time per pair; the
//   commands the clients sent per pair (round trips: every command an
//   ioredis client sends is counted, see support/redis-count.js); the
//   server's count of commands per pair (its INFO counter: this one
//   includes the calls scripts make); the server's time per pair (SLOWLOG
//   with every command logged: of the commands from the subject's own
//   connection, each kind's count per pair times its median duration,
//   scripts with the calls inside them);
//   and for sabsync the commands MONITOR shows from its client's
//   connection per pair. Beside them, two floors, each on a client of its
//   own. The round trips: two EVALSHA of scripts that run no command and
//   answer as sabsync's take and leave of a free lock do, with their
//   arguments (one key, then 3 and 1): what ioredis and the server take
//   for the same two round trips before any script work or sabsync code.
//   The guarantees: the least script work a lease kept on the server's
//   clock, without a TTL while held (sabsync's rules, lib/redis/scripts.js),
//   needs, in its most compact state, one string: TIME and SET NX to take,
//   GET, TIME and DEL to give back. redis-semaphore's take is a plain SET
//   NX PX instead, a lease kept as the key's TTL, which a volatile-*
//   policy may evict while it is held. The subjects take turns in short passes (the
//   order reversed every pass), so a change of the machine's load falls on
//   all of them; the goal lines also give the median of sabsync's time
//   over the peer's within each pass;
// - contended: 4 processes (child_process.fork), one lock, each taking it
//   `n` times, holding it for one turn of its event loop, then staying
//   away 2 ms (so that the next holder is a process that waited, not the
//   last one taking it straight back, as polling locks let it). Hand-off: the
//   time from one holder leaving to the next entering, when the next was
//   already waiting (median over the run). Max wait: the longest any
//   acquisition waited. Both after a warm-up round (3 acquisitions each).
//   Overlaps: entries before the previous holder left (the subject's own
//   check: it must be 0). For reference, the time a bare message takes
//   from one process to another through the same server (PUBLISH), the
//   least any wake-up by the server can take on the machine at the time;
// - hand-off, one waiter: 2 processes taking turns (support/redis-pair.js):
//   the holder leaves only once the other has asked and is waiting, and
//   nobody else comes, so leaving to entering is the hand-off alone (the
//   4-process case above measures from whoever left last, and a poller
//   that retries when the lock happens to be free scores well there). In
//   the same rounds, the references: a bare message from one of the two
//   processes to the other through the same server, PUBLISH to a
//   subscriber, and LPUSH to a client blocked in BLPOP: the least a
//   wake-up through the server takes on the machine at the time. The
//   goal line sets sabsync's hand-off against 2 × that PUBLISH (the
//   release reaching the server, the wake-up reaching the waiter);
// - RateLimit: one call with capacity free, against rate-limiter-flexible's
//   Redis limiter (passes, server time and ratios as above), and two
//   floors: one EVALSHA of a script that runs no command, a call's
//   arguments; and the least script work an exact window needs (at most
//   rps grants in any window, which rate-limiter-flexible's fixed window
//   does not keep): TIME, the rps-th newest grant (ZRANGE), ZADD, on a
//   sorted set of its own. And the most grants any window of the time unit saw when
//   a caller calls once, then again from 100 ms before the limiter's window
//   ends, as fast as it is let
//   (sabsync's grant times are the server's, which it answers; the peer
//   answers none, so its are this process's clock when a grant resolves).
const os = require('os')
const path = require('path')
const { fork, spawnSync } = require('child_process')

const quick = process.argv.includes('--quick')
const repeats = quick ? 3 : 5
// The single-client cases: passes of `passOps` calls, each subject in
// turn, `passes` times.
const passes = quick ? 12 : 30
const passOps = quick ? 100 : 200

function available () {
  return Boolean(process.env.SABSYNC_REDIS_URL) || spawnSync('redis-server', ['--version']).status === 0
}

const median = xs => {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2
}
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))

async function totalCommands (admin) {
  const info = await admin.info('stats')
  return Number(/total_commands_processed:(\d+)/.exec(info)[1])
}

// Commands sent by this process's clients and processed by the server
// while fn ran (the admin's INFO calls are not counted; the server's
// second INFO counts the first).
async function commandsDuring (admin, fn) {
  const { sent } = require('./support/redis-count') // loaded (and counting) only when the bench runs
  const before = await totalCommands(admin)
  const sentBefore = sent()
  await fn()
  const sentAfter = sent()
  return { client: sentAfter - sentBefore, server: (await totalCommands(admin)) - before - 1 }
}

// SABSYNC_BENCH_BEFORE=/path/to/other/checkout/lib/redis adds a subject
// 'sabsync-before' to the uncontended and one-waiter cases: a before/after
// comparison in one run.
const before = process.env.SABSYNC_BENCH_BEFORE
const ours = before ? ['sabsync', 'sabsync-before'] : ['sabsync']

// The floor subjects: EVALSHA of scripts that run no command and answer
// as sabsync's would, with the same keys and arguments, so their rows show
// what ioredis and the server take for the round trips themselves.
const FLOOR_LOCK = 'EVALSHA × 2 (floor)'
const FLOOR_LEASE = 'server-clock lease, no TTL (floor)'
const FLOOR_RATE = 'EVALSHA × 1 (floor)'
const FLOOR_WINDOW = 'exact window (floor)'

function floorFns (redis, key) {
  redis.defineCommand('benchFloorTake', { numberOfKeys: 1, lua: 'return 1764780000000000' })
  redis.defineCommand('benchFloorLeave', { numberOfKeys: 1, lua: 'return 1' })
  redis.defineCommand('benchFloorRate', { numberOfKeys: 1, lua: 'return { 1764780000000000, 0 }' })
  // The least an exact window (at most rps grants in any window of unit
  // µs) needs on the server: the clock, the rps-th newest grant, the new
  // one written; no arrival order, no reservations, no trim.
  redis.defineCommand('benchWindow', {
    numberOfKeys: 1,
    lua: `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local rps = tonumber(ARGV[2])
local kth = redis.call('ZRANGE', KEYS[1], -rps, -rps, 'WITHSCORES')[2]
if kth and tonumber(kth) + tonumber(ARGV[3]) > now then return { 0, tonumber(kth) + tonumber(ARGV[3]) - now } end
redis.call('ZADD', KEYS[1], now, ARGV[1])
return { now, 0 }`
  })
  // The guarantees' floor: holder, expiry and fence from the server's
  // clock in one string, no TTL; given back only by its holder.
  const lease = require('./support/lease-floor')
  redis.defineCommand('benchLeaseTake', { numberOfKeys: 1, lua: lease.take })
  redis.defineCommand('benchLeaseLeave', { numberOfKeys: 1, lua: lease.leave })
  const keys = ['m', 'q', 'b', 'l', 'f'].map(s => `{${key}}:${s}`)
  let n = 0
  return {
    lock: async () => {
      const id = 'a1b2c3d4e5f60718:' + (++n).toString(36)
      await redis.benchFloorTake(keys[0], id, 10000, 1)
      await redis.benchFloorLeave(keys[0], id)
    },
    lease: async () => {
      const id = 'a1b2c3d4e5f60718:' + (++n).toString(36)
      if ((await redis.benchLeaseTake(keys[0], id, 10000))[0] !== 1) throw new Error('bench:redis: the floor lease was not free')
      if (await redis.benchLeaseLeave(keys[0], id) !== 1) throw new Error('bench:redis: the floor lease was not held')
    },
    rate: () => redis.benchFloorRate(keys[0], 'a1b2c3d4e5f60718:' + (++n).toString(36), 1e9, 1e6, 0, -1, 0),
    window: async () => {
      const r = await redis.benchWindow(keys[0], 'a1b2c3d4e5f60718:' + (++n).toString(36), 1e9, 1e6, 0, -1, 0)
      if (!(r[0] > 0)) throw new Error('bench:redis: the floor window was full')
    }
  }
}

function uncontendedLock (subject, redis, key) {
  if (subject === FLOOR_LOCK) return floorFns(redis, key).lock
  if (subject === FLOOR_LEASE) return floorFns(redis, key).lease
  if (subject === 'sabsync' || subject === 'sabsync-before') {
    const { Mutex } = require(subject === 'sabsync' ? '../lib/redis' : before)
    const m = new Mutex(redis, key)
    return async () => { await m.lockAsync(); await m.unlock() }
  }
  if (subject === 'redlock') {
    const Redlock = require('redlock')
    const redlock = new Redlock([redis])
    return async () => { const lock = await redlock.lock(key, 10000); await lock.unlock() }
  }
  const { Mutex } = require('redis-semaphore')
  const m = new Mutex(redis, key, { lockTimeout: 10000 })
  return async () => { await m.acquire(); await m.release() }
}

// Passes of each subject's fn (one call each time), the subjects in turn,
// the order reversed every pass: runs[s].us (µs a call, per pass),
// .commands and .server (per call), then .serverUs (SLOWLOG).
async function passesOf (admin, clients, fns, runs) {
  const names = Object.keys(fns)
  for (const s of names) {
    for (let i = 0; i < 50; i++) await fns[s]() // connect, load scripts
    runs[s] = { us: [], commands: [], server: [] }
  }
  for (let r = 0; r < passes; r++) {
    for (const s of r % 2 ? [...names].reverse() : names) {
      let ns = 0n
      const commands = await commandsDuring(admin, async () => {
        const t0 = process.hrtime.bigint()
        for (let i = 0; i < passOps; i++) await fns[s]()
        ns = process.hrtime.bigint() - t0
      })
      runs[s].us.push(Number(ns) / 1e3 / passOps)
      runs[s].commands.push(commands.client / passOps)
      runs[s].server.push(commands.server / passOps)
    }
  }
  for (const s of names) runs[s].serverUs = await serverTime(admin, clients[s], fns[s], quick ? 1100 : 2100)
}

// The server's time per call of fn, in µs: SLOWLOG with every command
// logged, the commands from `client`'s connection, each kind's count a call
// times its median duration, summed (a script's includes the calls inside
// it, and the client's own timers'
// calls count too: a RateLimit's idle tidy, once a unit; the admin's own
// are not counted), over `ms` ms of calls at least (more than one tidy
// period: a tidy's batch is the deferred part of the calls' trimming).
// Undefined when the server refuses CONFIG.
async function serverTime (admin, client, fn, ms) {
  const addr = /addr=(\S+)/.exec(await client.client('INFO'))[1]
  const most = 200000
  let saved
  try {
    saved = [await admin.config('GET', 'slowlog-log-slower-than'), await admin.config('GET', 'slowlog-max-len')]
    await admin.config('SET', 'slowlog-max-len', String(most))
    await admin.config('SET', 'slowlog-log-slower-than', '0')
  } catch {
    return undefined
  }
  await admin.slowlog('RESET')
  let ops = 0
  try {
    const end = performance.now() + ms
    while (performance.now() < end && ops < most / 8) { await fn(); ops++ }
  } finally {
    await admin.config('SET', 'slowlog-log-slower-than', saved[0][1])
  }
  const log = await admin.slowlog('GET', most)
  await admin.config('SET', 'slowlog-max-len', saved[1][1])
  await admin.slowlog('RESET')
  // Per command (a script by its SHA), how many a call and its median
  // duration: a command that a preemption of the server (a busy machine)
  // stretched does not weigh more than its kind's typical one.
  const kinds = new Map()
  for (const [, , us, args, client] of log) {
    if (client !== addr) continue
    const name = String(args[0]).toLowerCase()
    const kind = name === 'evalsha' || name === 'eval' ? name + ' ' + args[1] : name
    if (!kinds.has(kind)) kinds.set(kind, [])
    kinds.get(kind).push(us)
  }
  let us = 0
  for (const durations of kinds.values()) us += durations.length / ops * median(durations)
  return us
}

async function uncontended (Redis, url, admin, runs) {
  const clients = {}
  const fns = {}
  for (const s of [...ours, 'redlock', 'redis-semaphore', FLOOR_LOCK, FLOOR_LEASE]) {
    clients[s] = new Redis(url)
    fns[s] = uncontendedLock(s, clients[s], `bench:${process.pid}:uncontended:${s}`)
  }
  await passesOf(admin, clients, fns, runs)
  for (const s of ours) runs[s].monitor = await monitorCount(Redis, url, clients[s], fns[s], quick ? 100 : 300)
  for (const c of Object.values(clients)) c.disconnect()
}

// Commands the server received from `client`'s connection per call of fn,
// as MONITOR shows them (between two ECHOs of the client's own): the round
// trips of the uncontended pair, seen by the server.
async function monitorCount (Redis, url, client, fn, ops) {
  const addr = /addr=(\S+)/.exec(await client.client('INFO'))[1]
  // monitor() opens a connection of its own: the client it is called on
  // is closed too, or it would reconnect to the bench's stopped server.
  const base = new Redis(url)
  const monitor = await base.monitor()
  base.disconnect()
  let inside = false
  let n = 0
  let ended
  const end = new Promise(resolve => { ended = resolve })
  monitor.on('monitor', (time, args, source) => {
    if (source !== addr) return
    const cmd = args[0].toLowerCase()
    if (cmd === 'echo' && args[1] === 'bench-start') inside = true
    else if (cmd === 'echo' && args[1] === 'bench-end') { inside = false; ended() } else if (inside) n++
  })
  await client.echo('bench-start')
  for (let i = 0; i < ops; i++) await fn()
  await client.echo('bench-end')
  await end
  monitor.disconnect()
  return n / ops
}

async function contendedRun (url, admin, subject, n) {
  const key = `bench:${process.pid}:contended:${subject}:${Math.random().toString(36).slice(2)}`
  const procs = [0, 1, 2, 3].map(() => fork(path.join(__dirname, 'support', 'redis-contender.js'),
    [JSON.stringify({ subject, url, key, n, lease: 10000 })], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }))
  const ready = procs.map(p => new Promise(resolve => p.once('message', resolve)))
  const done = procs.map(p => new Promise((resolve, reject) => {
    p.on('message', m => { if (m && Array.isArray(m.records)) resolve(m) })
    p.on('exit', code => { if (code !== 0) reject(new Error(`${subject} contender exited with ${code}`)) })
  }))
  await Promise.all(ready)
  // A warm-up round, all four at once, not measured: sabsync's first wait
  // in a process opens its wake connection, a cost paid once.
  const warm = procs.map(p => new Promise(resolve => p.on('message', m => { if (m === 'warm') resolve() })))
  for (const p of procs) p.send('warm')
  await Promise.all(warm)
  let records
  let sentByProcs = 0
  const commands = await commandsDuring(admin, async () => {
    for (const p of procs) p.send('go')
    const outs = await Promise.all(done)
    records = outs.flatMap(o => o.records)
    sentByProcs = outs.reduce((n, o) => n + o.sent, 0)
  })
  await Promise.all(procs.map(p => p.exitCode !== null ? null : new Promise(resolve => p.once('exit', resolve))))
  records.sort((a, b) => a[1] - b[1])
  const handoffs = []
  let overlaps = 0
  let maxWait = 0
  for (let i = 0; i < records.length; i++) {
    const [asked, entered] = records[i]
    maxWait = Math.max(maxWait, entered - asked)
    if (i === 0) continue
    const prevLeft = records[i - 1][2]
    if (entered < prevLeft) overlaps++
    else if (asked < prevLeft) handoffs.push(entered - prevLeft)
  }
  return { handoffUs: median(handoffs) / 1e3, maxWaitMs: maxWait / 1e6, overlaps, commands: sentByProcs / records.length, server: commands.server / records.length }
}

// Reference: half the round trip of a message to another process and
// back through Redis (PUBLISH, SUBSCRIBE): the least a wake-up through the
// server can take on this machine now. Median of `n`, in µs.
async function messageFloor (Redis, url, n) {
  const echo = fork(path.join(__dirname, 'support', 'redis-echo.js'), [url], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  await new Promise(resolve => echo.once('message', resolve))
  const sub = new Redis(url)
  const pub = new Redis(url)
  await sub.subscribe('sabsync-bench:pong')
  const times = []
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint()
    await new Promise(resolve => { sub.once('message', resolve); pub.publish('sabsync-bench:ping', String(i)) })
    times.push(Number(process.hrtime.bigint() - t0) / 2e3)
  }
  sub.disconnect()
  pub.disconnect()
  echo.disconnect()
  return median(times)
}

// Median hand-off (µs) between two processes taking turns, `n` each way.
async function pairRun (url, subject, n) {
  const key = `bench:${process.pid}:pair:${subject}:${Math.random().toString(36).slice(2)}`
  const procs = [0, 1].map(role => fork(path.join(__dirname, 'support', 'redis-pair.js'),
    [JSON.stringify({ subject, url, key, role, n, lease: 10000 })], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }))
  const exited = procs.map(p => new Promise((resolve, reject) => p.on('exit', code => code === 0 ? resolve() : reject(new Error(`${subject} pair process exited with ${code}`)))))
  await Promise.all(procs.map(p => new Promise(resolve => p.once('message', resolve))))
  const outs = procs.map((p, i) => new Promise(resolve => p.on('message', m => {
    if (m === 'asked' || m === 'entered') procs[1 - i].send(m)
    else if (m && Array.isArray(m.left)) resolve(m)
  })))
  for (const p of procs) p.send('go')
  const [a, b] = await Promise.all(outs)
  await Promise.all(exited)
  const hand = []
  for (let i = 0; i < n; i++) hand.push(b.entered[i] - a.left[i], a.entered[i] - b.left[i])
  return median(hand) / 1e3
}

async function pairs (url, runs) {
  const n = { sabsync: quick ? 30 : 100, ...(before ? { 'sabsync-before': quick ? 30 : 100 } : {}), 'redis-semaphore': quick ? 30 : 100, redlock: quick ? 3 : 8, publish: quick ? 30 : 100, blpop: quick ? 30 : 100 }
  for (const s of Object.keys(n)) runs[s] = []
  for (let r = 0; r < (quick ? 1 : 3); r++) {
    for (const s of Object.keys(n)) runs[s].push(await pairRun(url, s, n[s]))
  }
}

async function contended (url, admin, runs) {
  const n = { sabsync: quick ? 40 : 100, ...(before ? { 'sabsync-before': quick ? 40 : 100 } : {}), 'redis-semaphore': quick ? 40 : 100, redlock: quick ? 10 : 15 }
  const rounds = quick ? 1 : 3
  for (const s of Object.keys(n)) runs[s] = { handoffUs: [], maxWaitMs: [], overlaps: 0, commands: [], server: [] }
  for (let r = 0; r < rounds; r++) {
    // The order reversed every round: no subject is always first.
    for (const s of r % 2 ? Object.keys(n).reverse() : Object.keys(n)) {
      const out = await contendedRun(url, admin, s, n[s])
      runs[s].handoffUs.push(out.handoffUs)
      runs[s].maxWaitMs.push(out.maxWaitMs)
      runs[s].overlaps += out.overlaps
      runs[s].commands.push(out.commands)
      runs[s].server.push(out.server)
    }
  }
}

// Grants when one call comes at the start of a window and the rest, as
// fast as allowed, from 100 ms before that window ends (as the limiter
// says: `left` ms after the first call) until 1.2 units later: the most in
// any window. take() answers { t: the grant's time (ms), or undefined for
// "now, on this clock"; left: ms left in the limiter's window, if it has one }.
async function edgeBurst (take, rps, unitMs) {
  const times = []
  const at = async () => {
    const { t, left } = await take()
    times.push(t === undefined ? performance.now() : t)
    return left
  }
  const t0 = performance.now()
  const left = await at()
  await sleep((left === undefined ? unitMs : left) - 100 - (performance.now() - t0))
  const t1 = performance.now()
  while (performance.now() - t1 < unitMs * 1.2) await at()
  let most = 0
  for (let i = 0, j = 0; i < times.length; i++) {
    while (times[i] - times[j] >= unitMs) j++
    most = Math.max(most, i - j + 1)
  }
  return most
}

async function rate (Redis, url, admin, runs) {
  const { RateLimit } = require('../lib/redis')
  const { RateLimiterRedis } = require('rate-limiter-flexible')
  const client = new Redis(url)
  const clients = { sabsync: new Redis(url), 'rate-limiter-flexible': new Redis(url), [FLOOR_RATE]: new Redis(url), [FLOOR_WINDOW]: new Redis(url) }
  const tag = `bench:${process.pid}`
  const fast = {
    sabsync: (() => { const limit = RateLimit(clients.sabsync, tag + ':rate', 1e9); return () => limit() })(),
    'rate-limiter-flexible': (() => {
      const rl = new RateLimiterRedis({ storeClient: clients['rate-limiter-flexible'], keyPrefix: tag + ':rlf', points: 1e9, duration: 1 })
      return () => rl.consume('k')
    })(),
    [FLOOR_RATE]: floorFns(clients[FLOOR_RATE], tag + ':floor').rate,
    [FLOOR_WINDOW]: floorFns(clients[FLOOR_WINDOW], tag + ':window').window
  }
  await passesOf(admin, clients, fast, runs)
  for (const c of Object.values(clients)) c.disconnect()
  const rps = 10
  const unitMs = 1000
  const limit = RateLimit(client, tag + ':edge', rps, { timeUnit: unitMs })
  runs.sabsync.most = await edgeBurst(async () => ({ t: await limit() }), rps, unitMs)
  const rl = new RateLimiterRedis({ storeClient: client, keyPrefix: tag + ':rlf-edge', points: rps, duration: unitMs / 1000 })
  runs['rate-limiter-flexible'].most = await edgeBurst(async () => {
    for (;;) {
      try { return { left: (await rl.consume('k')).msBeforeNext } } catch (res) {
        if (!(res && typeof res.msBeforeNext === 'number')) throw res
        await sleep(res.msBeforeNext)
      }
    }
  }, rps, unitMs)
  client.disconnect()
  return { rps, unitMs }
}

const f = v => v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2)
const stats = xs => `${f(Math.min(...xs))} | ${f(median(xs))} | ${f(Math.max(...xs))}`

async function main () {
  const Redis = require('ioredis')
  let url = process.env.SABSYNC_REDIS_URL
  let server = null
  if (!url) {
    const { startServer } = require('../test/fixtures/redis/server')
    server = await startServer()
    url = server.url
  }
  const admin = new Redis(url)
  try {
    const version = /redis_version:(\S+)/.exec(await admin.info('server'))[1]
    const u = {}
    const c = {}
    const r = {}
    process.stderr.write('bench:redis: uncontended lock+unlock ...\n')
    await uncontended(Redis, url, admin, u)
    process.stderr.write('bench:redis: contended, 4 processes ...\n')
    await contended(url, admin, c)
    const floor = []
    for (let i = 0; i < repeats; i++) floor.push(await messageFloor(Redis, url, quick ? 100 : 300))
    process.stderr.write('bench:redis: hand-off, one waiter ...\n')
    const p = {}
    await pairs(url, p)
    process.stderr.write('bench:redis: RateLimit ...\n')
    const { rps, unitMs } = await rate(Redis, url, admin, r)

    const rows = ['| case | subject | min | median | max | unit | sabsync faster by | round trips / op | server calls / op | server µs / op | notes |',
      '|---|---|---:|---:|---:|---|---:|---:|---:|---:|---|']
    const ratio = (peer, own) => (median(peer) / median(own)).toFixed(1) + '×'
    const sus = x => x === undefined ? '' : f(x)
    for (const s of Object.keys(u)) {
      const seen = u[s].monitor !== undefined
        ? `${u[s].monitor.toFixed(2)} commands / op seen by MONITOR`
        : s === FLOOR_LOCK ? 'the two round trips alone' : s === FLOOR_LEASE ? 'TIME, SET NX; GET, TIME, DEL: the least work sabsync\'s guarantees allow' : ''
      rows.push(`| uncontended lock+unlock | ${s} | ${stats(u[s].us)} | µs | ${s === 'sabsync' ? '' : ratio(u[s].us, u.sabsync.us)} | ${median(u[s].commands).toFixed(2)} | ${median(u[s].server).toFixed(1)} | ${sus(u[s].serverUs)} | ${seen} |`)
    }
    for (const s of Object.keys(c)) {
      rows.push(`| contended hand-off, 4 processes | ${s} | ${stats(c[s].handoffUs)} | µs | ${s === 'sabsync' ? '' : ratio(c[s].handoffUs, c.sabsync.handoffUs)} | ${median(c[s].commands).toFixed(1)} | ${median(c[s].server).toFixed(1)} | | ${c[s].overlaps} overlaps |`)
    }
    rows.push(`| reference: a message to another process through Redis, one way | PUBLISH | ${stats(floor)} | µs | | | | | the least a wake-up through the server takes here |`)
    for (const s of [...ours, 'redis-semaphore', 'redlock']) {
      rows.push(`| hand-off, one waiter, 2 processes | ${s} | ${stats(p[s])} | µs | ${s === 'sabsync' ? '' : ratio(p[s], p.sabsync)} | | | | |`)
    }
    rows.push(`| reference: the same 2 processes, a bare message | PUBLISH | ${stats(p.publish)} | µs | | | | | |`)
    rows.push(`| reference: the same 2 processes, a bare message | LPUSH → BLPOP | ${stats(p.blpop)} | µs | | | | | |`)
    for (const s of Object.keys(c)) {
      rows.push(`| contended max wait, 4 processes | ${s} | ${stats(c[s].maxWaitMs)} | ms | ${s === 'sabsync' ? '' : ratio(c[s].maxWaitMs, c.sabsync.maxWaitMs)} | | | | |`)
    }
    for (const s of Object.keys(r)) {
      rows.push(`| RateLimit call, capacity free | ${s} | ${stats(r[s].us)} | µs | ${s === 'sabsync' ? '' : ratio(r[s].us, r.sabsync.us)} | ${median(r[s].commands).toFixed(2)} | ${median(r[s].server).toFixed(1)} | ${sus(r[s].serverUs)} | ${s === FLOOR_WINDOW ? 'TIME, ZRANGE, ZADD: the least work an exact window allows' : r[s].most === undefined ? 'no limit: the round trip alone' : `most in any ${unitMs} ms window at ${rps} per window: ${r[s].most}`} |`)
    }

    const peersPolling = ['redlock', 'redis-semaphore']
    // A hand-off is two one-way messages at least (the release reaches
    // the server, the server tells the waiter); sabsync's waiter then asks
    // the server for its grant (a wake-up is only a hint): the floor is
    // 2 × PUBLISH between the same processes, measured in the same run.
    const floorRatio = median(p.sabsync) / (2 * median(p.publish))
    const floorRatio4 = median(c.sabsync.handoffUs) / (2 * median(floor))
    // sabsync's time over the peer's: of the medians, and the median of
    // the ratios within each pass (the same load for both).
    const within = (own, peer) => {
      const inPass = median(own.us.map((us, i) => us / peer.us[i]))
      const server = own.serverUs === undefined ? '' : `; server ${f(own.serverUs)} µs vs ${f(peer.serverUs)} µs a call (SLOWLOG)`
      return [`${f(median(own.us))} µs vs ${f(median(peer.us))} µs: ${(median(own.us) / median(peer.us)).toFixed(2)}×, ` +
        `${inPass.toFixed(2)}× within a pass${server}`, Math.max(median(own.us) / median(peer.us), inPass) <= 1.1]
    }
    const [lockLine, lockMet] = within(u.sabsync, u['redis-semaphore'])
    const [rateLine, rateMet] = within(r.sabsync, r['rate-limiter-flexible'])
    // The floor against the same peer, within a pass: how near it the
    // round trips alone come, before any script work or sabsync code.
    const inPassOf = (own, peer) => median(own.us.map((us, i) => us / peer.us[i])).toFixed(2)
    const floorOf = (floor, peer, n) => `; the floor (${n} EVALSHA of a script that runs no command, the same ` +
      `arguments) ${f(median(floor.us))} µs, ${inPassOf(floor, peer)}× within a pass`
    const leaseFloor = `; the least script work a lease on the server's clock without a TTL needs (${FLOOR_LEASE}) ` +
      `${f(median(u[FLOOR_LEASE].us))} µs, ${inPassOf(u[FLOOR_LEASE], u['redis-semaphore'])}× within a pass`
    const goals = [
      [`uncontended lock+unlock within 1.1× of redis-semaphore's (${lockLine}${floorOf(u[FLOOR_LOCK], u['redis-semaphore'], 'two')}${leaseFloor})`, lockMet],
      [`a RateLimit call with capacity free within 1.1× of rate-limiter-flexible's (${rateLine}${floorOf(r[FLOOR_RATE], r['rate-limiter-flexible'], 'one')}` +
        `; the least script work an exact window needs (${FLOOR_WINDOW}) ${f(median(r[FLOOR_WINDOW].us))} µs, ` +
        `${inPassOf(r[FLOOR_WINDOW], r['rate-limiter-flexible'])}× within a pass)`, rateMet],
      [`one-waiter hand-off within 3× of the two-message floor (${f(median(p.sabsync))} µs vs 2 × ${f(median(p.publish))} µs ` +
        `PUBLISH between the same 2 processes: ${floorRatio.toFixed(2)}×; 4 processes: ${f(median(c.sabsync.handoffUs))} µs vs ` +
        `2 × ${f(median(floor))} µs, ${floorRatio4.toFixed(2)}×)`, floorRatio <= 3],
      [`uncontended round trips within 1.2× of redlock's (${median(u.sabsync.commands).toFixed(2)} vs ${median(u.redlock.commands).toFixed(2)})`,
        median(u.sabsync.commands) <= 1.2 * median(u.redlock.commands)],
      // A hand-off through the server takes two one-way messages at least
      // (the release to the server, the grant to the waiter), whoever
      // makes it: the line says when 5× lies below that floor.
      ...peersPolling.map(p => [`contended hand-off at least 5× faster than ${p} (${ratio(c[p].handoffUs, c.sabsync.handoffUs)}; ` +
        `5× means at most ${f(median(c[p].handoffUs) / 5)} µs, and a hand-off through the server is two one-way messages at least: ` +
        `2 × ${f(median(floor))} µs (PUBLISH) here)`,
      median(c[p].handoffUs) >= 5 * median(c.sabsync.handoffUs)]),
      ...peersPolling.map(q => [`one-waiter hand-off at least 5× faster than ${q} (${ratio(p[q], p.sabsync)}; ` +
        `sabsync ${f(median(p.sabsync))} µs, the bare messages ${f(median(p.publish))} (PUBLISH) and ${f(median(p.blpop))} µs (BLPOP))`,
      median(p[q]) >= 5 * median(p.sabsync)]),
      ...peersPolling.map(p => [`lower max wait than ${p} (${f(median(c.sabsync.maxWaitMs))} vs ${f(median(c[p].maxWaitMs))} ms)`,
        median(c.sabsync.maxWaitMs) < median(c[p].maxWaitMs)]),
      [`no overlaps (sabsync ${c.sabsync.overlaps}; ${peersPolling.map(p => `${p} ${c[p].overlaps}`).join(', ')})`, c.sabsync.overlaps === 0],
      [`RateLimit: at most ${rps} in any window (sabsync ${r.sabsync.most}, rate-limiter-flexible ${r['rate-limiter-flexible'].most})`, r.sabsync.most <= rps]
    ]
    const cpus = os.cpus()
    console.log([
      `Machine: ${cpus.length} × ${cpus[0] ? cpus[0].model.trim() : 'unknown CPU'}, ${os.type()} ${os.release()}; ` +
        `Redis ${version} on ${server ? 'a local redis-server started by the bench' : url.replace(/\/\/[^@]*@/, '//')}`,
      `Node ${process.version}; ${new Date().toISOString().slice(0, 10)}; \`npm run bench:redis${quick ? ' -- --quick' : ''}\`; ` +
        `uncontended and RateLimit: ${passes} passes of ${passOps} calls per subject, interleaved; ` +
        `contended: ${quick ? 1 : 3} rounds; PUBLISH reference: ${repeats} runs; ioredis ${require('ioredis/package.json').version}, ` +
        `redlock ${require('redlock/package.json').version}, redis-semaphore ${require('redis-semaphore/package.json').version}, ` +
        `rate-limiter-flexible ${require('rate-limiter-flexible/package.json').version}.`,
      '',
      rows.join('\n'),
      '',
      ...goals.map(([what, met]) => `- ${what}: **${met ? 'met' : 'missed'}**`)
    ].join('\n'))
    if (c.sabsync.overlaps !== 0 || r.sabsync.most > rps) {
      console.error('bench:redis: sabsync failed its own check')
      process.exitCode = 1
    }
  } finally {
    admin.disconnect()
    if (server) await server.close()
  }
}

if (require.main === module) {
  if (!available()) {
    console.error('bench:redis: no Redis server: set SABSYNC_REDIS_URL or install redis-server')
    process.exit(1)
  }
  main().catch(err => { console.error(err); process.exit(1) })
}

module.exports = { available, contendedRun }
