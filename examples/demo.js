'use strict'
// `npm run demo`: workers and the main thread coordinating through sabsync.
async function main () {
  console.log('== wait / waitAsync / notify: a job board ==')
  await require('./demo-core')()
}

main().catch(err => {
  console.error(err)
  process.exit(1)
})
