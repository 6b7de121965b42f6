'use strict'
// The README's first example, taken from README.md as it is and run as a
// user runs it: it must show what it claims. The worker sleeps in wait()
// and the main thread's notify wakes it (notify answers 1, wait 'ok'). A
// version that notified before the worker was queued answered 0, and the
// worker's wait answered 'not-equal' without ever sleeping.
const t = require('tap')
const fs = require('fs')
const path = require('path')
const { spawn } = require('child_process')
const { root, plainEnv } = require('./helpers')

function quickStart () {
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8')
  const from = readme.indexOf('## Quick start')
  const open = readme.indexOf('```js\n', from)
  const close = readme.indexOf('\n```', open + 6)
  if (from < 0 || open < 0 || close < 0) throw new Error('README.md has no ```js block under "## Quick start"')
  return readme.slice(open + 6, close + 1)
}

function run (code) {
  return new Promise(resolve => {
    // cwd: the package root, where require('sabsync') finds this package
    // by its own name, as in a project that installed it.
    const p = spawn(process.execPath, ['-e', code], { cwd: root, env: plainEnv(), stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    p.stdout.on('data', d => { stdout += d })
    p.stderr.on('data', d => { stderr += d })
    const timer = setTimeout(() => p.kill('SIGKILL'), 60000)
    p.on('exit', code => { clearTimeout(timer); resolve({ code, stdout, stderr }) })
  })
}

t.test('the quick-start example: the worker sleeps until notify wakes it', async t => {
  const code = quickStart()
  t.match(code, /require\('sabsync'\)/, 'the block found is the example')
  for (let i = 0; i < 3; i++) {
    const r = await run(code)
    t.equal(r.code, 0, r.stderr)
    t.same(r.stdout.split('\n').filter(Boolean).sort(), ['main: woke 1', 'worker: ok'],
      'notify woke one queued waiter, and wait answered ok')
  }
})

// Each top-level section once: a merge that appended an old copy of four
// sections (How it is built .. Benchmarks) went unnoticed for a landing,
// and a reader met the benchmark table twice, with different figures.
t.test('the README has each section once', async t => {
  const readme = fs.readFileSync(path.join(root, 'README.md'), 'utf8')
  const headings = readme.split('\n').filter(l => l.startsWith('## '))
  t.ok(headings.length >= 10, `${headings.length} sections`)
  t.same(headings.filter((h, i) => headings.indexOf(h) !== i), [], 'no section heading repeats')
})
