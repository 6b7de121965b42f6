#!/usr/bin/env node
'use strict'
// `npm run stress`: stress and soak runs over the primitives (not part of
// `npm test`). Each scenario checks its invariants and must end within its
// deadline. Prints one line per scenario and `N passed, M failed`.
// [name, run, deadline in ms (default DEADLINE_MS)]
const chaos = '7 workers + main (async), random timeouts, aborts, terminations, process.exit()'
const p = name => require('./' + name)
const scenarios = [
  ['token ring: wait/waitAsync/notify, 6 workers + main, random timeouts, aborts, terminations', () => require('./core').tokenRing()],
  ['soak: 1,000,000 waitAsync with timeouts', () => require('./core').soakWaitAsync()],
  [`Mutex: counter under lock/tryLock/lockAsync/runExclusive, ${chaos}`, () => p('mutex').mutexScenario(), 60000],
  [`AtomicFlag: counter under testAndSet/wait/waitAsync/notify, ${chaos}`, () => p('atomic-flag').flagScenario(), 60000],
  [`Once: 16,000 Onces, fn sleeps/throws/dies, run/runAsync, ${chaos}`, () => p('once').onceScenario(), 60000],
  [`Latch: countDown/wait/waitAsync/arriveAndWait over a moving window, ${chaos}`, () => p('latch').latchScenario(), 60000],
  [`CondVar: bounded queue (Mutex + 2 CondVars), producers/consumers, ${chaos}`, () => p('condvar').condScenario(), 60000],
  [`RWLock: readers/writers (3 reader slots), sync/try/async forms, ${chaos}`, () => p('rwlock').rwScenario(), 60000],
  ['Barrier: 7 parties in epochs of rounds, reset() between, 6 workers + main (async), random timeouts, aborts, terminations, process.exit()', () => p('barrier').barrierScenario(), 60000],
  [`Sema: 3 tokens, acquireSync/tryAcquire/acquire/release, ${chaos}`, () => p('sema').semaScenario(), 60000],
  ['Sema fast path vs its protocol table: 6 workers mix fast takes/give-backs with native waits on 3 tokens, terminations', () => require('./sema-fast').semaFastScenario(), 60000],
  ['Sema bounded fairness: 6 workers contend on 1 token (sync, async, try), every worker served in every second, terminations', () => require('./sema-fast').semaFairScenario(), 60000],
  [`RateLimit: 20 per 50 ms and uniform 10 per 40 ms, sync/async, ${chaos}`, () => p('rate-limit').rateScenario(), 60000],
  ['soak: 1,000,000 lockAsync/unlock cycles, a worker contending part of the time', () => p('mutex').soakLockAsync(), 120000],
  ['space: 3 processes on a Mutex, a Sema of 2 and an RWLock, one SIGKILLed every 5-45 ms for 60 s: never two inside, nothing lost', () => p('space-kill').spaceKill(60), 120000],
  ['scribble: Sema and RateLimit memory flipped word by word to hostile values while 4 workers use them and others are terminated, 8 seeds each', () => scribbleLong(), 240000]
]

// The race fuzzer of test/scribble.test.js, longer: more seeds, more users,
// 4 s each.
async function scribbleLong () {
  const { scribble } = require('../test/scribble')
  const lines = []
  for (const [kind, nr] of [['sema', 3], ['sema', 1], ['rate', 4], ['rate', 1]]) {
    for (let seed = 1; seed <= 8; seed++) {
      const r = await scribble({ kind, nr, ms: 4000 / (kind === 'rate' ? 2 : 1), users: 4, seed: 1000 + seed })
      if (!r.ok) return { ok: false, detail: `${kind}(${nr}) seed ${1000 + seed}: ${r.problems.join('; ')}` }
      lines.push(`${kind}(${nr})#${seed}: ${r.flips} flips, ${r.ops} ops, ${r.terminated} terminated`)
    }
  }
  return { ok: true, detail: lines.join('; ') }
}

const only = process.argv.slice(2).filter(a => !a.startsWith('--'))
const DEADLINE_MS = 240000

// A scenario's deadline counts the CPU time this process (its workers are
// threads of it) got, not the wall clock: on a loaded machine a scenario
// gets less of the CPUs and needs longer, and its deadline with it. A hang
// parks every thread and takes no CPU, so the wall clock still bounds a
// run: HANG_FACTOR times the deadline.
const HANG_FACTOR = 10
const cpuMs = since => {
  const u = process.cpuUsage(since)
  return (u.user + u.system) / 1000
}

// Answers a failure once a scenario is past its deadline, else undefined.
function overDeadline (ms, t0, cpu0) {
  const cpu = cpuMs(cpu0)
  const wall = Date.now() - t0
  if (cpu > ms) return { ok: false, detail: `did not end within ${ms / 1000} s of CPU time` }
  if (wall > ms * HANG_FACTOR) {
    return { ok: false, detail: `did not end within ${ms * HANG_FACTOR / 1000} s (a hang: it had ${(cpu / 1000).toFixed(1)} s of CPU meanwhile)` }
  }
  return undefined
}

async function main () {
  let passed = 0
  let failed = 0
  for (const [name, run, ms = DEADLINE_MS] of scenarios) {
    if (only.length && !only.some(w => name.includes(w))) continue
    const t0 = Date.now()
    const cpu0 = process.cpuUsage()
    let timer
    const deadline = new Promise(resolve => {
      timer = setInterval(() => {
        const over = overDeadline(ms, t0, cpu0)
        if (over !== undefined) resolve(over)
      }, 250)
    })
    let r
    try {
      r = await Promise.race([run(), deadline])
    } catch (err) {
      r = { ok: false, detail: err.stack }
    }
    clearInterval(timer)
    const cpu = cpuMs(cpu0)
    console.log(`${r.ok ? 'ok    ' : 'FAILED'} ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s, ${(cpu / 1000).toFixed(1)} s of CPU): ${r.detail}`)
    r.ok ? passed++ : failed++
  }
  console.log(`${passed} passed, ${failed} failed`)
  process.exit(failed ? 1 : 0)
}

main()
