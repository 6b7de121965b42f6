'use strict'
// Every thread of a process runs the one copy of the addon that the first
// thread loaded, even if the file the package resolves to changes meanwhile.
// A rebuild (node-gyp rebuild) deletes build/ before it compiles: a worker
// started then used to fall back to prebuilds/, a second copy with its own
// owner ids (its first is 1, the main thread's), deaths and parking lot.
const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { root, fixture, message } = require('./helpers')

t.test('a worker started while build/ is gone runs the main thread\'s copy', async t => {
  // A package of our lib/ with the addon both built and prebuilt: the same
  // bytes at two paths, so two copies if both get loaded.
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'sabsync-copy-'))
  t.teardown(() => fs.rmSync(work, { recursive: true, force: true }))
  const binary = require('node-gyp-build').resolve(root)
  // lib/ and its folders but lib/redis/ (sabsync/redis never loads the
  // addon: not needed here).
  fs.cpSync(path.join(root, 'lib'), path.join(work, 'lib'), { recursive: true, filter: src => src !== path.join(root, 'lib', 'redis') })
  fs.copyFileSync(path.join(root, 'package.json'), path.join(work, 'package.json'))
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(work, 'node_modules'))
  const pre = path.join(work, 'prebuilds', process.platform + '-' + process.arch)
  fs.mkdirSync(path.join(work, 'build', 'Release'), { recursive: true })
  fs.mkdirSync(pre, { recursive: true })
  fs.copyFileSync(binary, path.join(work, 'build', 'Release', 'sabsync.node'))
  fs.copyFileSync(binary, path.join(pre, 'sabsync.node'))

  const { RWLock } = require(work)
  const native = require(path.join(work, 'lib', 'native'))
  fs.renameSync(path.join(work, 'build'), path.join(work, 'build.old')) // the rebuild's window

  // The scenario of test/rwlock.test.js "reader death (throw)".
  const rw = new RWLock()
  const w = fixture('native-load/reader', { rw, work })
  w.on('error', () => {})
  const id = await message(w)
  t.not(id, native.envId(), 'the worker has an owner id of its own')
  t.ok(native.alive(id), 'and the main thread sees it alive')
  t.notOk(rw.tryWriteLock(), 'its read lock is seen')
  const writer = rw.writeLockAsync({ timeout: 20000 })
  w.postMessage('die')
  await w.exited
  t.notOk(native.alive(id), 'its death is seen')
  t.equal(await writer, true, 'the waiting writer got in')
  rw.writeUnlock()
})
