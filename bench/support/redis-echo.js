'use strict'
// The other end of bench/redis.js's reference row: answers every message
// on 'sabsync-bench:ping' with one on 'sabsync-bench:pong'. argv: url.
const Redis = require('ioredis')

const sub = new Redis(process.argv[2])
const pub = new Redis(process.argv[2])
sub.on('message', (channel, message) => { pub.publish('sabsync-bench:pong', message) })
sub.subscribe('sabsync-bench:ping').then(() => process.send('ready'))
process.on('disconnect', () => { sub.disconnect(); pub.disconnect() })
