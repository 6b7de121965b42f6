'use strict'
// Why fences matter: a holder that stalls past its lease (a long GC pause,
// a stopped VM, a blocked event loop) wakes up believing it still holds
// the lock. By then another holder has it. The resource tells them apart
// by the fence each grant carries: it remembers the largest fence it has
// seen and refuses writes with a smaller one.
//
//   REDIS_URL=redis://127.0.0.1:6379 node examples/redis-fencing.js
const Redis = require('ioredis')
const { Mutex } = require('sabsync/redis')

const [ra, rb] = [new Redis(process.env.REDIS_URL), new Redis(process.env.REDIS_URL)]

// The resource: a record that keeps the largest fence it accepted. (A SQL
// table would do the same with UPDATE ... WHERE fence <= $1.)
ra.defineCommand('fencedWrite', {
  numberOfKeys: 1,
  lua: `local seen = tonumber(redis.call('HGET', KEYS[1], 'fence') or '0')
        if tonumber(ARGV[1]) < seen then return 0 end
        redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'value', ARGV[2])
        return 1`
})
const write = async (fence, value) => (await ra.fencedWrite('report', fence, value)) === 1 ? 'accepted' : 'refused'

async function main () {
  const a = new Mutex(ra, 'report-lock', { lease: 500 })
  const b = new Mutex(rb, 'report-lock', { lease: 500 })
  const fenceA = await a.lockAsync()
  console.log('A holds the lock')
  const granted = b.lockAsync() // B queues behind A

  // A stalls: nothing runs in this process for 800 ms, so A's lease (500
  // ms) is not renewed, and the server hands the lock to B.
  const end = Date.now() + 800
  while (Date.now() < end);

  const fenceB = await granted
  console.log(`B holds the lock, fence B > fence A: ${fenceB > fenceA}`)
  console.log(`B writes: ${await write(fenceB, 'from B')}`)
  // A resumes where it stopped, and writes as if it still held the lock.
  console.log(`A writes: ${await write(fenceA, 'from A')}`)
  console.log(`A's lease was lost: ${a.lost.aborted}; A's unlock(): ${await a.unlock()}`)
  console.log(`the report says: ${await ra.hget('report', 'value')}`)
  await b.unlock()
}

main().finally(() => { ra.quit(); rb.quit() })
