'use strict'
// The keyed RateLimiter on Redis against RateLimiterRedis in one process:
// each subject on a connection of its own, rounds of calls taking turns
// (the order reversed every round), so that a change of the machine's
// speed falls on all of them; prints each subject's median µs a call and
// the median of its time over RateLimiterRedis's within a round.
//
//   SABSYNC_REDIS_URL=redis://... node bench/support/redis-turns.js [inFlight] [calls] [rounds]
//
// inFlight: callers each awaiting one call at a time (default 1); calls
// per subject a round (default 500); rounds (default 40). Subjects:
// sabsync (this tree), rlf (RateLimiterRedis), script (sabsync's script
// sent as a bare EVALSHA with the same arguments: against sabsync, what
// its JavaScript costs), least (the least script a bucket per key without
// a TTL needs: ./keyed-floor.js), and "before" when
// SABSYNC_BENCH_BEFORE names another checkout's lib/redis. LIMIT (env,
// default 100) calls a minute per key, 10,000 keys: every call is allowed.
//
// With --rate, the one-key case of `npm run bench:redis` instead: sabsync's
// RateLimit against RateLimiterRedis on one key, each with room for 1e9
// calls a second (every call is allowed), and sabsync's script sent bare
// with the same arguments; no least.
// Writes keys under {turns-*} and turns-rlf:*, deleted at the end.
const path = require('path')
const { RateLimiterRedis } = require('rate-limiter-flexible')
const { RateLimiter, RateLimit } = require(path.join(__dirname, '..', '..', 'lib', 'redis'))
const { direct } = require(path.join(__dirname, '..', '..', 'lib', 'redis', 'scripts'))

const rate = process.argv.includes('--rate')
const args = process.argv.slice(2).filter(a => a !== '--rate')
const inFlight = Number(args[0]) || 1
const per = Number(args[1]) || 500
const rounds = Number(args[2]) || 40
const LIMIT = Number(process.env.LIMIT) || 100
const KEYS = Array.from({ length: 10000 }, (_, i) => `10.${i >> 16}.${(i >> 8) & 255}.${i & 255}`)
const LEAST = require('./keyed-floor')
const { median, connections } = require('./turns')

// The subjects of --rate: one limit, every call allowed.
async function rateSubjects (client) {
  const subjects = {}
  const ours = RateLimit(client(), 'turns-rate', 1e9)
  subjects.sabsync = () => ours()
  if (process.env.SABSYNC_BENCH_BEFORE) {
    const before = require(path.resolve(process.env.SABSYNC_BENCH_BEFORE)).RateLimit(client(), 'turns-rate-before', 1e9)
    subjects.before = () => before()
  }
  const rlf = new RateLimiterRedis({ storeClient: client(), keyPrefix: 'turns-rlf-one', points: 1e9, duration: 1 })
  subjects.rlf = () => rlf.consume('k')
  // As RateLimit sends it: the log key, an id shaped as sabsync's, rps,
  // the unit in µs, not uniform, no bound on the wait, no policy check.
  const bare = client()
  const script = direct.sabsync6Rate
  await bare.script('LOAD', script.lua)
  let n = 0
  subjects.script = () => bare.evalsha(script.sha, 1, '{turns-rate-script}:log', 'a1b2c3d4e5f60718:' + (++n).toString(36), 1e9, 1000000, 0, -1, 0)
  return subjects
}

async function main () {
  const { client, end } = connections()
  const subjects = rate ? await rateSubjects(client) : await keyedSubjects(client)
  const names = Object.keys(subjects)
  const us = Object.fromEntries(names.map(n => [n, []]))
  let key = 0
  const run = async (f, n) => {
    let left = n
    const caller = async () => { while (left-- > 0) await f(KEYS[key++ % KEYS.length]) }
    const t0 = process.hrtime.bigint()
    await Promise.all(Array.from({ length: inFlight }, caller))
    return Number(process.hrtime.bigint() - t0) / 1e3 / n
  }
  for (const n of names) await run(subjects[n], per * 2) // warm up
  for (let r = 0; r < rounds; r++) {
    for (const n of r % 2 ? [...names].reverse() : names) us[n].push(await run(subjects[n], per))
  }
  console.log(`${inFlight} in flight, ${rounds} rounds of ${per} calls a subject, ` +
    (rate ? 'one limit of 1e9 a second' : `limit ${LIMIT} a minute`))
  for (const n of names) {
    const inRound = median(us[n].map((x, i) => x / us.rlf[i]))
    console.log(`${n.padEnd(8)} ${median(us[n]).toFixed(2)} µs a call, ${inRound.toFixed(3)}× RateLimiterRedis's time within a round`)
  }
  await end(['{turns-*', 'turns-rlf:*', 'turns-rlf-one:*', '{sabsync:rate:turns-*'])
}

async function keyedSubjects (client) {
  const T = String(Math.ceil(60e6 / LIMIT))
  const tau = String(Math.ceil(60e6 / LIMIT) * LIMIT)
  const subjects = {}
  const ours = new RateLimiter(client(), 'turns-sabsync', { limit: LIMIT, window: 60000 })
  subjects.sabsync = k => ours.consume(k)
  if (process.env.SABSYNC_BENCH_BEFORE) {
    const Before = require(path.resolve(process.env.SABSYNC_BENCH_BEFORE)).RateLimiter
    const before = new Before(client(), 'turns-before', { limit: LIMIT, window: 60000 })
    subjects.before = k => before.consume(k)
  }
  const rlf = new RateLimiterRedis({ storeClient: client(), keyPrefix: 'turns-rlf', points: LIMIT, duration: 60 })
  subjects.rlf = k => rlf.consume(k)
  const bare = client()
  const ownScript = direct.sabsync10KeyedRate
  await bare.script('LOAD', ownScript.lua)
  subjects.script = k => bare.evalsha(ownScript.sha, 1, '{turns-script}:rlz', 'c', T, tau, k)
  const least = client()
  const leastSha = await least.script('LOAD', LEAST)
  subjects.least = k => least.evalsha(leastSha, 1, '{turns-least}:rlz', 'c', T, tau, k)
  return subjects
}

main().catch(err => { console.error(err); process.exit(1) })
