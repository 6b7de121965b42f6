'use strict'
// The two memories the parking lot serves, as test/lot.test.js sees them:
// the memory of one process (a SharedArrayBuffer) and a shared space. Each
// makes a `place` that can be posted to workers (workerData) and holds 16
// cells and, when asked, a Sema; attach(place) opens it in this thread. The
// same checks then run once per memory.
const { Sema, openShared } = require('..')

const CELLS = 16

const memories = {
  'one process': {
    make (t, { nr } = {}) {
      const place = { cells: new SharedArrayBuffer(CELLS * 4) }
      if (nr !== undefined) {
        const s = new Sema(nr)
        place.sema = { buffer: s.buffer, byteOffset: s.byteOffset, byteLength: s.byteLength }
      }
      return place
    }
  },
  'a shared space': {
    make (t, { nr } = {}) {
      // Made here (so sized and initialised once), attached by each thread.
      const { spaceName } = require('./space-helpers')
      const name = spaceName(t)
      const space = openShared(name)
      space.int32Array('cells', CELLS)
      if (nr !== undefined) space.sema('sema', nr)
      space.close()
      return { space: name, nr }
    }
  }
}

// The memories to run: all, or those LOT_MEMORIES names (comma-separated).
function selected () {
  const only = process.env.LOT_MEMORIES
  if (only === undefined || only === '') return Object.keys(memories)
  const names = only.split(',').map(s => s.trim())
  for (const n of names) if (!(n in memories)) throw new Error(`LOT_MEMORIES: no memory "${n}"`)
  return names
}

// { cells: Int32Array, sema?: Sema, close() } of `place`, in this thread.
// fairness: the Sema's FAIRNESS option (one process only).
function attach (place, options) {
  if (place.space === undefined) {
    return {
      cells: new Int32Array(place.cells),
      sema: place.sema === undefined ? undefined : Sema.from(place.sema, options),
      close () {}
    }
  }
  const space = openShared(place.space)
  return {
    cells: space.int32Array('cells', CELLS),
    sema: place.nr === undefined ? undefined : space.sema('sema', place.nr),
    close: () => space.close()
  }
}

module.exports = { memories, selected, attach }
