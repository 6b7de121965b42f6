'use strict'
// Loads the addon: a prebuilt binary for this platform when one ships in
// prebuilds/, else the one `npm install` built from source.
const path = require('path')

const root = path.join(__dirname, '..')

function load () {
  const tried = []
  for (const rel of ['build/Release/sabsync.node', 'build/Debug/sabsync.node']) {
    const file = path.join(root, rel)
    try {
      return require(file)
    } catch (err) {
      if (err.code !== 'MODULE_NOT_FOUND') throw err
      tried.push(file)
    }
  }
  const err = new Error('sabsync: the native addon is not built (looked in ' + tried.join(', ') +
    '); run `npm run build`')
  err.code = 'ERR_SABSYNC_NOT_BUILT'
  throw err
}

module.exports = load()
