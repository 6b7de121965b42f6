'use strict'
// What the tests of the `sabsync` command share (test/inside-cli*.test.js):
// running it, and a busy space to look at.
const path = require('path')
const { spawnSync } = require('child_process')
const { spaceName, spawn } = require('./space-helpers')

const root = path.join(__dirname, '..')
const bin = path.join(root, 'bin', 'sabsync.js')

function cli (args, cwd = root, command = process.execPath, pre = [bin]) {
  const r = spawnSync(command, [...pre, ...args], { cwd, encoding: 'utf8', timeout: 120000 })
  return { code: r.status, out: r.stdout, err: r.stderr }
}

// A space with a mutex held by one child, a Sema whose token it holds, a
// second child waiting for the Sema, and a limiter with two keys.
async function busySpace (t) {
  const name = spaceName(t)
  const holder = spawn(t, name, `
    space.mutex('jobs').lock()
    space.sema('pool', 1).tryAcquire()
    const limiter = space.rateLimiter('api', { limit: 5, window: 60000, keys: 32 })
    limiter.consume('1.2.3.4'); limiter.consume('5.6.7.8')
    send('ready')
    await next()
  `)
  await holder.message(m => m === 'ready')
  const waiter = spawn(t, name, `
    const pool = space.sema('pool', 1)
    send('asking')
    pool.release(await pool.acquire())
  `)
  await waiter.message(m => m === 'asking')
  return { name, holder, waiter }
}

module.exports = { root, bin, cli, busySpace }
