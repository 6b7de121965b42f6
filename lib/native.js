'use strict'
// Loads the addon through node-gyp-build: the one `npm install` built from
// source (build/Release) when there is one, else a prebuilt binary for this
// platform from prebuilds/ (Node-API: one binary serves every Node version).
const path = require('path')

const root = path.join(__dirname, '..')

function load () {
  try {
    return require('node-gyp-build')(root)
  } catch (cause) {
    const err = new Error('sabsync: no native addon for this platform (' + process.platform + '-' + process.arch +
      '): neither a local build nor a prebuilt binary; run `npm run build` (needs a C compiler and make)')
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
    out[name] = (a, b, c, d) => {
      try {
        return fn(a, b, c, d)
      } catch (err) {
        throw own(err)
      }
    }
  }
  return out
}

module.exports = withSabsyncErrors(load())
