'use strict'
// The Sema and RateLimit examples run, exit 0, and say what they should.
const t = require('tap')
const path = require('path')
const { execFile } = require('child_process')
const { root, plainEnv } = require('./helpers')

function run (file) {
  return new Promise(resolve => {
    execFile(process.execPath, [path.join(root, 'examples', file)], { cwd: root, timeout: 30000, env: plainEnv() }, (err, stdout, stderr) => {
      resolve({ code: err ? (err.code ?? err.signal) : 0, stdout, stderr })
    })
  })
}

const expected = {
  'sema-pool.js': [/slots used by two threads at once: 0/, /all 3 connections back: true/],
  'rate-limited-workers.js': [/40 calls from 4 workers/, /never more than 10 calls in any 250 ms/],
  'sema-backpressure.js': [/200 of 200 lines processed/, /stream paused [1-9]\d* times, resumed [1-9]\d* times/],
  'demo-sema.js': [/at most [12] holders at once \(tokens: 2\)/, /recovered from the dead worker: \d/]
}

for (const [file, patterns] of Object.entries(expected)) {
  t.test(file, async t => {
    const r = await run(file)
    t.equal(r.code, 0, r.stderr)
    for (const p of patterns) t.match(r.stdout, p)
  })
}
