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

module.exports = load()
