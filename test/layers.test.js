'use strict'
// The shape of the code, checked: the C files include each other, and the
// JS files require each other, without a circle (a file's module is the
// .c/.h pair or the .js file); the core never includes node_api.h; every
// error code used anywhere is in the registry (lib/errors.js) and in the
// SabsyncErrorCode type; every constant JS compares with the addon's
// answers comes from the addon; and the tests can be found: CONTRIBUTING.md's
// table names every tap file (and only files that exist), and every worker
// fixture a test starts exists and is started by some test.
const t = require('tap')
const fs = require('fs')
const path = require('path')
const { CODES } = require('../lib/errors')
const native = require('../lib/native')

const root = path.join(__dirname, '..')
const read = f => fs.readFileSync(path.join(root, f), 'utf8')
const list = (dir, re) => fs.readdirSync(path.join(root, dir)).filter(f => re.test(f)).map(f => path.join(dir, f))

// A cycle in `graph` (module -> Set of modules), as a list, or null.
function cycle (graph) {
  const state = new Map() // 1: on the stack, 2: done
  const stack = []
  function visit (m) {
    state.set(m, 1)
    stack.push(m)
    for (const n of graph.get(m) || []) {
      if (state.get(n) === 1) return stack.slice(stack.indexOf(n)).concat(n)
      if (!state.has(n)) {
        const c = visit(n)
        if (c) return c
      }
    }
    stack.pop()
    state.set(m, 2)
    return null
  }
  for (const m of graph.keys()) {
    if (!state.has(m)) {
      const c = visit(m)
      if (c) return c
    }
  }
  return null
}

t.test('the C files include each other without a circle, and the core never includes node_api.h', async t => {
  const files = [...list('src/core', /\.[ch]$/), ...list('src/napi', /\.[ch]$/), ...list('include', /\.h$/)]
  t.ok(files.length > 10, `${files.length} files`)
  const graph = new Map()
  const mod = f => path.basename(f).replace(/\.[ch]$/, '')
  for (const f of files) {
    const m = mod(f)
    if (!graph.has(m)) graph.set(m, new Set())
    for (const [, inc] of read(f).matchAll(/^#include "([^"]+)"/gm)) {
      const n = mod(inc)
      if (n !== m) graph.get(m).add(n)
    }
    if (f.startsWith('src/core') || f.startsWith('include')) {
      t.notMatch(read(f), /^#include [<"]node_api\.h/m, `${f} does not include node_api.h`)
    }
  }
  t.equal(cycle(graph), null, 'no circle of includes')
  t.ok(cycle(new Map([['a', new Set(['b'])], ['b', new Set(['a'])]])), 'the check finds a circle')
})

t.test('the C files call each other without a circle', async t => {
  const files = [...list('src/core', /\.c$/), ...list('src/napi', /\.c$/)]
  const definer = new Map()
  const src = new Map()
  for (const f of files) {
    const text = read(f).replace(/\/\*[\s\S]*?\*\//g, '') // comments name functions too
    src.set(f, text)
    for (const [, name] of text.matchAll(/^(?!static\b)[A-Za-z_][\w \t*]*?\b(sab_\w+)\s*\([^;{]*\)\s*\{/gm)) definer.set(name, f)
  }
  t.ok(definer.size > 40, `${definer.size} functions defined across ${files.length} files`)
  const graph = new Map()
  for (const [f, text] of src) {
    const out = new Set()
    for (const [, name] of text.matchAll(/\b(sab_\w+)\s*\(/g)) {
      const d = definer.get(name)
      if (d !== undefined && d !== f) out.add(d)
    }
    graph.set(f, out)
  }
  t.equal(cycle(graph), null, 'no two files call into each other, directly or around a circle')
})

t.test('a space\'s layers include and call only the layers before them, in the order space_layout.h states', async t => {
  const layout = read('src/core/space_layout.h')
  const m = layout.match(/Layers: ([\w, \n*]+?)\n \*\n/)
  t.ok(m, 'space_layout.h states the layers')
  const layers = m[1].replace(/\n \*/g, ' ').split(',').map(s => s.trim())
  t.ok(layers.length >= 6, `${layers.length} layers`)
  t.notOk(fs.existsSync(path.join(root, 'src/core/space_layout.c')), 'the layout header has no .c of its name')
  const rank = new Map(layers.map((l, i) => [l, i]))
  const definer = new Map()
  for (const l of layers) {
    t.ok(fs.existsSync(path.join(root, `src/core/${l}.c`)), `src/core/${l}.c exists`)
    const text = read(`src/core/${l}.c`).replace(/\/\*[\s\S]*?\*\//g, '')
    for (const [, name] of text.matchAll(/^(?!static\b)[A-Za-z_][\w \t*]*?\b(sab_\w+)\s*\([^;{]*\)\s*\{/gm)) definer.set(name, l)
  }
  for (const l of layers) {
    for (const f of [`src/core/${l}.c`, `src/core/${l}.h`]) {
      if (!fs.existsSync(path.join(root, f))) continue
      for (const [, inc] of read(f).matchAll(/^#include "([^"]+)\.h"/gm)) {
        if (rank.has(inc)) t.ok(rank.get(inc) <= rank.get(l), `${f} includes ${inc}.h, not above it`)
      }
    }
    const text = read(`src/core/${l}.c`).replace(/\/\*[\s\S]*?\*\//g, '')
    const above = new Set()
    for (const [, name] of text.matchAll(/\b(sab_\w+)\s*\(/g)) {
      const d = definer.get(name)
      if (d !== undefined && rank.get(d) > rank.get(l)) above.add(`${name} (${d})`)
    }
    t.same([...above], [], `${l}.c calls no layer above it`)
  }
})

t.test('the JS files require each other without a circle', async t => {
  const files = list('lib', /\.js$/)
  const graph = new Map()
  for (const f of files) {
    const m = path.basename(f, '.js')
    graph.set(m, new Set())
    for (const [, req] of read(f).matchAll(/require\('\.\/([^']+)'\)/g)) graph.get(m).add(path.basename(req, '.js'))
  }
  t.equal(cycle(graph), null, 'no circle of requires')
})

t.test('every ERR_SABSYNC_ code is registered, and the type lists exactly the registry', async t => {
  const used = new Set()
  for (const f of [...list('lib', /\.js$/), ...list('src/napi', /\.[ch]$/), ...list('src/core', /\.[ch]$/)]) {
    for (const [code] of read(f).matchAll(/ERR_SABSYNC_[A-Z_]+/g)) used.add(code)
  }
  t.ok(used.size >= 5, `${used.size} codes used`)
  for (const code of used) t.ok(Object.hasOwn(CODES, code), `${code} is in lib/errors.js`)
  const union = read('index.d.ts').match(/export type SabsyncErrorCode =([^/]*?)\n\n/)
  t.ok(union, 'index.d.ts has SabsyncErrorCode')
  const typed = [...union[1].matchAll(/'(ERR_SABSYNC_[A-Z_]+)'/g)].map(m => m[1]).sort()
  t.same(typed, Object.keys(CODES).sort(), 'SabsyncErrorCode lists the registry')
  t.throws(() => new (require('../lib/errors').SabsyncError)('ERR_SABSYNC_NO_SUCH_THING', 'x'), TypeError, 'an unregistered code is refused')
})

t.test('the addon throws only the codes of its one error table, each registered in lib/errors.js', async t => {
  const table = native.errorCodes
  t.ok(Object.isFrozen(table) && table.length >= 10, `${table.length} codes in src/napi/errors.c`)
  t.equal(new Set(table).size, table.length, 'no code twice')
  for (const code of table) t.ok(Object.hasOwn(CODES, code), `${code} is in lib/errors.js`)
  for (const f of list('src/napi', /\.[ch]$/)) {
    if (/errors\.[ch]$/.test(f)) continue
    const code = read(f).replace(/\/\*[\s\S]*?\*\//g, '')
    t.notMatch(code, /"ERR_SABSYNC_/, `${f} spells no code (it names one of errors.h)`)
  }
})

t.test('results are codes of the one constants export; a second value comes in native.out', async t => {
  const k = native.constants
  t.equal(native.spaceConstants, undefined, 'no second export of codes')
  for (const name of ['OK', 'NOT_EQUAL', 'TIMED_OUT', 'CANCELLED', 'PENDING', 'OWNER_DEAD', 'BAD_TOKEN', 'SEMA_TIMED_OUT', 'SEMA_NO_TOKEN', 'SPACE_KEY_MAX']) {
    t.type(k[name], 'number', name)
  }
  t.ok(native.out instanceof Float64Array && native.out.length >= 2, 'out: a Float64Array')
  const i32 = new Int32Array(new SharedArrayBuffer(native.semaBytes(2)))
  native.semaInit(i32, 2)
  const v = native.semaView(i32)
  t.equal(native.semaTry(v), k.OK)
  const token = native.out[0]
  t.ok(token === 0 || token === 1, 'the token in out[0]')
  t.equal(native.semaRelease(v, token), k.OK)
  t.equal(native.out[0] & k.SEMA_POOLED, k.SEMA_POOLED, 'the info bits in out[0]: pooled')
  t.equal(native.out[1], token, 'the slot in out[1]')
  t.equal(native.semaRelease(v, token), k.BAD_TOKEN, 'not held: a code')
})

t.test('the constants JS uses come from the addon', async t => {
  const k = native.constants
  t.ok(Object.isFrozen(k))
  for (const name of ['OK', 'NOT_EQUAL', 'TIMED_OUT', 'OWNER_DEAD', 'SEMA_MAGIC', 'RATE_MAGIC', 'BUCKET_BITS', 'COUNT_STRIDE']) {
    t.type(k[name], 'number', name)
  }
  t.same([...native.resultNames], ['ok', 'not-equal', 'timed-out'])
  t.equal(native.resultNames[k.OK], 'ok')
  t.equal(native.resultNames[k.TIMED_OUT], 'timed-out')
  // No file of lib/ restates a magic number of the core, nor the lot's
  // bucket hash (the addon answers bucketOf / spaceBucket).
  for (const f of list('lib', /\.js$/)) {
    t.notMatch(read(f), /0x53454D31|0x52415431/i, `${f} does not restate a magic`)
    t.notMatch(read(f), /0x9E3779B1|Math\.imul/i, `${f} does not restate the bucket hash`)
  }
  t.equal(native.bucketOf(4096) % k.COUNT_STRIDE, 0, 'bucketOf answers an index in counts')
})

t.test('CONTRIBUTING.md\'s table of tests names every tap file, and every worker fixture is used', async t => {
  const contributing = read('CONTRIBUTING.md')
  const start = contributing.indexOf('| feature or guarantee | test file(s) |')
  t.not(start, -1, 'CONTRIBUTING.md has the table')
  const rows = contributing.slice(start).split('\n\n')[0].split('\n').slice(2)
  const named = new Set()
  for (const row of rows) {
    const files = row.split('|')[2] || ''
    for (const [, name] of files.matchAll(/`([a-z0-9-]+)`/g)) named.add(name)
  }
  const tapFiles = list('test', /\.test\.js$/).map(f => path.basename(f, '.test.js'))
  t.same(tapFiles.filter(f => !named.has(f)), [], 'every tap file is in the table')
  t.same([...named].filter(f => !tapFiles.includes(f)), [], 'every name in the table is a tap file')

  const sources = list('test', /\.js$/).map(read)
  const fixtureDirs = fs.readdirSync(path.join(root, 'test', 'fixtures'), { withFileTypes: true })
    .filter(d => d.isDirectory() && tapFiles.includes(d.name)).map(d => d.name)
  const started = new Set()
  for (const src of sources) {
    for (const [, name] of src.matchAll(/fixture(?:Path|Source)?\('([a-z0-9-]+\/[a-z0-9-]+)'/g)) started.add(name)
    for (const [, name] of src.matchAll(/test\/fixtures\/([a-z0-9-]+\/[a-z0-9-]+)\.js/g)) started.add(name)
  }
  for (const name of started) t.ok(fs.existsSync(path.join(root, 'test', 'fixtures', name + '.js')), `test/fixtures/${name}.js exists`)
  const unused = []
  for (const dir of fixtureDirs) {
    const here = list(path.join('test', 'fixtures', dir), /\.js$/)
    const texts = here.map(read)
    for (const f of here) {
      const base = path.basename(f, '.js')
      if (!started.has(`${dir}/${base}`) && !texts.some(s => s.includes(`require('./${base}')`))) unused.push(f)
    }
  }
  t.same(unused, [], 'every fixture under test/fixtures/<tap file>/ is started by a test or required by a fixture')
})

// The binding writes each operation once for both memories (issue 28): a
// space's wait, Sema and RateLimit calls are the in-process ones with the
// space's handle last, and a space's async waits settle in C, not through
// natives called from JS.
t.test('the binding has one call per operation for both memories: no space twin of a wait, Sema or rate call', async t => {
  const names = Object.keys(native).filter(n => typeof native[n] === 'function')
  const twins = names.filter(n => /^space(Wait|Settle|Sema|Rate|Notify)/.test(n))
  t.same(twins, [], 'no spaceWait*, spaceSettle, spaceSema*, spaceRate*, spaceNotify or spaceWaiters native')
  for (const op of ['wait', 'waitAsync', 'notify', 'waiters', 'semaTry', 'semaAcquire', 'semaAcquireAsync', 'semaRelease', 'semaWaiting', 'semaAvailable', 'rateTake']) {
    t.equal(typeof native[op], 'function', `${op} serves both memories`)
  }
  const space = read('lib/space.js')
  t.notMatch(space, /new SharedArrayBuffer\(4\)/, 'lib/space.js makes no proxy cell for an async wait')
})
