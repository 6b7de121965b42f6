'use strict'
// RateLimiter (a limit per client key) against rate-limiter-flexible: in one
// process (a space's limiter against RateLimiterMemory), across 4 cluster
// workers (against RateLimiterCluster, an IPC round trip to the primary per
// call), on Redis (against RateLimiterRedis), and 1,000,000 distinct keys
// through a table of 100,000 (the time per call over the last 100,000 keys
// against keys 400,000-499,999, once the JIT is warm: flat). Every call is an allowed consume of one of
// 1,000 keys in turn; each scenario runs in fresh processes
// (bench/support/limiter.js) and checks that every call was allowed.
const path = require('path')
const { spawnSync } = require('child_process')

const script = path.join(__dirname, '..', 'support', 'limiter.js')

function run (...args) {
  const r = spawnSync(process.execPath, [script, ...args.map(String)], { encoding: 'utf8', timeout: 600000 })
  const line = (r.stdout || '').trim().split('\n').pop()
  let out
  try { out = JSON.parse(line) } catch { out = null }
  if (r.status !== 0 || out === null) {
    throw new Error(`bench/support/limiter.js ${args.join(' ')} failed (status ${r.status}, signal ${r.signal}): ${r.stderr || r.stdout}`)
  }
  return out
}

module.exports = [
  {
    name: 'RateLimiter consume, one process: a space vs RateLimiterMemory',
    unit: 'ns/op',
    compare: 'rate-limiter-flexible memory',
    goal: 1,
    subjects: {
      sabsync: async ({ quick }) => run('memory', 'sabsync', quick ? 300000 : 2000000),
      'rate-limiter-flexible memory': async ({ quick }) => run('memory', 'rlf', quick ? 100000 : 500000)
    }
  },
  {
    name: 'RateLimiter consume by 4 cluster workers: a space vs RateLimiterCluster',
    unit: 'us/op',
    compare: 'rate-limiter-flexible cluster',
    goal: 300,
    subjects: {
      sabsync: async ({ quick }) => run('cluster', 'sabsync', quick ? 100000 : 500000),
      'rate-limiter-flexible cluster': async ({ quick }) => run('cluster', 'rlf', quick ? 2000 : 10000),
      'floor: one Atomics.add a call, 4 workers': async ({ quick }) => run('cluster', 'floor', quick ? 100000 : 500000)
    }
  },
  {
    name: 'RateLimiter consume on Redis, one client: sabsync/redis vs RateLimiterRedis',
    unit: 'us/op',
    compare: 'rate-limiter-flexible redis',
    goal: 1,
    subjects: {
      sabsync: async ({ quick }) => run('redis', 'sabsync', quick ? 3000 : 20000),
      'rate-limiter-flexible redis': async ({ quick }) => run('redis', 'rlf', quick ? 3000 : 20000),
      'floor: PING': async ({ quick }) => run('redis', 'floor', quick ? 3000 : 20000)
    }
  },
  {
    name: 'RateLimiter: 1,000,000 distinct keys through a table of 100,000 (the last 100,000 vs keys 400,000-499,999)',
    unit: 'ns/op',
    compare: 'keys 400,000-499,999',
    goal: 1 / 1.5, // flat: the last keys within 1.5x of the first
    subjects: {
      sabsync: async ({ quick }) => run('keys', 'last', 1000000),
      'keys 400,000-499,999': async ({ quick }) => run('keys', 'first', 1000000)
    }
  }
]
