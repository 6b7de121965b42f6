'use strict'
// The docs as a reader meets them: every ```js block of README.md and
// docs/*.md runs as written (test/fixtures/markdown/blocks.js says how), the
// API reference names exactly what index.d.ts and redis.d.ts export, and
// the error reference names every code of lib/errors.js.
const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { root } = require('./helpers')
const { blocks, runBlock, spaceNames, emptyDb } = require('./fixtures/markdown/blocks')
const { execFile } = require('child_process')
const { sharedServer } = require('./fixtures/redis/server')
const { openShared } = require(root)
const { CODES } = require('../lib/errors')

t.setTimeout(600000)

const docs = ['README.md', ...fs.readdirSync(path.join(root, 'docs')).filter(f => f.endsWith('.md')).map(f => 'docs/' + f)]
const all = docs.flatMap(f => blocks(path.join(root, f)).map(b => ({ ...b, name: `${f}:${b.line}` })))

// A directory where require('sabsync') is this checkout, as in an app
// that installed it, with the packages the docs use beside it.
function app () {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sabsync-docs-'))
  fs.mkdirSync(path.join(dir, 'node_modules'))
  fs.symlinkSync(root, path.join(dir, 'node_modules', 'sabsync'), 'dir')
  for (const dep of ['ioredis', 'express', 'express-rate-limit', 'fastify']) {
    fs.symlinkSync(path.join(root, 'node_modules', dep), path.join(dir, 'node_modules', dep), 'dir')
  }
  return dir
}

// The TypeScript blocks compile with tsc --strict against the package as an
// app resolves it (node_modules/sabsync), with @types/node, each block a
// module of its own. tsc starts now, beside the js blocks, and the test
// after theirs reads its answer.
const tsBlocks = docs.flatMap(f => {
  const lines = fs.readFileSync(path.join(root, f), 'utf8').split('\n')
  const found = []
  for (let i = 0; i < lines.length; i++) {
    if (lines[i] !== '```ts') continue
    let end = i + 1
    while (lines[end] !== '```') end++
    found.push({ name: `${f}:${i + 1}`, code: lines.slice(i + 1, end).join('\n') + '\n' })
    i = end
  }
  return found
})
const tsDir = app()
const tsc = new Promise(resolve => {
  const files = tsBlocks.map((b, i) => {
    const file = `block${i}.ts`
    fs.writeFileSync(path.join(tsDir, file), `// ${b.name}\n${b.code}`)
    return file
  })
  fs.writeFileSync(path.join(tsDir, 'tsconfig.json'), JSON.stringify({
    compilerOptions: {
      strict: true,
      noEmit: true,
      target: 'es2022',
      module: 'nodenext',
      moduleResolution: 'nodenext',
      types: ['node'],
      typeRoots: [path.join(root, 'node_modules', '@types')]
    },
    files
  }))
  execFile(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: tsDir, encoding: 'utf8', timeout: 300000 },
    (err, stdout, stderr) => resolve({ ok: err === null, files: files.length, out: `${stdout}${stderr}${err && !stdout && !stderr ? err.message : ''}` }))
})

t.test('every ```js block runs as written', async t => {
  t.ok(all.length >= 20, `${all.length} blocks in ${docs.length} files`)
  let redisUrl = null
  let noRedis = null
  if (all.some(b => b.mode === 'redis')) {
    try {
      redisUrl = await sharedServer(t)
    } catch (e) {
      if (process.env.CI) throw e
      noRedis = e.message
    }
  }
  // The blocks run side by side, BLOCK_JOBS at a time, each in a
  // directory and (Redis blocks) a database of its own; blocks that open a
  // space of the same name run one after another, in the docs' order. The
  // subtests then report in that order.
  const skipOf = block => (block.mode === 'redis' && noRedis && `no Redis server, not under CI: ${noRedis}`) ||
    (/require\('fastify'\)/.test(block.code) && Number(process.versions.node.split('.')[0]) < 20 && 'fastify 5 needs Node 20 or newer')
  const chains = []
  for (const block of all) {
    const names = spaceNames(block.code)
    const chain = chains.find(c => c.names.some(n => names.includes(n)))
    if (chain) {
      chain.blocks.push(block)
      chain.names.push(...names)
    } else chains.push({ names, blocks: [block] })
  }
  const runOne = async block => {
    const dir = app()
    let db = null
    let r
    try {
      const env = {}
      if (block.mode === 'redis') {
        db = await emptyDb(redisUrl)
        env.REDIS_URL = env.SABSYNC_REDIS_URL = db.url
      }
      r = await runBlock(block, dir, { env })
    } catch (err) {
      r = { ok: false, why: err.message, out: err.stack }
    }
    try {
      for (const name of spaceNames(block.code)) openShared.unlink(name)
      if (db) await db.clear()
    } catch (err) {
      r = { ok: false, why: 'after the block: ' + err.message, out: err.stack }
    }
    fs.rmSync(dir, { recursive: true, force: true })
    return r
  }
  const result = new Map(all.map(b => {
    let settle
    const p = new Promise(resolve => { settle = resolve })
    return [b, { p, resolve: settle }]
  }))
  const queue = chains.slice()
  const worker = async () => {
    for (let c = queue.shift(); c !== undefined; c = queue.shift()) {
      for (const block of c.blocks) result.get(block).resolve(skipOf(block) ? null : await runOne(block))
    }
  }
  const BLOCK_JOBS = 3
  const workers = Promise.all(Array.from({ length: BLOCK_JOBS }, worker))
  for (const block of all) {
    await t.test(`${block.name} (${block.mode})`, { skip: skipOf(block) }, async t => {
      const r = await result.get(block).p
      t.ok(r.ok, `${r.why}\n${r.out}`)
    })
  }
  await workers
})

t.test('every ```ts block compiles with tsc --strict', async t => {
  t.teardown(() => fs.rmSync(tsDir, { recursive: true, force: true }))
  t.ok(tsBlocks.length >= 3, `${tsBlocks.length} blocks`)
  const r = await tsc
  t.ok(r.ok, r.ok ? `${r.files} blocks compile` : `tsc: ${r.out}`)
})

// The names a declaration file exports (classes, functions, interfaces,
// types, namespaces, re-exports).
function exported (file) {
  const src = fs.readFileSync(path.join(root, file), 'utf8')
  const names = new Set()
  for (const m of src.matchAll(/^export (?:declare )?(?:class|function|interface|type|namespace|const) ([A-Za-z_$][\w$]*)/gm)) names.add(m[1])
  for (const m of src.matchAll(/^export (?:type )?\{([^}]+)\}/gm)) {
    for (const n of m[1].split(',')) names.add(n.trim().split(/\s+as\s+/).pop())
  }
  return names
}

// docs/api.md lists exports under "## sabsync" and "## sabsync/redis", each
// export a "### `Name`" heading (or several, joined by " · ").
function documented (section) {
  const api = fs.readFileSync(path.join(root, 'docs', 'api.md'), 'utf8')
  const parts = api.split(/^## /m)
  const part = parts.find(p => p.startsWith(section + '\n'))
  if (!part) return null
  const names = new Set()
  for (const m of part.matchAll(/^### (.+)$/gm)) {
    for (const n of m[1].matchAll(/`([A-Za-z_$][\w$]*)/g)) names.add(n[1])
  }
  return names
}

for (const [file, section] of [['index.d.ts', 'sabsync'], ['redis.d.ts', 'sabsync/redis']]) {
  t.test(`docs/api.md documents exactly what ${file} exports`, async t => {
    const names = exported(file)
    const listed = documented('`' + section + '`')
    t.ok(listed, `docs/api.md has a section "## \`${section}\`"`)
    t.ok(names.size > 4, `${file} exports ${names.size} names`)
    t.same([...names].filter(n => !listed.has(n)).sort(), [], `every export of ${file} is in docs/api.md`)
    t.same([...listed].filter(n => !names.has(n)).sort(), [], `every name documented under ${section} is exported by ${file}`)
  })
}

t.test('the runtime exports are the documented ones', async t => {
  const listed = documented('`sabsync`')
  for (const name of Object.keys(require(root))) t.ok(listed.has(name), `${name} is documented`)
  const redisListed = documented('`sabsync/redis`')
  for (const name of Object.keys(require(path.join(root, 'lib', 'redis')))) t.ok(redisListed.has(name), `sabsync/redis ${name} is documented`)
})

t.test('docs/errors.md explains every registered error code', async t => {
  const text = fs.readFileSync(path.join(root, 'docs', 'errors.md'), 'utf8')
  const headed = new Set([...text.matchAll(/^## `(ERR_SABSYNC_[A-Z_]+)`/gm)].map(m => m[1]))
  t.same(Object.keys(CODES).filter(c => !headed.has(c)), [], 'every code of lib/errors.js has a section')
  t.same([...headed].filter(c => !(c in CODES)), [], 'every section is a registered code')
})

t.test('the docs carry no history, and their links resolve', async t => {
  for (const f of [...docs, 'CONTRIBUTING.md', 'bench/README.md']) {
    const text = fs.readFileSync(path.join(root, f), 'utf8')
    t.notMatch(text, /\((?:was|used to) |\bused to (?:ignore|be)\b|Goals of the issue/, `${f}: no history (CHANGELOG.md has it)`)
    for (const [, target] of text.matchAll(/\]\(((?!https?:|#)[^)#\s]+)(?:#[^)]*)?\)/g)) {
      t.ok(fs.existsSync(path.join(root, path.dirname(f), target)), `${f} links to ${target}, which exists`)
    }
  }
  const lines = fs.readFileSync(path.join(root, 'README.md'), 'utf8').split('\n').length
  t.ok(lines <= 260, `the README is a front page (${lines} lines)`)
})

// Each heading once per page: a merge that appends an old copy of a section
// would otherwise go unnoticed, and a reader would meet it twice.
t.test('every page has each heading once', async t => {
  for (const f of [...docs, 'CONTRIBUTING.md', 'bench/README.md']) {
    // A ### heading is named within its ## section (docs/api.md has a
    // Mutex in sabsync and one in sabsync/redis).
    let section = ''
    const headings = []
    for (const l of fs.readFileSync(path.join(root, f), 'utf8').split('\n')) {
      if (/^#{1,2} /.test(l)) section = l
      if (/^#{1,2} /.test(l)) headings.push(l)
      else if (/^### /.test(l)) headings.push(`${section} > ${l}`)
    }
    t.same(headings.filter((h, i) => headings.indexOf(h) !== i), [], `${f}: no heading repeats`)
  }
})

t.test('the examples the docs name are shipped and exist', async t => {
  const pkg = require('../package.json')
  t.ok(pkg.files.includes('examples/'), 'package.json files has examples/')
  for (const f of [...docs, 'CONTRIBUTING.md']) {
    const text = fs.readFileSync(path.join(root, f), 'utf8')
    for (const [, name] of text.matchAll(/examples\/([a-z0-9-]+\.js)/g)) {
      t.ok(fs.existsSync(path.join(root, 'examples', name)), `${f} names examples/${name}, which exists`)
    }
  }
})
