'use strict'
// One of the two processes of bench/redis.js's one-waiter hand-off case,
// and of its reference rows. The two take turns: the one that holds waits
// until the other has asked (it says so over IPC, through the parent) and
// 3 to 13 ms more (at random: a poller's retries fall anywhere in its
// interval), so that the other's request has been answered and it is
// waiting, then leaves; the other enters. Nothing else runs against the
// lock, so the time from leaving to entering is the hand-off alone: the
// wake-up of a queued waiter, or the rest of a poller's retry interval.
// argv: JSON { subject, url, key, role (0 starts holding), n, lease }.
// subject: 'sabsync' | 'redlock' | 'redis-semaphore', or for the
// references 'publish' (PUBLISH to a channel the other is subscribed to)
// and 'blpop' (LPUSH to a list the other is blocked on in BLPOP).
// Messages in: 'go', then the other's 'asked' and 'entered'; out:
// 'ready', 'asked' and 'entered' (for the other), then { left: [ns...],
// entered: [ns...] }. The one that left asks again only once the other is
// in.
const Redis = require('ioredis')
const { lockOf: libraryLock } = require('./redis-lock')

const { subject, url, key, role, n, lease } = JSON.parse(process.argv[2])
const redis = new Redis(url)
const now = () => Number(process.hrtime.bigint())
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms))
const left = []
const entered = []

// Signals from the other process ('asked', 'entered'), relayed by the
// parent; one can come before this process looks for it.
const signals = { asked: { pending: 0, wake: null }, entered: { pending: 0, wake: null } }
process.on('message', m => {
  const s = signals[m]
  if (s === undefined) return
  if (s.wake) { const w = s.wake; s.wake = null; w() } else s.pending++
})
const other = name => new Promise(resolve => {
  const s = signals[name]
  if (s.pending > 0) { s.pending--; resolve() } else s.wake = resolve
})

function lockOf () {
  const lib = libraryLock(subject, redis, key, lease)
  if (lib !== null) return lib
  // A bare message to the other process: the least a wake-up takes.
  const sub = new Redis(url)
  const mine = `${key}:${role}`
  const theirs = `${key}:${1 - role}`
  let next = null
  if (subject === 'publish') sub.on('message', () => { if (next) next() })
  return {
    ready: subject === 'publish' ? sub.subscribe(mine) : sub.ping(),
    acquire: () => subject === 'publish' ? new Promise(resolve => { next = resolve }) : sub.blpop(mine, 0),
    release: () => subject === 'publish' ? redis.publish(theirs, 'x') : redis.lpush(theirs, 'x'),
    close: () => sub.disconnect()
  }
}

async function main () {
  const lock = lockOf()
  await (lock.ready || redis.ping())
  if (role === 0 && lock.ready === undefined) await lock.acquire()
  process.send('ready')
  await new Promise(resolve => process.once('message', m => { if (m === 'go') resolve() }))
  const give = async () => {
    await other('asked')
    await sleep(3 + Math.random() * 10)
    left.push(now())
    await lock.release()
    // Not back before the other is in: a poller would take it straight back.
    await other('entered')
  }
  const take = async () => {
    const p = lock.acquire()
    process.send('asked')
    await p
    entered.push(now())
    process.send('entered')
  }
  for (let i = 0; i < n; i++) {
    if (role === 0) { await give(); await take() } else { await take(); await give() }
  }
  if (role === 0 && lock.ready === undefined) await lock.release()
  if (lock.close) lock.close()
  process.send({ left, entered }, () => { redis.disconnect(); process.disconnect() })
}
main().catch(err => { console.error(err); process.exit(1) })
