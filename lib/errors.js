'use strict'
// sabsync's own errors carry a `code` starting ERR_SABSYNC_. Argument errors
// are plain TypeError/RangeError (the built-ins' types) whose message names
// the argument and what was expected.

function describe (value) {
  if (value === null) return 'null'
  switch (typeof value) {
    case 'undefined': return 'undefined'
    case 'function': return 'a function'
    case 'object': {
      const name = value.constructor && typeof value.constructor.name === 'string' ? value.constructor.name : ''
      return name ? 'an instance of ' + name : 'an object'
    }
    case 'string': return 'type string'
    case 'symbol': return 'a symbol'
    case 'bigint': return 'type bigint (' + value + 'n)'
    default: return 'type ' + typeof value + ' (' + String(value) + ')'
  }
}

function invalidType (name, expected, value) {
  const err = new TypeError(`The "${name}" argument must be ${expected}. Received ${describe(value)}`)
  err.code = 'ERR_INVALID_ARG_TYPE'
  return err
}

function outOfRange (name, expected, value) {
  const err = new RangeError(`The "${name}" argument is out of range. It must be ${expected}. Received ${typeof value === 'number' ? value : describe(value)}`)
  err.code = 'ERR_OUT_OF_RANGE'
  return err
}

class SabsyncError extends Error {
  constructor (code, message) {
    super(message)
    this.code = code
  }

  get name () { return 'SabsyncError' }
}

module.exports = { describe, invalidType, outOfRange, SabsyncError }
