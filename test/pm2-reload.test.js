'use strict'
// `pm2 reload` of the README's cluster example with a changed limit (issue
// 31): the example as written (its space name and port made unique), run
// by a real PM2 (a dev dependency) in cluster mode with 4 instances, under
// a private PM2_HOME whose daemon is killed at the end. Judged: after the
// reload every instance is online, none restarted unstably, no instance
// logged an error, and the new limit is in force (counted from a client
// address the old release never saw: 127.0.0.2).
const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const http = require('http')
const { execFile } = require('child_process')
const { blocks, freePort } = require('./fixtures/markdown/blocks')
const { openShared } = require('..')

t.setTimeout(240000)
if (process.platform !== 'linux') {
  t.plan(0, 'shared spaces need Linux')
  process.exit(0)
}

const root = path.join(__dirname, '..')
const pm2Bin = path.join(root, 'node_modules', 'pm2', 'bin', 'pm2')
const tick = ms => new Promise(resolve => setTimeout(resolve, ms))

function get (port, localAddress) {
  return new Promise(resolve => {
    const req = http.get({ host: '127.0.0.1', port, path: '/', agent: false, localAddress }, res => {
      res.resume()
      res.on('end', () => resolve(res.statusCode))
    })
    req.on('error', () => resolve(null))
    req.setTimeout(5000, () => req.destroy())
  })
}

// n requests from `from`, one after another: how many were allowed.
async function allowed (port, from, n) {
  let ok = 0
  for (let i = 0; i < n; i++) {
    const s = await get(port, from)
    if (s === 200) ok++
    else if (s !== 429) throw new Error(`status ${s} from the server`)
  }
  return ok
}

t.test('pm2 reload of the README cluster example with a changed limit', async t => {
  const block = blocks(path.join(root, 'README.md')).find(b => b.mode === 'server' && b.code.includes('rateLimiter('))
  t.ok(block, 'the README\'s cluster example')
  const name = `test-pm2-${process.pid}`
  const port = await freePort()
  const release = limit => {
    let code = block.code
    for (const [from, to] of [["require('sabsync')", `require(${JSON.stringify(root)})`],
      ["openShared('api'", `openShared(${JSON.stringify(name)}`], ['limit: 100,', `limit: ${limit},`], ['.listen(3000)', `.listen(${port})`]]) {
      if (!code.includes(from)) throw new Error(`the README's cluster example no longer has ${from}`)
      code = code.replace(from, to)
    }
    return code
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sabsync-pm2-'))
  const home = path.join(dir, 'pm2-home')
  const app = path.join(dir, 'app.js')
  const env = { ...process.env, PM2_HOME: home, FORCE_COLOR: '0', NO_COLOR: '1' }
  delete env.NODE_OPTIONS // not the test runner's loaders
  const pm2 = (...args) => new Promise((resolve, reject) => {
    execFile(process.execPath, [pm2Bin, ...args], { env, cwd: dir, timeout: 60000 }, (err, stdout, stderr) => {
      if (err) reject(new Error(`pm2 ${args.join(' ')}: ${err.message}\n${stdout}${stderr}`))
      else resolve(stdout)
    })
  })
  t.teardown(async () => {
    await pm2('kill').catch(() => {})
    // The daemon, should kill have failed.
    try { process.kill(Number(fs.readFileSync(path.join(home, 'pm2.pid'), 'utf8')), 'SIGKILL') } catch {}
    openShared.unlink(name)
    fs.rmSync(dir, { recursive: true, force: true })
  })
  const list = async () => JSON.parse(await pm2('jlist')).filter(p => p.name === 'api')
  const online = async () => {
    const ps = await list()
    return ps.length === 4 && ps.every(p => p.pm2_env.status === 'online')
  }
  const until = async (cond, what, ms = 60000) => {
    const end = Date.now() + ms
    while (!(await cond())) {
      if (Date.now() > end) throw new Error('timed out waiting for ' + what)
      await tick(200)
    }
  }

  fs.writeFileSync(app, release(5))
  await pm2('start', app, '-i', '4', '--name', 'api')
  await until(online, 'four instances online')
  await until(async () => (await get(port, '127.0.0.1')) !== null, 'the server to answer')
  const first = await allowed(port, '127.0.0.1', 9) + 1 // the probe above was one
  t.ok(first >= 5 && first <= 6, `release 1 (limit 5): ${first} of 10 allowed from one client`)

  fs.writeFileSync(app, release(8))
  const before = (await list()).map(p => p.pm_id)
  await pm2('reload', 'api')
  await until(online, 'four instances online after the reload')
  await tick(2000) // a crash loop would show by now
  const after = await list()
  t.same(after.map(p => p.pm2_env.status), ['online', 'online', 'online', 'online'], 'every instance online after the reload')
  t.same(after.map(p => p.pm2_env.unstable_restarts), [0, 0, 0, 0], 'no unstable restart (no crash loop)')
  t.same(after.map(p => p.pm_id).sort(), before.sort(), 'the same four instances, reloaded')
  const logs = after.map(p => fs.existsSync(p.pm2_env.pm_err_log_path) ? fs.readFileSync(p.pm2_env.pm_err_log_path, 'utf8') : '').join('')
  t.equal(logs, '', 'no instance wrote an error')
  const second = await allowed(port, '127.0.0.2', 10)
  t.equal(second, 8, `release 2 (limit 8): ${second} of 10 allowed from a new client`)
  const more = await allowed(port, '127.0.0.1', 5)
  // Its 5 grants under the old limit are one per 12 s of its bucket's
  // time; under the new limit a grant is 7.5 s of 60: it gets one more per
  // 7.5 s since it spent its bucket, far from a fresh client's 8.
  t.ok(more <= 3, `the first client's grants still count: ${more} more of 5 allowed (the table outlived the reload)`)
})
