'use strict'
// A small SVG bar chart of sabsync's ratio against each case's comparison,
// on a log scale (1× in the middle), with each goal marked.

const esc = s => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;')

function renderSvg (results) {
  const rows = []
  for (const r of results) {
    const own = r.rows.find(x => x.name === 'sabsync')
    let label = `${r.name} (vs ${r.compare})`
    if (label.length > 72) label = label.slice(0, 71) + '…'
    if (own && own.ratio != null) rows.push({ label, ratio: own.ratio, goal: r.goal, met: r.met })
  }
  const lo = Math.log2(1 / 8)
  const hi = Math.log2(64)
  const W = 980
  const labelW = 470
  const plotW = W - labelW - 30
  const rowH = 26
  const top = 40
  const H = top + rows.length * rowH + 40
  const x = v => labelW + (Math.min(Math.max(Math.log2(v), lo), hi) - lo) / (hi - lo) * plotW
  const out = [`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="20" text-anchor="middle" font-size="14" font-weight="bold">sabsync speed-up over each comparison (log scale; right of 1× = faster)</text>`]
  for (let e = lo; e <= hi; e++) {
    const v = 2 ** e
    out.push(`<line x1="${x(v)}" y1="${top - 6}" x2="${x(v)}" y2="${H - 30}" stroke="${e === 0 ? '#333' : '#ddd'}"/>`)
    out.push(`<text x="${x(v)}" y="${H - 14}" text-anchor="middle">${v >= 1 ? v : '1/' + 1 / v}×</text>`)
  }
  rows.forEach((r, i) => {
    const y = top + i * rowH
    const x0 = x(1)
    const x1 = x(r.ratio)
    const color = r.met === false ? '#d9822b' : r.ratio >= 1 ? '#2b8a3e' : '#c92a2a'
    out.push(`<text x="${labelW - 8}" y="${y + 16}" text-anchor="end">${esc(r.label)}</text>`)
    out.push(`<rect x="${Math.min(x0, x1)}" y="${y + 4}" width="${Math.max(1, Math.abs(x1 - x0))}" height="${rowH - 8}" fill="${color}"/>`)
    out.push(`<text x="${Math.max(x0, x1) + 4}" y="${y + 16}">${r.ratio.toFixed(2)}×</text>`)
    if (r.goal != null) {
      out.push(`<line x1="${x(r.goal)}" y1="${y + 2}" x2="${x(r.goal)}" y2="${y + rowH - 2}" stroke="black" stroke-width="2" stroke-dasharray="3,2"/>`)
    }
  })
  out.push(`<text x="${labelW}" y="${H - 2}" font-size="10">dashed mark: goal; orange: goal missed</text>`)
  out.push('</svg>')
  return out.join('\n') + '\n'
}

module.exports = { renderSvg }
