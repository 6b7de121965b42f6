'use strict'
// The buffers of this thread's shared spaces (lib/space.js). A primitive,
// a wait or a notify over one of them uses the space's context instead of
// this process's own: owner ids that mean the same in every process,
// liveness probed on the space's lifelines, and the space's queues.

const spaces = new WeakMap() // buffer -> space context

function spaceOf (buffer) {
  return spaces.get(buffer)
}

function addSpace (buffer, ctx) {
  spaces.set(buffer, ctx)
}

module.exports = { spaceOf, addSpace }
