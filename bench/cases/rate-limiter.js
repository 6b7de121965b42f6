'use strict'
// RateLimiter (a limit per client key) against rate-limiter-flexible: in one
// process (a space's limiter against RateLimiterMemory), across 4 cluster
// workers (against RateLimiterCluster, an IPC round trip to the primary per
// call), on Redis (against RateLimiterRedis; one call at a time, and 64
// in flight), and 1,000,000 distinct keys
// through a table of 100,000 (the time per call over the last 100,000 keys
// against keys 400,000-499,999, once the JIT is warm: flat). Every call is an allowed consume of one of
// 1,000 keys in turn; each scenario runs in fresh processes
// (bench/support/limiter.js) and checks that every call was allowed. On
// Redis two floors: a PING (the round trip alone), and the least script a
// bucket per key on the server's clock without a TTL needs (TIME, ZSCORE,
// ZADD, one integer back), sent with sabsync's key and arguments.
const { runScenario } = require('../support/scenario')

const run = (...args) => runScenario('limiter.js', ...args)

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
      'floor: PING': async ({ quick }) => run('redis', 'floor', quick ? 3000 : 20000),
      'floor: TIME, ZSCORE, ZADD': async ({ quick }) => run('redis', 'least', quick ? 3000 : 20000)
    }
  },
  {
    name: 'RateLimiter consume on Redis, 64 in flight: sabsync/redis vs RateLimiterRedis',
    unit: 'us/op',
    compare: 'rate-limiter-flexible redis',
    goal: 1,
    subjects: {
      sabsync: async ({ quick }) => run('redis64', 'sabsync', quick ? 10000 : 50000),
      'rate-limiter-flexible redis': async ({ quick }) => run('redis64', 'rlf', quick ? 10000 : 50000),
      'floor: PING': async ({ quick }) => run('redis64', 'floor', quick ? 10000 : 50000),
      'floor: TIME, ZSCORE, ZADD': async ({ quick }) => run('redis64', 'least', quick ? 10000 : 50000)
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
