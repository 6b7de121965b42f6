'use strict'
// A real express app with express-rate-limit, in a 2-worker cluster, whose
// store is one RateLimiter in a shared space: the limit holds across both
// workers (the default memory store would let a client through once per
// worker), and the refusals are 429s with Retry-After and RateLimit headers.
// The app: test/fixtures/rate-limiter/express-cluster.js.
const t = require('tap')
const path = require('path')
const http = require('http')
const { fork } = require('child_process')
const { spaceName } = require('./space-helpers')

function get (port) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', agent: false }, res => {
      res.resume()
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers }))
    })
    req.on('error', reject)
  })
}

t.test('express + express-rate-limit in a 2-worker cluster, one limit for both', async t => {
  const name = spaceName(t)
  const primary = fork(path.join(__dirname, 'fixtures', 'rate-limiter', 'express-cluster.js'), [name], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc']
  })
  const exited = new Promise(resolve => primary.once('exit', resolve))
  t.teardown(async () => { primary.send('stop'); await exited })
  const { port } = await new Promise((resolve, reject) => {
    primary.once('message', resolve)
    primary.once('exit', code => reject(new Error('the cluster exited with ' + code)))
  })
  const answers = []
  for (let i = 0; i < 8; i++) answers.push(await get(port))
  t.same(answers.map(a => a.status), [200, 200, 200, 429, 429, 429, 429, 429], 'three for the client, across both workers, then 429')
  t.equal(new Set(answers.map(a => a.headers['x-worker'])).size, 2, 'both workers answered')
  const refused = answers[3].headers
  const retry = Number(refused['retry-after'])
  t.ok(retry >= 1 && retry <= 20, `Retry-After: ${refused['retry-after']} s (a point refills in 20 s)`)
  t.match(refused.ratelimit, /"6-in-1min"; r=0; t=\d+/, `RateLimit: ${refused.ratelimit}`)
  // What the policy says is what is enforced: burst 3, refilled 3 a
  // minute, is at most 6 in any minute (limiter.mostIn(60000)).
  t.match(refused['ratelimit-policy'], /q=6; w=60/, `RateLimit-Policy: ${refused['ratelimit-policy']}`)
  t.match(answers[0].headers.ratelimit, /r=2/, `the first answer has 2 left: ${answers[0].headers.ratelimit}`)
})
