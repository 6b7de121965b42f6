'use strict'
// `npm run demo`: workers and the main thread coordinating through sabsync,
// one scene after another, each printing what happened as it happens.
const path = require('path')
const { spawnSync } = require('child_process')

const scenes = [
  ['wait / waitAsync / notify: a job board', 'demo-core.js'],
  ['Mutex: workers contend, the main thread takes it with lockAsync', 'demo-mutex.js'],
  ['Sema: workers and the main thread share 2 tokens', 'demo-sema.js']
]

let failed = false
for (const [title, file] of scenes) {
  console.log(`\n== ${title} ==`)
  const r = spawnSync(process.execPath, [path.join(__dirname, file)], { stdio: 'inherit' })
  if (r.status !== 0) failed = true
}
process.exitCode = failed ? 1 : 0
