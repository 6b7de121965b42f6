'use strict'
// What the shared-space tests share: unique space names (removed when the
// test ends), and child processes that run a function body in a space
// (test/fixtures/space-child.js) and talk to the test over IPC.
const { fork } = require('child_process')
const path = require('path')
const sabsync = require('..')

const fixture = path.join(__dirname, 'fixtures', 'space-child.js')
let counter = 0

// A fresh space name for test `t`; the space is unlinked at its end.
function spaceName (t) {
  const name = `test-${process.pid}-${++counter}`
  sabsync.openShared.unlink(name)
  t.teardown(() => sabsync.openShared.unlink(name))
  return name
}

// A child process running `body` in space `name`. Answers the process with
// `message(pred)` (the first message, past or future, that pred accepts),
// `done` (a promise of its { done } or { error } message and exit), and
// `exited` (its { code, signal }). Killed at the end of `t` if still alive.
function spawn (t, name, body) {
  const p = fork(fixture, [body, name], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] })
  const seen = []
  const waiters = []
  p.on('message', m => {
    seen.push(m)
    for (let i = 0; i < waiters.length; i++) {
      if (waiters[i].pred(m)) waiters.splice(i--, 1)[0].resolve(m)
    }
  })
  p.exited = new Promise(resolve => p.once('exit', (code, signal) => resolve({ code, signal })))
  p.message = pred => {
    const m = seen.find(pred)
    if (m !== undefined) return Promise.resolve(m)
    return new Promise(resolve => waiters.push({ pred, resolve }))
  }
  p.done = p.message(m => m !== null && typeof m === 'object' && ('done' in m || 'error' in m)).then(m => {
    if ('error' in m) throw new Error('child failed: ' + m.error)
    return m.done
  })
  p.done.catch(() => {}) // observed by whoever awaits it
  // A child still starting when its test ends may open (and so create) the
  // space after the name's teardown removed it: once it is gone, the name
  // is removed again, so that a run leaves nothing in /dev/shm.
  t.teardown(async () => {
    if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL')
    await p.exited
    if (name !== '-') sabsync.openShared.unlink(name)
  })
  return p
}

module.exports = { spaceName, spawn }
