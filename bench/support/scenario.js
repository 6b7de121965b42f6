'use strict'
// Run one scenario of a bench/support script in a fresh process and answer
// the JSON of its last line of output ({ value, check, ... }); a script
// that fails, or prints no such line, throws with what it printed.
const path = require('path')
const { spawnSync } = require('child_process')

function runScenario (name, ...args) {
  const script = path.join(__dirname, name)
  const r = spawnSync(process.execPath, [script, ...args.map(String)], { encoding: 'utf8', timeout: 600000 })
  const line = (r.stdout || '').trim().split('\n').pop()
  let out
  try { out = JSON.parse(line) } catch { out = null }
  if (r.status !== 0 || out === null) {
    throw new Error(`bench/support/${name} ${args.join(' ')} failed (status ${r.status}, signal ${r.signal}${r.error ? ', ' + r.error.message : ''}): ${r.stderr || r.stdout}`)
  }
  return out
}

module.exports = { runScenario }
