'use strict'
// letGo(redis): on shutdown (SIGTERM from a deploy, SIGINT from PM2 or a
// terminal), give back at once every lock and token held through this
// client, so that the next waiter on any machine gets it now rather than
// when its lease runs out. Each holding's `lost` signal aborts with
// ERR_SABSYNC_LEASE_LOST, so code still inside a critical section can tell
// it no longer holds (its unlock() / release() then answers false /
// resolves, as for a lost lease). The client stays usable: quit() it after.

const { hubOf } = require('./hub')
const { checkClient } = require('./common')

/**
 * Resolves with the number of leases given back (those that had run out
 * on the server already are not counted); rejects with ERR_SABSYNC_REDIS
 * if the server cannot be reached (the leases are no longer renewed, so
 * they run out there).
 */
async function letGo (redis) {
  checkClient(redis)
  const hub = hubOf(redis)
  const held = [...hub.holdings, ...hub.leases]
  const answers = await Promise.allSettled(held.map(h => h.giveUp()))
  const failed = answers.find(a => a.status === 'rejected')
  if (failed !== undefined) throw failed.reason
  return answers.filter(a => a.value === true).length
}

module.exports = { letGo }
