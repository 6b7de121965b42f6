'use strict'
// What the shared-space tests share: unique space names (removed when the
// test ends), and child processes that run a function body in a space
// (test/fixtures/space-child.js) and talk to the test over IPC.
const { fork } = require('child_process')
const fs = require('fs')
const path = require('path')
const sabsync = require('..')

// The private part's layout (src/core/space_layout.h), for tests that
// write the space's file as a co-tenant would: the header (the directory's
// lock word is its word 32), 512 slots of 128 bytes (the slot word, then the
// pid), 256 buckets of 64 bytes (the lock word first), 2048 waiter records
// of 64 bytes, 512 directory entries of 128 bytes, their users (64 bytes
// each: a bit per slot), then the public part.
const LAYOUT = (() => {
  const SLOTS_OFF = 4096
  const NSLOTS = 512
  const BUCKETS_OFF = SLOTS_OFF + NSLOTS * 128
  const NBUCKETS = 256
  const DIR_OFF = BUCKETS_OFF + NBUCKETS * 64 + 2048 * 64
  const USERS_OFF = DIR_OFF + 512 * 128
  const PUBLIC_OFF = USERS_OFF + 512 * 64
  return Object.freeze({ SLOTS_OFF, NSLOTS, BUCKETS_OFF, NBUCKETS, DIR_OFF, USERS_OFF, PUBLIC_OFF, DIR_LOCK: 32 * 4 })
})()

const file = name => `/dev/shm/sabsync.${name}`

function pwrite (name, off, buf) {
  const fd = fs.openSync(file(name), 'r+')
  try { fs.writeSync(fd, buf, 0, buf.length, off) } finally { fs.closeSync(fd) }
}

// The slot words of the space, as a co-tenant reads them.
function slotWords (name) {
  const buf = fs.readFileSync(file(name)).subarray(LAYOUT.SLOTS_OFF, LAYOUT.SLOTS_OFF + LAYOUT.NSLOTS * 128)
  return Array.from({ length: LAYOUT.NSLOTS }, (_, i) => buf.readUInt32LE(i * 128))
}

// Owner ids whose slot word says LIVE (state 1): gen << 9 | slot.
function liveIds (name) {
  const ids = []
  slotWords(name).forEach((w, i) => { if ((w & 3) === 1) ids.push(((w >>> 2) << 9 | i) >>> 0) })
  return ids
}

// The bucket of a cell at byte offset `off` of the space (sab__sbucket_of).
const bucketOf = off => Math.imul(off >>> 2, 0x9E3779B1) >>> 24

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

// Poll fn (what a snapshot or another process shows) until it answers
// something truthy, for up to 15 s (a hang guard), and assert that it did.
async function seen (t, fn, what) {
  const end = Date.now() + 15000
  let got
  while (!(got = fn()) && Date.now() < end) await new Promise(resolve => setTimeout(resolve, 10))
  t.ok(got, what)
  return got
}

module.exports = { spaceName, spawn, LAYOUT, file, pwrite, slotWords, liveIds, bucketOf, seen }
