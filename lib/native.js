'use strict'
// Loads the addon through node-gyp-build: the one `npm install` built from
// source (build/Release) when there is one, else a prebuilt binary for this
// platform from prebuilds/ (Node-API: one binary serves every Node version).
// scripts/build.js, at install, chose between them: it builds from source
// when the prebuilt binary does not load here.
const path = require('path')
const { getEnvironmentData, setEnvironmentData } = require('worker_threads')

const root = path.join(__dirname, '..')

// Every thread of a process must run the same copy of the addon: owner ids,
// their deaths and the parking lot are static state of the binary, so two
// copies (two paths) are two worlds that never see each other's deaths or
// wakes. node-gyp-build resolves the file anew in each thread, and the
// answer can change while the process runs: `node scripts/build.js` (node-gyp
// rebuild) deletes build/ before it compiles, and a worker started in that
// window found no build and loaded prebuilds/, a second copy. Its first owner
// id is 1, the main thread's: a writer waiting for that worker's read lock
// took the worker's slot for its own thread's read hold, never saw the
// worker die, and timed out (test/rwlock.test.js, "reader death (throw)",
// in a full run during a rebuild). So the first thread to load the addon
// passes the file it loaded to the workers it starts (environment data is
// inherited by every Worker created after it is set), and they dlopen that
// path, which finds the copy already in the process by name whatever is on
// disk there now (missing, or a newer build). Keyed by the package root, so
// that two installs of sabsync keep their own binaries.
const KEY = 'sabsync:addon:' + root

function load () {
  try {
    const file = getEnvironmentData(KEY)
    if (file !== undefined) {
      const m = { exports: {} }
      process.dlopen(m, file)
      return m.exports
    }
    const gyp = require('node-gyp-build')
    const found = gyp.resolve(root)
    const addon = require(found)
    setEnvironmentData(KEY, found)
    return addon
  } catch (cause) {
    // The loader's own words first (a glibc version not found, a wrong ELF
    // class, node-gyp-build's "No native build was found ..."), then where
    // we are, then what to do.
    const { describe, advice } = require('./platform')
    const said = String((cause && cause.message) || cause).trim().split('\n')[0]
    const err = new Error('sabsync: the native addon did not load: ' + said +
      '\n  on ' + describe() + '.\n  ' + advice())
    err.code = 'ERR_SABSYNC_NOT_BUILT'
    err.cause = cause
    throw err
  }
}

// The addon's own errors are plain Errors with an ERR_SABSYNC_ code
// (napi_throw_error cannot make a SabsyncError). The Sema and RateLimit
// calls throw one (ERR_SABSYNC_BAD_MEMORY) on memory that is not, or is no
// longer, a valid Sema or RateLimit, which user code can bring about
// (another primitive constructed over it, memory overwritten), so theirs
// are rethrown as SabsyncError, the type the API promises (found by
// test/fuzz-primitives.test.js). The waiting calls are left unwrapped:
// they throw only on internal failures (out of memory), and are hot.
function withSabsyncErrors (addon) {
  const { SabsyncError } = require('./errors')
  const own = err => {
    if (!(err instanceof SabsyncError) && err instanceof Error && typeof err.code === 'string' && err.code.startsWith('ERR_SABSYNC_')) {
      return new SabsyncError(err.code, err.message)
    }
    return err
  }
  const out = { ...addon }
  for (const [name, fn] of Object.entries(addon)) {
    if (typeof fn !== 'function' || !/^(sema|rate)[A-Z]/.test(name)) continue
    out[name] = (a, b, c, d, e) => {
      try {
        return fn(a, b, c, d, e)
      } catch (err) {
        throw own(err)
      }
    }
  }
  return out
}

module.exports = withSabsyncErrors(load())
