'use strict'
// Counts the commands this process's ioredis clients send (duplicates
// and subscribers included): the round trips a library makes, which the
// server's own counter cannot tell apart from the calls inside scripts.
const Redis = require('ioredis')

let count = 0
const send = Redis.prototype.sendCommand
Redis.prototype.sendCommand = function sendCommand (...args) {
  count++
  return send.apply(this, args)
}

module.exports = { sent: () => count }
