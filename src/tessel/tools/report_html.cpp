#include "tessel/tools/report_html.h"

namespace tessel::cli {

namespace {

// The page. @TITLE@ and @DATA@ are replaced once each. The script builds
// everything from the data with createElement/textContent; plots are inline
// SVG drawn by the script (no library: a log-log scatter with a few lines
// is about as long as the code that would feed a library).
constexpr std::string_view kPage = R"TESSELPAGE(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>@TITLE@</title>
<style>
:root { --fg: #1d2327; --muted: #5f6b73; --line: #d5dadd; --bg: #fff; --panel: #f6f7f8; --sel: #fff3c4;
        --compute: #d95f02; --memory: #1b9e77; --launch: #7570b3; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
header { padding: 14px 20px 8px; border-bottom: 1px solid var(--line); background: var(--panel); }
h1 { font-size: 20px; margin: 0 0 4px; word-break: break-all; }
h2 { font-size: 16px; margin: 18px 0 8px; }
h3 { font-size: 14px; margin: 14px 0 6px; }
nav a { margin-right: 14px; color: #0b62a4; }
.muted { color: var(--muted); }
.summary { margin: 2px 0; }
main { padding: 0 20px 30px; }
.cols { display: grid; grid-template-columns: minmax(0, 5fr) minmax(0, 3fr); gap: 20px; align-items: start; }
@media (max-width: 1100px) { .cols { grid-template-columns: minmax(0, 1fr); } }
#detail { position: sticky; top: 0; max-height: 100vh; overflow: auto; padding: 4px 12px 12px; border-left: 3px solid var(--line); }
.tablewrap { max-height: 60vh; overflow: auto; border: 1px solid var(--line); }
table { border-collapse: collapse; width: 100%; }
th, td { padding: 3px 8px; border-bottom: 1px solid var(--line); text-align: left; white-space: nowrap; vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
#kernels thead th { position: sticky; top: 0; background: var(--panel); cursor: pointer; user-select: none; }
#kernels thead th:hover { background: #e8ebed; }
#kernels thead th[aria-sort="descending"]::after { content: " \25BC"; font-size: 10px; }
#kernels thead th[aria-sort="ascending"]::after { content: " \25B2"; font-size: 10px; }
#kernels tbody tr { cursor: pointer; }
#kernels tbody tr:hover { background: #f0f4f7; }
#kernels tbody tr.selected { background: var(--sel); }
.lim { display: inline-block; padding: 0 6px; border-radius: 8px; color: #fff; font-size: 12px; }
.lim-compute { background: var(--compute); } .lim-memory { background: var(--memory); } .lim-launch { background: var(--launch); }
pre { background: var(--panel); border: 1px solid var(--line); padding: 8px; overflow: auto; max-height: 70vh; font: 12px/1.35 ui-monospace, "DejaVu Sans Mono", monospace; margin: 4px 0 10px; }
dl.figures { display: grid; grid-template-columns: max-content 1fr; gap: 1px 12px; margin: 6px 0; }
dl.figures dt { color: var(--muted); } dl.figures dd { margin: 0; font-variant-numeric: tabular-nums; }
svg { display: block; max-width: 100%; height: auto; font: 13px system-ui, sans-serif; }
svg .axis line, svg .grid line { stroke: var(--line); }
svg .frame { fill: none; stroke: #9aa5ab; }
svg .ceiling { stroke: #333; stroke-width: 1.5; fill: none; }
svg .ceiling.one { stroke-dasharray: 5 4; stroke: #777; }
svg .cap { stroke: #999; stroke-dasharray: 2 3; }
svg .pt { fill-opacity: 0.7; stroke: #222; stroke-width: 0.6; cursor: pointer; }
svg .pt.compute { fill: var(--compute); } svg .pt.memory { fill: var(--memory); } svg .pt.launch { fill: var(--launch); }
svg .pt.selected { stroke: #000; stroke-width: 3; fill-opacity: 0.95; }
details.group { border: 1px solid var(--line); border-radius: 4px; margin: 4px 0; }
details.group > summary { padding: 4px 8px; cursor: pointer; background: var(--panel); }
details.group > div { padding: 4px 8px; }
button { font: inherit; margin-right: 6px; }
.bar { display: inline-block; height: 10px; background: #8fb3cc; vertical-align: middle; }
.empty { color: var(--muted); font-style: italic; }
.graphwrap { max-height: 70vh; overflow: auto; border: 1px solid var(--line); margin-bottom: 6px; }
svg .gnode rect { stroke: #555; stroke-width: 1; cursor: pointer; }
svg .gnode.selected rect { stroke: #000; stroke-width: 3; }
svg .gnode text { pointer-events: none; font-size: 12px; }
svg .gnode rect:first-child { stroke: none; }
svg .gedge { fill: none; stroke: #8a959b; stroke-width: 1.2; }
</style>
</head>
<body>
<header>
<h1 id="title"></h1>
<div id="summary"></div>
<nav><a href="#sec-kernels">kernels</a><a href="#sec-roofline">roofline</a><a href="#sec-graph">fused groups</a><a href="#sec-compile">compile</a></nav>
</header>
<main>
<div class="cols">
<div>
<section id="sec-kernels"><h2>Steps, slowest first (click a header to sort, a row for its code)</h2>
<div class="tablewrap"><table id="kernels"><thead></thead><tbody></tbody></table></div>
<p class="muted">Time: the median of the step over the timed runs; share: of the steps' summed medians. Bytes: what the step must move at least; FLOPs: its contractions' (two per multiply-add). % of bound: the step's time at the ceilings over its measured time (docs/roofline.md).</p>
</section>
<section id="sec-roofline"><h2>Roofline</h2>
<div id="roofline-wrap"></div>
<p class="muted">Left: steps with FLOPs, achieved FLOP/s against arithmetic intensity, under the FMA peak and each memory level's read bandwidth. Right: steps without FLOPs, achieved bytes/s against the bytes they move, under the bandwidth of the fastest level that holds them. Points are sized by time and coloured by limiter; click one for its code.</p>
</section>
</div>
<aside id="detail"><h2>Kernel</h2><p class="empty">Click a row of the table or a point of the roofline.</p></aside>
</div>
<section id="sec-graph"><h2>Fused groups, in execution order</h2>
<div class="graphwrap" id="group-graph-wrap"></div>
<p class="muted">Each box is a fused group (a kernel, or a node the interpreter runs), in layers by the longest chain of groups before it; an edge is a value one group stores and another reads. Boxes are coloured by limiter, darker for more time; click one for its code.</p>
<div><button id="expand-all" type="button">expand all</button><button id="collapse-all" type="button">collapse all</button></div>
<div id="groups"></div>
</section>
<section id="sec-compile"><h2>Compile</h2><div id="compile"></div></section>
</main>
<script type="application/json" id="tessel-data">@DATA@</script>
<script>
"use strict";
(function () {
const D = JSON.parse(document.getElementById("tessel-data").textContent);
const SVG = "http://www.w3.org/2000/svg";

function add(e, children) {
  for (const c of children) {
    if (c === null || c === undefined) continue;
    e.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
  }
  return e;
}
function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") e.className = v;
    else if (k === "on") for (const [ev, f] of Object.entries(v)) e.addEventListener(ev, f);
    else e.setAttribute(k, String(v));
  }
  return add(e, children);
}
function sv(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "on") for (const [ev, f] of Object.entries(v)) e.addEventListener(ev, f);
    else e.setAttribute(k, String(v));
  }
  return add(e, children);
}

function si(v, unit) {
  if (v === null || v === undefined || !isFinite(v)) return "-";
  const a = Math.abs(v);
  const p = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"]];
  for (const [s, n] of p) if (a >= s) return (v / s).toPrecision(3) + " " + n + unit;
  return (a >= 1 || a === 0 ? v.toPrecision(3) : v.toPrecision(2)) + " " + unit;
}
// Axis ticks at powers of ten: "1", "10", "100k", "1G".
function tick(v, unit) {
  const p = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "k"], [1, ""]];
  for (const [s, n] of p) if (v >= s) return Math.round(v / s) + n + unit;
  return String(Number(v.toPrecision(1))) + unit;
}
function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }
function ms(v) { return v < 0.01 ? v.toFixed(4) : v < 10 ? v.toFixed(3) : v.toFixed(1); }
function pct(v) { return (100 * v).toFixed(1) + "%"; }
function num(v, d) { return v === undefined || v === null ? "-" : Number(v).toFixed(d); }

const steps = D.steps;
const byStep = new Map(steps.map(s => [s.step, s]));
const sets = (D.roofline && D.roofline.ceilings && D.roofline.ceilings.sets) || [];
const pool = sets.find(s => s.threads === D.threads) || sets[sets.length - 1];
const one = sets.find(s => s.threads === 1);

// ---- header ----
document.getElementById("title").textContent = "tessel report: " + D.model;
(function summary() {
  const s = document.getElementById("summary");
  const dims = Object.entries(D.dims || {}).map(([k, v]) => k + "=" + v).join(", ");
  add(s, [el("div", {class: "summary"},
    "target " + D.target + ", " + D.precision + ", " + plural(D.threads, "thread", "threads") + (dims ? ", " + dims : "") +
    "; median " + ms(D.median_ms) + " ms (p10 " + ms(D.p10_ms) + ", p90 " + ms(D.p90_ms) + ") over " + D.iters +
    " runs after " + D.warmup + " warm-up; compile " + D.compile_s.toFixed(3) + " s; tessel " + D.tessel)]);
  const r = D.roofline;
  if (pool) {
    const lv = pool.levels.map(l => l.name + " " + si(l.read_bytes_per_s, "B/s")).join(", ");
    add(s, [el("div", {class: "summary"}, "ceilings, " + plural(pool.threads, "thread", "threads") + " (measured " + r.ceilings.measured_at +
      "): FMA " + si(pool.fma_flops_per_s, "FLOP/s") + "; read " + lv + "; launch " + (pool.launch_s * 1e6).toFixed(2) + " us")]);
  }
  if (r) {
    const parts = Object.entries(r.by_limiter).filter(([, p]) => p.steps > 0).map(([k, p]) =>
      k + " " + ms(p.ms) + " ms (" + plural(p.steps, "step", "steps") + ", " + (p.ms > 0 ? pct(p.bound_ms / p.ms) : "-") + " of bound)");
    add(s, [el("div", {class: "summary"}, "time by limiter: " + parts.join("; ") + ". At the bounds the " + steps.length +
      " steps would take " + ms(r.bound_ms) + " ms; they took " + ms(r.steps_ms) + " ms (" + pct(r.of_bound) + " of bound).")]);
  }
})();

// ---- selection ----
let selected = null;
function select(step, scroll) {
  selected = step;
  for (const tr of document.querySelectorAll("#kernels tbody tr"))
    tr.classList.toggle("selected", Number(tr.dataset.step) === step);
  for (const c of document.querySelectorAll("#roofline .pt, #group-graph .gnode"))
    c.classList.toggle("selected", c.dataset.step !== "" && Number(c.dataset.step) === step);
  showDetail(byStep.get(step));
  if (scroll) document.getElementById("detail").scrollIntoView({block: "nearest"});
}

// ---- the table ----
const columns = [
  {key: "step", label: "step", num: true, get: s => s.step, fmt: v => String(v)},
  {key: "name", label: "kernel", get: s => s.name, fmt: v => v},
  {key: "ops", label: "ops", get: s => s.ops.join(","), fmt: v => v},
  {key: "median_ms", label: "time ms", num: true, get: s => s.median_ms, fmt: ms},
  {key: "share", label: "share", num: true, get: s => s.share, fmt: pct},
  {key: "flops", label: "FLOPs", num: true, get: s => s.flops, fmt: v => v > 0 ? si(v, "") : "-"},
  {key: "bytes", label: "bytes", num: true, get: s => s.bytes, fmt: v => si(v, "B")},
  {key: "intensity", label: "FLOP/B", num: true, get: s => s.intensity || 0, fmt: v => v > 0 ? v.toPrecision(3) : "-"},
  {key: "achieved_flops_per_s", label: "FLOP/s", num: true, get: s => s.achieved_flops_per_s || 0, fmt: v => v > 0 ? si(v, "") : "-"},
  {key: "achieved_bytes_per_s", label: "B/s", num: true, get: s => s.achieved_bytes_per_s || 0, fmt: v => si(v, "")},
  {key: "level", label: "level", get: s => s.level || "", fmt: v => v},
  {key: "of_bound", label: "% of bound", num: true, get: s => s.of_bound || 0, fmt: pct},
  {key: "limiter", label: "limiter", get: s => s.limiter || "", fmt: v => v},
  {key: "schedule", label: "schedule", get: s => s.schedule || "", fmt: v => v},
];
const sortState = {key: "median_ms", dir: -1};
(function table() {
  const t = document.getElementById("kernels");
  const hr = el("tr");
  for (const c of columns) {
    const th = el("th", {class: c.num ? "num" : "", "data-key": c.key, scope: "col", tabindex: 0,
      on: {click: () => sortBy(c.key), keydown: e => { if (e.key === "Enter") sortBy(c.key); }}}, c.label);
    hr.appendChild(th);
  }
  t.tHead.appendChild(hr);
  const tb = t.tBodies[0];
  for (const s of steps) {
    const tr = el("tr", {"data-step": s.step, tabindex: 0,
      on: {click: () => select(s.step, false), keydown: e => { if (e.key === "Enter") select(s.step, false); }}});
    for (const c of columns) {
      const v = c.get(s);
      const td = el("td", {class: c.num ? "num" : ""});
      if (c.key === "limiter" && v) td.appendChild(el("span", {class: "lim lim-" + v, title: s.why || ""}, v));
      else td.textContent = c.fmt(v);
      tr.appendChild(td);
    }
    tb.appendChild(tr);
  }
  renderSort();
})();
function sortBy(key) {
  const c = columns.find(c => c.key === key);
  if (sortState.key === key) sortState.dir = -sortState.dir;
  else { sortState.key = key; sortState.dir = c.num ? -1 : 1; }
  renderSort();
}
function renderSort() {
  const c = columns.find(c => c.key === sortState.key);
  const tb = document.querySelector("#kernels tbody");
  const rows = Array.from(tb.rows);
  rows.sort((a, b) => {
    const x = c.get(byStep.get(Number(a.dataset.step))), y = c.get(byStep.get(Number(b.dataset.step)));
    const d = c.num ? x - y : String(x).localeCompare(String(y));
    return d !== 0 ? sortState.dir * d : Number(a.dataset.step) - Number(b.dataset.step);
  });
  for (const r of rows) tb.appendChild(r);
  for (const th of document.querySelectorAll("#kernels thead th")) {
    if (th.dataset.key === sortState.key) th.setAttribute("aria-sort", sortState.dir < 0 ? "descending" : "ascending");
    else th.removeAttribute("aria-sort");
  }
}

// ---- the roofline ----
function logScale(d0, d1, r0, r1) {
  const l0 = Math.log10(d0), l1 = Math.log10(d1);
  const f = v => r0 + (Math.log10(Math.min(Math.max(v, d0), d1)) - l0) / (l1 - l0) * (r1 - r0);
  f.d0 = d0; f.d1 = d1;
  return f;
}
function decades(lo, hi) {
  let a = Math.floor(Math.log10(lo)), b = Math.ceil(Math.log10(hi));
  if (b <= a) b = a + 1;
  return [Math.pow(10, a), Math.pow(10, b)];
}
function axes(g, x, y, box, xlabel, ylabel, xfmt, yfmt) {
  g.appendChild(sv("rect", {class: "frame", x: box.x0, y: box.y0, width: box.x1 - box.x0, height: box.y1 - box.y0}));
  const grid = sv("g", {class: "grid"});
  const n = Math.round(Math.log10(x.d1 / x.d0)), every = n > 6 ? 2 : 1;
  for (let i = 0; i <= n; ++i) {
    const v = x.d0 * Math.pow(10, i), px = x(v);
    grid.appendChild(sv("line", {x1: px, x2: px, y1: box.y0, y2: box.y1}));
    if (i % every === 0) g.appendChild(sv("text", {x: px, y: box.y1 + 16, "text-anchor": "middle"}, xfmt(v)));
  }
  for (let i = 0; i <= Math.round(Math.log10(y.d1 / y.d0)); ++i) {
    const v = y.d0 * Math.pow(10, i), py = y(v);
    grid.appendChild(sv("line", {x1: box.x0, x2: box.x1, y1: py, y2: py}));
    g.appendChild(sv("text", {x: box.x0 - 5, y: py + 4, "text-anchor": "end"}, yfmt(v)));
  }
  g.insertBefore(grid, g.firstChild);
  g.appendChild(sv("text", {x: (box.x0 + box.x1) / 2, y: box.y1 + 33, "text-anchor": "middle"}, xlabel));
  g.appendChild(sv("text", {x: 12, y: (box.y0 + box.y1) / 2, "text-anchor": "middle",
    transform: "rotate(-90 12 " + (box.y0 + box.y1) / 2 + ")"}, ylabel));
}
function point(s, px, py) {
  const r = 3 + 14 * Math.sqrt(Math.max(s.share, 0));
  const c = sv("circle", {class: "pt " + (s.limiter || "memory"), cx: px.toFixed(1), cy: py.toFixed(1), r: r.toFixed(1),
    "data-step": s.step, on: {click: () => select(s.step, true)}});
  c.appendChild(sv("title", {}, s.name + " [" + s.ops.join(",") + "]: " + ms(s.median_ms) + " ms, " + pct(s.share) +
    " of the time, " + pct(s.of_bound || 0) + " of bound (" + (s.limiter || "") + ")"));
  return c;
}
// The steps' points, largest first so that small ones stay clickable on top.
function points(g, box, list, px, py, emptyText) {
  const pts = sv("g", {class: "points"});
  for (const s of list.slice().sort((a, b) => b.share - a.share)) pts.appendChild(point(s, px(s), py(s)));
  g.appendChild(pts);
  if (!list.length) g.appendChild(sv("text", {x: (box.x0 + box.x1) / 2, y: (box.y0 + box.y1) / 2, "text-anchor": "middle"}, emptyText));
}
(function roofline() {
  const W = 1000, H = 400;
  const svg = sv("svg", {id: "roofline", viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img",
    "aria-label": "roofline of the steps"});
  const withFlops = steps.filter(s => s.flops > 0), noFlops = steps.filter(s => !(s.flops > 0));
  const P = pool ? pool.fma_flops_per_s : 1e11, levels = pool ? pool.levels : [];
  // Left: FLOP/s against FLOP/B.
  {
    const box = {x0: 80, x1: 560, y0: 16, y1: 330};
    const ridges = levels.map(l => P / l.read_bytes_per_s);
    const xs = withFlops.map(s => s.intensity).concat(ridges).filter(v => v > 0);
    const ys = withFlops.map(s => s.achieved_flops_per_s).filter(v => v > 0);
    const [x0, x1] = decades(xs.length ? Math.min(...xs) / 2 : 0.1, xs.length ? Math.max(...xs) * 2 : 100);
    const [y0, y1] = decades(ys.length ? Math.min(Math.min(...ys) / 2, P / 1e3) : P / 1e3, P * 1.5);
    const x = logScale(x0, x1, box.x0, box.x1), y = logScale(y0, y1, box.y1, box.y0);
    const g = sv("g", {class: "panel", id: "panel-flops"});
    axes(g, x, y, box, "arithmetic intensity (FLOP/B)", "FLOP/s", v => tick(v, ""), v => tick(v, ""));
    const lines = sv("g", {class: "ceilings"});
    const labels = [];
    levels.forEach((l, i) => {
      const r = ridges[i], bw = l.read_bytes_per_s;
      const xa = Math.max(x0, y0 / bw), xb = Math.min(r, x1);
      if (xb <= xa) return;
      lines.appendChild(sv("line", {class: "ceiling", x1: x(xa), y1: y(bw * xa), x2: x(xb), y2: y(bw * xb)},
        sv("title", {}, l.name + " read " + si(bw, "B/s"))));
      labels.push({x: x(xa) + 4, y: y(bw * xa) - 4, text: l.name + " " + si(bw, "B/s")});
    });
    // Labels at the lines' left ends, pushed apart where bandwidths are close.
    labels.sort((a, b) => a.y - b.y);
    for (let i = 1; i < labels.length; ++i) labels[i].y = Math.max(labels[i].y, labels[i - 1].y + 13);
    for (const lb of labels) lines.appendChild(sv("text", {x: lb.x, y: Math.min(lb.y, box.y1 - 3)}, lb.text));
    const rmin = ridges.length ? Math.min(...ridges) : x0;
    lines.appendChild(sv("line", {class: "ceiling", x1: x(Math.max(rmin, x0)), y1: y(P), x2: box.x1, y2: y(P)},
      sv("title", {}, "FMA peak " + si(P, "FLOP/s"))));
    lines.appendChild(sv("text", {x: x(Math.max(rmin, x0)) + 4, y: y(P) - 5},
      "FMA peak " + si(P, "FLOP/s") + " (" + plural(pool ? pool.threads : 0, "thread", "threads") + ")"));
    if (one && pool && one !== pool) {
      lines.appendChild(sv("line", {class: "ceiling one", x1: box.x0, y1: y(one.fma_flops_per_s), x2: box.x1, y2: y(one.fma_flops_per_s)}));
      lines.appendChild(sv("text", {x: x(Math.max(rmin, x0)) + 4, y: y(one.fma_flops_per_s) + 13},
        "1 thread " + si(one.fma_flops_per_s, "FLOP/s")));
    }
    g.appendChild(lines);
    points(g, box, withFlops, s => x(s.intensity), s => y(s.achieved_flops_per_s), "no step with FLOPs");
    svg.appendChild(g);
  }
  // Right: bytes/s against bytes, under the staircase of the levels' bandwidths.
  {
    const box = {x0: 690, x1: 985, y0: 16, y1: 330};
    const caps = levels.map(l => l.capacity).filter(c => c > 0);
    const xs = noFlops.map(s => s.bytes).filter(v => v > 0);
    const bws = levels.map(l => l.read_bytes_per_s);
    const ys = noFlops.map(s => s.achieved_bytes_per_s).filter(v => v > 0);
    const [x0, x1] = decades(Math.min(xs.length ? Math.min(...xs) / 2 : 1e3, caps.length ? caps[0] / 4 : 1e3),
                             Math.max(xs.length ? Math.max(...xs) * 2 : 1e8, caps.length ? caps[caps.length - 1] * 4 : 1e8));
    const [y0, y1] = decades(Math.min(ys.length ? Math.min(...ys) / 2 : 1e9, bws.length ? Math.min(...bws) / 10 : 1e9),
                             bws.length ? Math.max(...bws) * 1.5 : 1e12);
    const x = logScale(x0, x1, box.x0, box.x1), y = logScale(y0, y1, box.y1, box.y0);
    const g = sv("g", {class: "panel", id: "panel-bytes"});
    axes(g, x, y, box, "bytes moved (steps without FLOPs)", "", v => tick(v, "B"), v => tick(v, "B/s"));
    const lines = sv("g", {class: "ceilings"});
    let from = x0;
    levels.forEach(l => {
      const to = l.capacity > 0 ? Math.min(l.capacity, x1) : x1;
      if (to > from) {
        lines.appendChild(sv("line", {class: "ceiling", x1: x(from), y1: y(l.read_bytes_per_s), x2: x(to), y2: y(l.read_bytes_per_s)},
          sv("title", {}, l.name + " read " + si(l.read_bytes_per_s, "B/s"))));
        lines.appendChild(sv("text", {x: (x(from) + x(to)) / 2, y: y(l.read_bytes_per_s) - 4, "text-anchor": "middle"}, l.name));
      }
      if (l.capacity > 0 && l.capacity < x1) lines.appendChild(sv("line", {class: "cap", x1: x(l.capacity), x2: x(l.capacity), y1: box.y0, y2: box.y1}));
      from = Math.max(from, to);
    });
    g.appendChild(lines);
    points(g, box, noFlops, s => x(s.bytes), s => y(s.achieved_bytes_per_s), "every step has FLOPs");
    svg.appendChild(g);
  }
  const legend = sv("g", {class: "legend", transform: "translate(90, 394)"});
  ["compute", "memory", "launch"].forEach((k, i) => {
    legend.appendChild(sv("circle", {class: "pt-legend", cx: i * 150, cy: -4, r: 5, fill: getComputedStyle(document.documentElement).getPropertyValue("--" + k)}));
    legend.appendChild(sv("text", {x: i * 150 + 9, y: 0}, k + "-bound"));
  });
  svg.appendChild(legend);
  document.getElementById("roofline-wrap").appendChild(svg);
})();

// ---- a kernel's detail ----
function figures(pairs) {
  const dl = el("dl", {class: "figures"});
  for (const [k, v] of pairs) if (v !== undefined && v !== null && v !== "") add(dl, [el("dt", {}, k), el("dd", {}, String(v))]);
  return dl;
}
function codeBlock(title, text, id, open) {
  const d = el("details", open ? {open: ""} : {}, el("summary", {}, title));
  d.appendChild(el("pre", {id: id}, text));
  return d;
}
function nodesTable(nodes) {
  const t = el("table", {class: "nodes"}, el("thead", {}, el("tr", {}, el("th", {}, "node"), el("th", {}, "op"),
    el("th", {}, "inputs"), el("th", {}, "outputs"))));
  const tb = el("tbody");
  const vals = vs => vs.map(v => "%" + v[0] + ": " + v[1]).join(", ");
  for (const n of nodes) tb.appendChild(el("tr", {}, el("td", {}, n.name || "-"), el("td", {}, n.op), el("td", {}, vals(n.inputs)), el("td", {}, vals(n.outputs))));
  t.appendChild(tb);
  return el("div", {class: "tablewrap"}, t);
}
function showDetail(s) {
  const d = document.getElementById("detail");
  d.replaceChildren();
  if (!s) return;
  d.setAttribute("data-step", s.step);
  add(d, [el("h2", {id: "detail-title"}, s.name), el("p", {}, s.what)]);
  if (s.why) add(d, [el("p", {}, el("span", {class: "lim lim-" + s.limiter}, s.limiter), " " + s.why)]);
  add(d, [figures([
    ["step", s.step], ["time", ms(s.median_ms) + " ms (" + pct(s.share) + " of the steps' sum)"],
    ["bytes", si(s.bytes, "B") + (s.level ? " (fits " + s.level + ")" : "")],
    ["FLOPs", s.flops > 0 ? si(s.flops, "FLOP") : "none counted"],
    ["intensity", s.intensity > 0 ? s.intensity.toPrecision(3) + " FLOP/B" : ""],
    ["achieved", (s.flops > 0 ? si(s.achieved_flops_per_s, "FLOP/s") + ", " : "") + si(s.achieved_bytes_per_s, "B/s")],
    ["bound", s.bound_ms !== undefined ? ms(s.bound_ms) + " ms = launch " + ms(s.launch_ms) + " + max(compute " + ms(s.compute_ms) +
      ", memory " + ms(s.memory_ms) + ")" : ""],
    ["% of bound", s.of_bound !== undefined ? pct(s.of_bound) : ""],
    ["ceilings of", s.ceiling_threads !== undefined ? s.ceiling_threads + (s.ceiling_threads === 1 ? " thread" : " threads") : ""],
    ["schedule", s.schedule], ["parallel", s.parallel === undefined ? "" : (s.parallel ? "yes" : "no")],
    ["default hash", s.default_hash],
    ["LLVM function", s.llvm_function && s.llvm_function !== s.name ? s.llvm_function + " (shared with an identical kernel)" : ""],
  ])]);
  const g = s.group !== null && s.group !== undefined ? D.groups[s.group] : null;
  if (g) add(d, [el("h3", {}, "nodes"), nodesTable(g.nodes)]);
  else if (s.node) add(d, [el("h3", {}, "node"), nodesTable([s.node])]);
  if (s.kind === "interpreter") {
    add(d, [el("p", {}, "This node runs on the reference interpreter: it has no compiled form.")]);
    if (D.interpreter_reasons.length) add(d, [el("pre", {id: "interp-reasons"}, D.interpreter_reasons.join("\n"))]);
  }
  if (s.schedule_text !== undefined) add(d, [codeBlock("schedule", s.schedule_text || "(default)", "schedule-text", true)]);
  if (s.loop_ir !== undefined) add(d, [codeBlock("loop IR", s.loop_ir, "loop-ir", true)]);
  if (s.llvm_ir !== undefined) add(d, [codeBlock("LLVM IR (optimised)", s.llvm_ir, "llvm-ir", false)]);
}

// ---- the graph of the fused groups ----
(function groupGraph() {
  const G = D.groups, n = G.length;
  if (!n) return;
  const layer = new Array(n).fill(0);
  for (let i = 0; i < n; ++i) for (const p of G[i].preds) if (p < i) layer[i] = Math.max(layer[i], layer[p] + 1);
  const rows = [];
  G.forEach((g, i) => (rows[layer[i]] = rows[layer[i]] || []).push(i));
  const BW = 180, BH = 40, GX = 36, GY = 28;
  const wide = Math.max(...rows.map(r => r.length));
  const W = wide * (BW + GX) + GX, H = rows.length * (BH + GY) + GY;
  const pos = [];
  rows.forEach((r, l) => r.forEach((i, c) => {
    pos[i] = {x: GX + c * (BW + GX) + (wide - r.length) * (BW + GX) / 2, y: GY / 2 + l * (BH + GY)};
  }));
  const svg = sv("svg", {id: "group-graph", viewBox: "0 0 " + W + " " + H, width: W, height: H, role: "img",
    "aria-label": "the fused groups and the values between them"});
  const edges = sv("g", {class: "gedges"});
  G.forEach((g, i) => { for (const p of g.preds) {
    const a = pos[p], b = pos[i];
    let d;
    if (layer[i] - layer[p] > 1 && Math.abs(a.x - b.x) < BW) {
      // Past the layers between them: out of the right sides, around the boxes in between.
      const x1 = a.x + BW, y1 = a.y + BH / 2, x2 = b.x + BW, y2 = b.y + BH / 2, out = Math.max(x1, x2) + GX * 0.9;
      d = "M" + x1 + "," + y1 + " C" + out + "," + y1 + " " + out + "," + y2 + " " + x2 + "," + y2;
    } else {
      const x1 = a.x + BW / 2, y1 = a.y + BH, x2 = b.x + BW / 2, y2 = b.y, m = (y1 + y2) / 2;
      d = "M" + x1 + "," + y1 + " C" + x1 + "," + m + " " + x2 + "," + m + " " + x2 + "," + y2;
    }
    edges.appendChild(sv("path", {class: "gedge", d: d}));
  } });
  svg.appendChild(edges);
  const maxShare = Math.max(...steps.map(s => s.share), 1e-9);
  const cut = (t, k) => t.length > k ? t.slice(0, k - 1) + "\u2026" : t;
  G.forEach((g, i) => {
    const s = g.step !== null ? byStep.get(g.step) : null;
    const colour = getComputedStyle(document.documentElement).getPropertyValue("--" + (s && s.limiter ? s.limiter : "memory")).trim();
    const box = sv("g", {class: "gnode", "data-group": i, "data-step": s ? s.step : "", transform: "translate(" + pos[i].x + "," + pos[i].y + ")",
      on: {click: () => { if (s) select(s.step, true); }}});
    box.appendChild(sv("rect", {width: BW, height: BH, rx: 4, fill: "#fff"}));
    box.appendChild(sv("rect", {width: BW, height: BH, rx: 4, fill: colour,
      "fill-opacity": (0.12 + 0.75 * Math.sqrt(s ? s.share / maxShare : 0)).toFixed(2)}));
    box.appendChild(sv("text", {x: 6, y: 16}, cut(g.name + (s ? "  " + ms(s.median_ms) + " ms" : ""), 25)));
    box.appendChild(sv("text", {x: 6, y: 32}, cut(g.nodes.map(x => x.op.replace(/^tessel\./, "")).join(","), 25)));
    box.appendChild(sv("title", {}, g.name + ": " + g.nodes.map(x => (x.name ? x.name + " " : "") + x.op).join(", ")));
    svg.appendChild(box);
  });
  document.getElementById("group-graph-wrap").appendChild(svg);
})();

// ---- fused groups ----
(function groups() {
  const root = document.getElementById("groups");
  D.groups.forEach((g, i) => {
    const s = g.step !== null ? byStep.get(g.step) : null;
    const sum = el("summary", {}, el("b", {}, g.name), " " + (g.compiled ? "kernel" : "interpreter") + ", " +
      g.nodes.length + (g.nodes.length === 1 ? " node: " : " nodes: ") + g.nodes.map(n => n.op).join(", ") +
      (s ? "; " + ms(s.median_ms) + " ms (" + pct(s.share) + ")" : ""));
    const body = el("div");
    if (s) body.appendChild(el("button", {type: "button", on: {click: () => select(s.step, true)}}, "show its code"));
    body.appendChild(nodesTable(g.nodes));
    root.appendChild(el("details", {class: "group", "data-group": i}, sum, body));
  });
  if (!D.groups.length) root.appendChild(el("p", {class: "empty"}, "no groups"));
  if (D.interpreter_reasons.length) add(root, [el("h3", {}, "why nodes run on the interpreter"), el("pre", {}, D.interpreter_reasons.join("\n"))]);
  root.appendChild(codeBlock("the model after the pass pipeline (graph IR, large constants elided)", D.graph_ir, "graph-ir", false));
  document.getElementById("expand-all").addEventListener("click", () => { for (const e of document.querySelectorAll("details.group")) e.open = true; });
  document.getElementById("collapse-all").addEventListener("click", () => { for (const e of document.querySelectorAll("details.group")) e.open = false; });
})();

// ---- compile ----
(function compile() {
  const root = document.getElementById("compile");
  const pt = el("table", {id: "phases"}, el("thead", {}, el("tr", {}, el("th", {}, "phase"), el("th", {class: "num"}, "seconds"), el("th", {}, ""))));
  const pb = el("tbody");
  for (const p of D.phases) pb.appendChild(el("tr", {}, el("td", {}, p.name), el("td", {class: "num"}, p.s.toFixed(3)), el("td", {class: "muted"}, p.note || "")));
  pt.appendChild(pb);
  add(root, [el("h3", {}, "phases"), pt]);
  const total = D.passes.reduce((a, p) => a + p.ms, 0);
  const maxMs = D.passes.reduce((a, p) => Math.max(a, p.ms), 0);
  const t = el("table", {id: "passes"}, el("thead", {}, el("tr", {}, el("th", {}, "pass"), el("th", {class: "num"}, "ms"),
    el("th", {}, "changed"), el("th", {}, ""))));
  const tb = el("tbody");
  for (const p of D.passes) {
    const bar = el("span", {class: "bar"});
    bar.style.width = (maxMs > 0 ? 200 * p.ms / maxMs : 0).toFixed(1) + "px";
    tb.appendChild(el("tr", {}, el("td", {}, p.name), el("td", {class: "num"}, p.ms.toFixed(3)), el("td", {}, p.changed ? "yes" : "no"), el("td", {}, bar)));
  }
  t.appendChild(tb);
  add(root, [el("h3", {}, "graph passes (" + total.toFixed(1) + " ms; each with its verification)"), t]);
  add(root, [el("h3", {}, "log"), D.log ? el("pre", {id: "log"}, D.log) : el("p", {class: "empty"}, "nothing was logged")]);
})();

const first = steps.slice().sort((a, b) => b.median_ms - a.median_ms)[0];
if (first) select(first.step, false);
document.body.setAttribute("data-ready", "1");
})();
</script>
</body>
</html>
)TESSELPAGE";

// `s` with every character for which `with` gives a string replaced by it.
template <class With>
std::string replace_chars(std::string_view s, With with) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    const char* r = with(ch);
    if (r) out += r;
    else out += ch;
  }
  return out;
}

}  // namespace

std::string html_escape(std::string_view s) {
  return replace_chars(s, [](char ch) -> const char* {
    switch (ch) {
      case '&': return "&amp;";
      case '<': return "&lt;";
      case '>': return "&gt;";
      case '"': return "&quot;";
      case '\'': return "&#39;";
      default: return nullptr;
    }
  });
}

std::string json_for_script(const Json& j) {
  return replace_chars(json_line(j), [](char ch) -> const char* {
    switch (ch) {
      case '<': return "\\u003c";
      case '>': return "\\u003e";
      case '&': return "\\u0026";
      default: return nullptr;
    }
  });
}

std::string report_html(const Json& data) {
  const std::string model = data.contains("model") && data["model"].is_string() ? data["model"].get<std::string>() : "";
  // Cut at the template's own markers, so that a marker inside the model's
  // text is never replaced.
  const size_t title = kPage.find("@TITLE@"), blob = kPage.find("@DATA@");
  std::string page(kPage.substr(0, title));
  page += html_escape("tessel report: " + model);
  page += kPage.substr(title + 7, blob - title - 7);
  page += json_for_script(data);
  page += kPage.substr(blob + 6);
  return page;
}

}  // namespace tessel::cli
