'use strict'
// index.d.ts types the lock primitives: test/types/locks.ts compiles with
// `tsc --strict` against the package (resolved by its own name).
const t = require('tap')
const { spawnSync } = require('child_process')
const path = require('path')

let tsc
try { tsc = require.resolve('typescript/bin/tsc') } catch {}

t.test('test/types/locks.ts compiles', { skip: tsc === undefined && 'typescript is not installed' }, async t => {
  const r = spawnSync(process.execPath, [tsc, '--noEmit', '--strict', '--target', 'es2022',
    '--module', 'nodenext', '--moduleResolution', 'nodenext', '--lib', 'es2022,esnext.disposable,dom',
    '--types', 'node', path.join(__dirname, 'types', 'locks.ts')], { encoding: 'utf8', cwd: path.join(__dirname, '..') })
  t.equal(r.status, 0, r.stdout + r.stderr)
})
