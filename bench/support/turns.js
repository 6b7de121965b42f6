'use strict'
// What the in-process turn tools share (redis-turns.js,
// redis-lock-turns.js): a connection per subject on SABSYNC_REDIS_URL,
// the median, and the end of a run (its keys deleted, every connection
// closed).
const Redis = require('ioredis')

const median = xs => { const s = [...xs].sort((a, b) => a - b); return s[s.length >> 1] }

function connections () {
  const url = process.env.SABSYNC_REDIS_URL
  if (!url) throw new Error('set SABSYNC_REDIS_URL')
  const clients = []
  return {
    client () {
      const c = new Redis(url)
      clients.push(c)
      return c
    },
    // Deletes the keys matching `patterns` (KEYS: a bench's own server),
    // then closes every connection made here.
    async end (patterns) {
      const admin = clients[0]
      for (const pattern of patterns) {
        const keys = await admin.keys(pattern)
        for (let i = 0; i < keys.length; i += 1000) await admin.del(...keys.slice(i, i + 1000))
      }
      for (const c of clients) c.disconnect()
    }
  }
}

module.exports = { median, connections }
