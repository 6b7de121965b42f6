'use strict'
// sabsync/redis: a wake-up is a hint, never a state change on its own. A
// client that may only PUBLISH (and list channels: PUBSUB CHANNELS shows
// the wake channels, and waiter ids are "<client id>:<n>", guessable)
// forges wakes for a waiter; then the server loses its state (FLUSHALL).
// The waiter answers as it does without the forgery: it rejects with
// ERR_SABSYNC_REDIS (its place is gone), and is never granted while the old
// holder may still think it holds. A server of this file's own (FLUSHALL).
const t = require('tap')
const { redisSuite, until, tick } = require('./fixtures/redis/suite')
const { Mutex } = require('../lib/redis')

redisSuite(t, async s => {
  const { client, admin } = s
  let forger = null

  // What the forger can do: list wake channels and publish on them.
  async function forgeAll () {
    if (forger === null) {
      await admin.acl('SETUSER', 'forger', 'reset', 'on', 'nopass', 'resetchannels', '&sabsync:wake:*', '+publish', '+pubsub|channels')
      forger = client({ username: 'forger', password: 'x', enableReadyCheck: false })
    }
    const channels = await forger.pubsub('CHANNELS', 'sabsync:wake:*')
    let heard = 0
    for (const ch of channels) {
      const hub = ch.slice('sabsync:wake:'.length)
      for (let n = 1; n <= 8; n++) heard += await forger.publish(ch, `${hub}:${n.toString(36)}`)
    }
    return heard
  }

  // A holder, a queued waiter; `before` runs between the queueing and the
  // flush (forging or not), `after` after it. Returns what the waiter's
  // lockAsync settled with, and whether it ever held alongside another.
  async function scenario (t, key, before, after) {
    const [a, b] = [client(), client()]
    const holder = new Mutex(a, key, { lease: 5000 })
    const waiter = new Mutex(b, key, { lease: 5000, heartbeat: 600 })
    await holder.lockAsync()
    // Wake channels of earlier tests' clients linger a few seconds.
    const earlier = await admin.pubsub('CHANNELS', 'sabsync:wake:*')
    const waiting = waiter.lockAsync().then(fence => ({ fence }), error => ({ error }))
    await until(async () => (await holder.nrWaiting()) === 1, 'the waiter to queue')
    await until(async () => (await admin.pubsub('CHANNELS', 'sabsync:wake:*')).some(c => !earlier.includes(c)), 'the waiter\'s client to subscribe')
    await before()
    await admin.flushall()
    await after()
    const got = await waiting
    if (got.fence !== undefined) await waiter.unlock()
    await holder.unlock().catch(() => {})
    return got
  }

  const variants = [
    ['no forgery (the documented answer)', async () => {}, async () => {}],
    ['forged wakes, a beat, then the flush', async t => {
      t.ok(await forgeAll() > 0, 'the waiter\'s client heard the forged wakes')
      await tick(100)
    }, async () => {}],
    ['forged wakes and the flush back to back', async t => {
      t.ok(await forgeAll() > 0, 'heard')
    }, async () => {}],
    ['the flush, another client takes the lock, then forged wakes', async () => {}, async t => {
      const other = new Mutex(client(), 'variant-3', { lease: 5000 })
      t.type(await other.lockAsync(), 'number', 'the emptied server grants another client at once')
      t.ok(await forgeAll() > 0, 'heard')
      await tick(700)
      await other.unlock()
    }]
  ]
  variants.forEach(([name, before, after], i) => {
    s.test(name, async t => {
      const t0 = performance.now()
      const got = await scenario(t, 'variant-' + i, () => before(t), () => after(t))
      t.notOk(got.fence !== undefined, 'the waiter is not granted' + (got.fence !== undefined ? ` (fence ${got.fence})` : ''))
      t.equal(got.error && got.error.code, 'ERR_SABSYNC_REDIS', 'it rejects: ' + (got.error && got.error.message))
      t.match(got.error && got.error.message, /place in the queue .* is gone/, 'its place is gone')
      const ms = performance.now() - t0
      t.ok(ms < 600 + 5000, `within its heartbeat and slack (${Math.round(ms)} ms)`)
    })
  })
}, { own: true })
