'use strict'
// sabsync's JavaScript a free lock+unlock, without the round trips: a
// Mutex on an ioredis client whose EVALSHA of the free lock's two scripts
// answers at once (a grant with a growing fence, then 1), against the same
// two answers awaited bare. Prints µs a pair for each, and the
// difference: what the Mutex's own code costs, hot (in a loop with nothing
// else between the calls; between real replies it costs more, see
// bench/README.md). The client still connects, for the eviction check of
// the first call.
//
//   SABSYNC_REDIS_URL=redis://... node bench/support/redis-lock-js.js [pairs]
//
// pairs (default 200,000). SABSYNC_BENCH_BEFORE: another checkout's
// lib/redis, measured in turns with this tree's.
const path = require('path')
const { execFileSync } = require('child_process')
const Redis = require('ioredis')

const pairs = Number(process.argv[2]) || 200000

async function measure (lib) {
  const { Mutex } = require(path.join(lib, 'index.js'))
  const { direct } = require(path.join(lib, 'scripts.js'))
  const take = direct.sabsync2TakeFree.sha
  const leave = direct.sabsync2LeaveFree.sha
  const redis = new Redis(process.env.SABSYNC_REDIS_URL)
  await redis.ping()
  const real = redis.evalsha.bind(redis)
  let fence = Date.now() * 1000
  redis.evalsha = (sha, ...args) => sha === take ? Promise.resolve(++fence) : sha === leave ? Promise.resolve(1) : real(sha, ...args)
  const m = new Mutex(redis, 'lock-js')
  for (let i = 0; i < 1000; i++) { await m.lockAsync(); await m.unlock() } // the eviction check; warm up
  let t0 = process.hrtime.bigint()
  for (let i = 0; i < pairs; i++) { await m.lockAsync(); await m.unlock() }
  const ours = Number(process.hrtime.bigint() - t0) / 1e3 / pairs
  const ev = redis.evalsha
  t0 = process.hrtime.bigint()
  for (let i = 0; i < pairs; i++) { await ev(take, 1, 'k', 'id', 10000, 1); await ev(leave, 1, 'k', 'id') }
  const bare = Number(process.hrtime.bigint() - t0) / 1e3 / pairs
  redis.disconnect()
  return { ours, bare }
}

// Each tree in processes of its own (a second tree measured in the same
// process pays for the first's compiled code), in turns, three times.
async function main () {
  if (!process.env.SABSYNC_REDIS_URL) throw new Error('set SABSYNC_REDIS_URL')
  if (process.argv[3] === '--one') {
    console.log(JSON.stringify(await measure(process.argv[4])))
    return
  }
  const libs = { sabsync: path.join(__dirname, '..', '..', 'lib', 'redis') }
  if (process.env.SABSYNC_BENCH_BEFORE) libs.before = path.resolve(process.env.SABSYNC_BENCH_BEFORE)
  for (let round = 0; round < 3; round++) {
    for (const [name, lib] of Object.entries(libs)) {
      const out = execFileSync(process.execPath, [__filename, String(pairs), '--one', lib], { encoding: 'utf8' })
      const { ours, bare } = JSON.parse(out.trim().split('\n').pop())
      console.log(`${name.padEnd(8)} ${ours.toFixed(3)} µs a pair, the bare answers ${bare.toFixed(3)}: its JavaScript ${(ours - bare).toFixed(3)} µs`)
    }
  }
}

main().catch(err => { console.error(err); process.exit(1) })
