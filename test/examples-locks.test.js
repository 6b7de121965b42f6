'use strict'
// The lock examples run and report success (each checks its own result and
// sets a non-zero exit code when it is wrong).
const t = require('tap')
const { spawn } = require('child_process')
const path = require('path')
const { plainEnv } = require('./helpers')

function run (file) {
  return new Promise(resolve => {
    const p = spawn(process.execPath, [path.join(__dirname, '..', 'examples', file)], { stdio: ['ignore', 'pipe', 'pipe'], env: plainEnv() })
    let out = ''
    p.stdout.on('data', d => { out += d })
    p.stderr.on('data', d => { out += d })
    const timer = setTimeout(() => p.kill('SIGKILL'), 30000)
    p.on('exit', code => { clearTimeout(timer); resolve({ code, out }) })
  })
}

const expectations = {
  'frame-ready.js': /compositor showed 30 frames, checksum 476160 \(expected 476160\)/,
  'mutex-counter.js': /counter (\d+), expected \1 /,
  'once-init.js': /^1 leader, 4\/4 workers saw the table, init attempted 2 times/m,
  'latch-cache-refresh.js': /readers saw versions 2, 2, 2/,
  'demo-mutex.js': /counter = (\d+), sum of increments = \1: exact[^]*ownerDied: true/,
  'bounded-queue.js': /consumed 1500 distinct items, sum 1125750 \(expected 1125750\)/,
  'rwlock-config.js': /\d+ consistent reads, 0 torn, final version 50/,
  'barrier-phases.js': /100 steps, 100 leaders \(one per step\), total 1000\.000000/
}

for (const [file, pattern] of Object.entries(expectations)) {
  t.test(file, async t => {
    const { code, out } = await run(file)
    t.equal(code, 0, out)
    t.match(out, pattern)
  })
}
