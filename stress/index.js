#!/usr/bin/env node
'use strict'
// `npm run stress`: stress and soak runs over the primitives (not part of
// `npm test`). Each scenario checks its invariants and must end within its
// deadline. Prints one line per scenario and `N passed, M failed`.
const scenarios = [
  ['token ring: wait/waitAsync/notify, 6 workers + main, random timeouts, aborts, terminations', () => require('./core').tokenRing()],
  ['soak: 1,000,000 waitAsync with timeouts', () => require('./core').soakWaitAsync()]
]

const only = process.argv.slice(2).filter(a => !a.startsWith('--'))
const DEADLINE_MS = 240000

async function main () {
  let passed = 0
  let failed = 0
  for (const [name, run] of scenarios) {
    if (only.length && !only.some(w => name.includes(w))) continue
    const t0 = Date.now()
    let timer
    const deadline = new Promise((resolve) => { timer = setTimeout(resolve, DEADLINE_MS, { ok: false, detail: `did not end within ${DEADLINE_MS / 1000} s` }) })
    let r
    try {
      r = await Promise.race([run(), deadline])
    } catch (err) {
      r = { ok: false, detail: err.stack }
    }
    clearTimeout(timer)
    console.log(`${r.ok ? 'ok    ' : 'FAILED'} ${name} (${((Date.now() - t0) / 1000).toFixed(1)} s): ${r.detail}`)
    r.ok ? passed++ : failed++
  }
  console.log(`${passed} passed, ${failed} failed`)
  process.exit(failed ? 1 : 0)
}

main()
