'use strict'
// index.d.ts types the lock primitives and redis.d.ts sabsync/redis:
// test/types/locks.ts and test/types/redis.ts compile with `tsc --strict`
// against the package (resolved by its own name).
const t = require('tap')
const { spawnSync } = require('child_process')
const path = require('path')

let tsc
try { tsc = require.resolve('typescript/bin/tsc') } catch {}

t.test('test/types/locks.ts and test/types/redis.ts compile', { skip: tsc === undefined && 'typescript is not installed' }, async t => {
  const r = spawnSync(process.execPath, [tsc, '--noEmit', '--strict', '--target', 'es2022',
    '--module', 'nodenext', '--moduleResolution', 'nodenext', '--lib', 'es2022,esnext.disposable,dom',
    '--types', 'node', path.join(__dirname, 'types', 'locks.ts'), path.join(__dirname, 'types', 'redis.ts')], { encoding: 'utf8', cwd: path.join(__dirname, '..') })
  t.equal(r.status, 0, r.stdout + r.stderr)
})
