'use strict'
// index.d.ts: every .ts under test/types/ compiles with `tsc --strict`
// against the package (resolved by its own name), in two projects:
//
// - a Node project: @types/node, lib es2022 only (Symbol.dispose then
//   comes from index.d.ts's own reference to lib esnext.disposable);
// - projects without @types/node: libs es2022, esnext.disposable and dom
//   only, so index.d.ts may use nothing that only @types/node declares;
//   and libs es2022 and dom only.
//
// test/types/mistakes.ts holds what must not compile, each line under a
// `// @ts-expect-error`: tsc fails on a directive whose line compiles, so a
// type that accepts a mistake fails this test.
const t = require('tap')
const fs = require('fs')
const os = require('os')
const path = require('path')
const { execFile } = require('child_process')

const root = path.join(__dirname, '..')
const dir = path.join(__dirname, 'types')
const files = fs.readdirSync(dir).filter(f => f.endsWith('.ts')).sort().map(f => path.join(dir, f))

let tsc
try { tsc = require.resolve('typescript/bin/tsc') } catch {}

// Each compile takes seconds, far more on a loaded machine or under a
// sanitizer build (scripts/test-flavour.sh runs this file with `node`, where
// tap's default limit is 30 s).
t.setTimeout(600000)

const projects = {
  'with @types/node (lib es2022)': { lib: ['es2022'], types: ['node'], typeRoots: [path.join(root, 'node_modules', '@types')] },
  'without @types/node (libs es2022, esnext.disposable, dom)': { lib: ['es2022', 'esnext.disposable', 'dom'], types: [] },
  // Symbol.dispose (MutexGuard) without @types/node and without the lib
  // that declares it: index.d.ts references that lib itself.
  'without @types/node (libs es2022, dom)': { lib: ['es2022', 'dom'], types: [] }
}

// Resolves { status, stdout, stderr } of tsc over `list` (compiles run side
// by side: each takes seconds).
function compile (t, options, list) {
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'sabsync-types-'))
  t.teardown(() => fs.rmSync(work, { recursive: true, force: true }))
  const config = path.join(work, 'tsconfig.json')
  fs.writeFileSync(config, JSON.stringify({
    compilerOptions: { strict: true, noEmit: true, target: 'es2022', module: 'nodenext', moduleResolution: 'nodenext', ...options },
    files: list
  }))
  return new Promise(resolve => {
    execFile(process.execPath, [tsc, '-p', config], { encoding: 'utf8', cwd: root, timeout: 300000 }, (err, stdout, stderr) => {
      resolve({ status: err ? (err.code ?? err.signal) : 0, stdout, stderr })
    })
  })
}

// Files that use Node's own API (redis.ts: ioredis and process.env, as a
// service using sabsync/redis does) compile in the Node project only.
const nodeOnly = new Set(['redis.ts'])

t.test('test/types/*.ts compile with --strict', { skip: tsc === undefined && 'typescript is not installed' }, async t => {
  t.ok(files.some(f => f.endsWith('mistakes.ts')), 'the mistakes file is among them')
  const names = Object.keys(projects)
  const rs = await Promise.all(names.map(name => {
    const list = projects[name].types.length > 0 ? files : files.filter(f => !nodeOnly.has(path.basename(f)))
    return compile(t, projects[name], list)
  }))
  rs.forEach((r, i) => t.equal(r.status, 0, `${names[i]}: ${r.stdout}${r.stderr}`))
})

// Each `@ts-expect-error` of mistakes.ts is needed: without the directive,
// its line is an error (so the file compiling above means every mistake is
// refused, and not because a directive hides something else).
t.test('each mistake in test/types/mistakes.ts is a type error on its own line', { skip: tsc === undefined && 'typescript is not installed' }, async t => {
  const src = fs.readFileSync(path.join(dir, 'mistakes.ts'), 'utf8')
  const lines = src.split('\n')
  const expected = []
  lines.forEach((l, i) => { if (/^\s*\/\/ @ts-expect-error/.test(l)) expected.push(i + 2) }) // 1-based line after it
  t.ok(expected.length >= 8, `${expected.length} mistakes listed`)
  const work = fs.mkdtempSync(path.join(dir, '.bare-'))
  t.teardown(() => fs.rmSync(work, { recursive: true, force: true }))
  const bare = path.join(work, 'mistakes.ts')
  // Same line numbers, directives turned into plain comments.
  fs.writeFileSync(bare, lines.map(l => l.replace('// @ts-expect-error', '// (expected error)')).join('\n'))
  // (In one project: which lines are errors depends on index.d.ts, not on
  // the libs, and each compile costs seconds.)
  for (const [name, options] of Object.entries(projects).slice(1, 2)) {
    const r = await compile(t, options, [bare])
    const errorLines = new Set([...r.stdout.matchAll(/mistakes\.ts\((\d+),\d+\): error/g)].map(m => Number(m[1])))
    t.same(expected.filter(n => !errorLines.has(n)), [], `${name}: every listed line is an error`)
    t.same([...errorLines].filter(n => !expected.includes(n)), [], `${name}: and nothing else is`)
  }
})
