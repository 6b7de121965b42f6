'use strict'
// The helpers that other test files compare child output with. In a
// terminal tap sets FORCE_COLOR for every test file; a child process that
// inherited it coloured what console.log printed (numbers in yellow) though
// its stdout is a pipe, and exact comparisons failed in a terminal only
// (`FORCE_COLOR=1 npm test` showed it). Here FORCE_COLOR is set on purpose,
// so that this runs the terminal case in a pipe and in CI too.
const t = require('tap')
const { child, plainEnv } = require('./helpers')

t.test('child() prints plain text when the runner forces colours', async t => {
  const before = process.env.FORCE_COLOR
  process.env.FORCE_COLOR = '1'
  t.teardown(() => {
    if (before === undefined) delete process.env.FORCE_COLOR
    else process.env.FORCE_COLOR = before
  })
  const r = await child("console.log('exit with', 2, 'waiting', { n: 3 }, true)")
  t.equal(r.code, 0, r.stderr)
  t.equal(r.stdout, 'exit with 2 waiting { n: 3 } true\n', 'no colour escapes')
})

t.test('plainEnv() drops FORCE_COLOR and keeps the rest', async t => {
  const env = plainEnv({ FORCE_COLOR: '3', SABSYNC_TEST_VAR: 'x' })
  t.equal(env.FORCE_COLOR, undefined)
  t.equal(env.SABSYNC_TEST_VAR, 'x')
  t.equal(env.PATH, process.env.PATH)
})
