'use strict'
// The other primitives in a shared space, across processes: a Latch opened
// by another process, an AtomicFlag waited on in one and set in another, a
// CondVar signalled from one to the other under a shared Mutex.
const t = require('tap')

// Real processes, each starting Node and opening the space: seconds apiece
// on a loaded machine, so past the suite's 120 s for a file there.
t.setTimeout(600000)
const { openShared } = require('..')
const { spaceName, spawn } = require('./space-helpers')
const { until } = require('./helpers')

t.test('Latch, AtomicFlag and CondVar across processes', async t => {
  const name = spaceName(t)
  const space = openShared(name)
  t.teardown(() => space.close())
  const latch = space.latch('ready', 2)
  const flag = space.atomicFlag('flag')
  const m = space.mutex('m')
  const cv = space.condVar('cv')
  const cells = space.int32Array('cells', 2)
  const kid = spawn(t, name, `
    const latch = space.latch('ready', 2)
    const flag = space.atomicFlag('flag')
    const m = space.mutex('m')
    const cv = space.condVar('cv')
    const cells = space.int32Array('cells', 2)
    latch.countDown()
    const opened = latch.wait(60000)
    const seen = flag.wait(false, 60000)
    m.lock()
    cells[0] = 1
    cv.notifyAll()
    m.unlock()
    return [opened, seen]`)
  await until(() => latch.count === 1, 60000, 'the child counted down')
  latch.countDown()
  t.equal(latch.tryWait(), true)
  t.equal(await latch.waitAsync({ timeout: 60000 }), true)
  flag.testAndSet()
  m.lock()
  while (cells[0] === 0) {
    flag.notifyAll()
    cv.wait(m, 50)
  }
  m.unlock()
  t.equal(cells[0], 1, 'the condition, set by the other process, seen under the mutex')
  t.same(await kid.done, [true, true], 'the child saw the latch open and the flag set')
})
