'use strict'
// The race fuzzer of shared memory (test/scribble.js), briefly: each kind
// whose state the C code reads, with every word flipped between good and
// hostile values while other threads use the object. SCRIBBLE_MS and
// SCRIBBLE_SEEDS make it longer; `npm run stress` runs a long form.
const t = require('tap')
const { scribble } = require('./scribble')

const ms = Number(process.env.SCRIBBLE_MS) || 1200

// Workers started and terminated by the dozen: far past the suite's 120 s per
// file when the machine is loaded (seen at a load average of 20), though
// 15-20 s on an idle one.
t.setTimeout(600000)
const seeds = Number(process.env.SCRIBBLE_SEEDS) || 2

for (const [kind, nr] of [['sema', 3], ['sema', 1], ['rate', 4]]) {
  for (let seed = 1; seed <= seeds; seed++) {
    t.test(`${kind === 'sema' ? 'Sema' : 'RateLimit'}(${nr}), seed ${seed}: scribbled memory earns errors or wrong answers, never a memory error`, async t => {
      const r = await scribble({ kind, nr, ms, seed })
      t.same(r.problems, [], 'no answer outside the contract, guards intact, healthy after the repair')
      t.ok(r.flips > 0, `${r.flips} flips`)
      t.ok(r.ops > 0, `${r.ops} operations by the users, ${r.tokens} tokens or grants, ${r.timeouts} timeouts, ${r.terminated} users terminated, errors ${JSON.stringify(r.errors)}`)
    })
  }
}
