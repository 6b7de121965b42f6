'use strict'
// Between processes, in a shared space (openShared): a Mutex uncontended
// and contended by 2 processes against the same Mutex within one process
// (threads); the time from a holder's SIGKILL to a waiter's takeover; a
// RateLimit check by each of 4 cluster workers against
// rate-limiter-flexible's cluster mode (every call an IPC round trip to the
// primary); a lock hand-off between 2 processes against proper-lockfile (a
// lock directory, polled). Each scenario runs in fresh processes
// (bench/support/procs.js) and checks its own answer.
const { runScenario } = require('../support/scenario')

const run = (...args) => runScenario('procs.js', ...args)

let peers = true
try { require.resolve('rate-limiter-flexible'); require.resolve('proper-lockfile') } catch { peers = false }

module.exports = [
  {
    name: 'Mutex lock + unlock, uncontended: in a shared space vs in-process',
    unit: 'ns/op',
    compare: 'Mutex (in-process)',
    goal: 1 / 1.2, // within 1.2x of the in-process lock
    subjects: {
      sabsync: async ({ quick }) => run('uncontended', 'space', quick ? 500000 : 3000000),
      'Mutex (in-process)': async ({ quick }) => run('uncontended', 'local', quick ? 500000 : 3000000)
    }
  },
  {
    name: 'Mutex contended by 2 processes (a space) vs by 2 threads (in-process)',
    unit: 'us/op',
    compare: 'Mutex (2 threads)',
    subjects: {
      sabsync: async ({ quick }) => run('contended', 'space', quick ? 20000 : 100000),
      'Mutex (2 threads)': async ({ quick }) => run('contended', 'local', quick ? 20000 : 100000)
    }
  },
  {
    name: 'a space Mutex holder SIGKILLed: ms until a waiter in another process has it (median of kills)',
    unit: 'ms',
    subjects: {
      sabsync: async ({ quick }) => run('takeover', 'sabsync', quick ? 5 : 15)
    }
  },
  peers && {
    name: 'RateLimit check by 4 cluster workers (limit never reached)',
    unit: 'us/op',
    compare: 'rate-limiter-flexible cluster',
    goal: 100,
    subjects: {
      sabsync: async ({ quick }) => run('rate', 'sabsync', quick ? 2000 : 10000),
      'rate-limiter-flexible cluster': async ({ quick }) => run('rate', 'rlf', quick ? 500 : 2000)
    }
  },
  peers && {
    name: 'lock hand-off between 2 processes, both async',
    unit: 'us/op',
    compare: 'proper-lockfile',
    goal: 100,
    tallyNote: (t, runs) => `${t.overlaps} overlapping holders over ${runs} runs`,
    subjects: {
      sabsync: async ({ quick }) => {
        const r = run('handoff', 'sabsync', quick ? 2000 : 10000)
        return { ...r, tally: { overlaps: r.overlaps } }
      },
      'proper-lockfile': async ({ quick }) => {
        const r = run('handoff', 'lockfile', quick ? 30 : 100)
        return { ...r, tally: { overlaps: r.overlaps } }
      }
    }
  }
].filter(Boolean)
