// advcalc view's page: hash routes (#/, #/step/I, #/group/G, #/row/R[/token/T]) over the
// server's JSON (/api/...). Every value from the dump goes into the page as text (h() sets
// textContent), never as markup: a prompt is data, not HTML.
"use strict";

const state = { version: null, overview: null, seenSteps: null, newSteps: new Set(), sort: {} };
const main = document.getElementById("main");
const statusEl = document.getElementById("status");

// ---- helpers ---------------------------------------------------------------------------
function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
const svgNS = "http://www.w3.org/2000/svg";
function s(tag, attrs, ...children) {
  const el = document.createElementNS(svgNS, tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v);
  }
  for (const c of children.flat()) if (c) el.append(c);
  return el;
}
// the token rides on every request as well as in the cookie: an IFrame in a notebook on
// another origin may not be allowed the cookie
const TOKEN = new URLSearchParams(location.search).get("token");
async function api(path) {
  if (TOKEN) path += `${path.includes("?") ? "&" : "?"}token=${encodeURIComponent(TOKEN)}`;
  const r = await fetch(path, { credentials: "same-origin", cache: "no-store" });
  const body = await r.json().catch(() => ({ error: `HTTP ${r.status}` }));
  if (!r.ok) throw new Error(body.error || `HTTP ${r.status}`);
  return body;
}
// numbers as a table shows them: 4 significant digits, integers as they are
function fmt(x, digits = 4) {
  if (x === null || x === undefined) return "—";
  if (typeof x !== "number") return String(x);
  if (!Number.isFinite(x)) return String(x);
  if (Number.isInteger(x) && Math.abs(x) < 1e9) return String(x);
  const a = Math.abs(x);
  if (a !== 0 && (a < 1e-3 || a >= 1e6)) return x.toExponential(digits - 1);
  return String(Number(x.toPrecision(digits)));
}
function pct(x) { return x === null || x === undefined ? "—" : `${(100 * x).toFixed(1)} %`; }
function stepName(step, index) { return step === null || step === undefined ? `batch ${index}` : `step ${step}`; }
function go(hash) { location.hash = hash; }
const PALETTE = ["#1f5fae", "#d1495b", "#2e8540", "#8a5cc2", "#e08a00", "#00838f", "#6d4c41"];

// ---- the route -------------------------------------------------------------------------
function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean);
  return parts;
}
// a render started later wins: an older reply that arrives after it is dropped
let renders = 0;
function stale(id) { return id !== renders; }
async function render() {
  const parts = route();
  const id = ++renders;
  try {
    if (!state.overview) state.overview = await api("api/overview");
    const o = state.overview;
    document.getElementById("file").textContent =
      `${o.file} · ${o.rows} rows · ${o.steps.length} step${o.steps.length === 1 ? "" : "s"} · ${o.labels.join(", ")}`;
    if (parts[0] === "step") await showStep(Number(parts[1]), id);
    else if (parts[0] === "group") await showGroup(Number(parts[1]), id);
    else if (parts[0] === "row") await showRow(Number(parts[1]), parts[2] === "token" ? Number(parts[3]) : null, id);
    else showOverview();
  } catch (e) {
    main.replaceChildren(h("p", { class: "warn", "data-testid": "error", text: e.message }));
  }
}
function crumbs(items) {
  const nav = document.getElementById("crumbs");
  nav.replaceChildren();
  items.forEach(([label, hash], i) => {
    if (i) nav.append(h("span", { class: "sep", text: "›" }));
    nav.append(hash ? h("a", { href: hash, text: label }) : h("span", { text: label }));
  });
}

// ---- overview --------------------------------------------------------------------------
function metricOf(step, name) {
  // the first variant that has it
  for (const m of step.metrics || []) if (m && typeof m[name] === "number") return m[name];
  return null;
}
function showOverview() {
  const o = state.overview;
  crumbs([["overview", null]]);
  const out = [h("h1", { text: "Overview" })];
  const notes = (o.inspect.notes || []).concat(o.notes || []);
  if (notes.length) out.push(h("div", { class: "notes" }, notes.map((n) => h("p", { text: "note: " + n }))));
  const warns = [];
  o.warnings.forEach((ws, v) => ws.forEach((w) => warns.push(`${o.labels[v]}: ${w}`)));
  if (warns.length) out.push(h("div", { class: "notes warnings" }, warns.map((w) => h("p", { text: "warning: " + w }))));

  const steps = o.steps;
  const series = [
    ["Score (mean of the rows' Σ token scores)", steps.map((s) => [s.score_mean])],
    ["Pass rate (score > correct-above)", steps.map((s) => [s.pass_rate])],
    ["No-signal groups (every row the same score)", steps.map((s) => [s.no_signal_groups])],
    ["Advantage std over valid tokens", steps.map((s) => s.advantage_std), o.labels],
  ];
  if (!o.sequence_level) series.push(["Response length (valid tokens, mean)", steps.map((s) => [s.length_mean])]);
  if (steps.some((s) => typeof s.kl_mean === "number"))
    series.push(["KL (old − ref log-prob, mean per token)", steps.map((s) => [s.kl_mean])]);
  if (steps.some((s) => metricOf(s, "rollout_corr/rollout_is_mean") !== null))
    series.push(["IS weight (rollout_corr/rollout_is_mean)", steps.map((s) => [metricOf(s, "rollout_corr/rollout_is_mean")])]);
  if (steps.some((s) => metricOf(s, "actor/reward_kl_penalty") !== null))
    series.push(["KL in the reward (actor/reward_kl_penalty)", steps.map((s) => [metricOf(s, "actor/reward_kl_penalty")])]);
  out.push(h("h2", { text: "Per step" }));
  if (steps.length < 2) {
    out.push(h("p", { class: "muted", text: "One training batch: the curves need a step column or step=N in the paths. The table below has its numbers." }));
  } else {
    out.push(h("div", { class: "charts" }, series.map(([title, ys, labels]) => chart(title, steps, ys, labels))));
  }

  if (o.check) out.push(...checkSection(o.check, steps));

  // findings by code, each with the steps it names (the first few linked)
  const byCode = new Map();
  (o.inspect.steps || []).forEach((st) => {
    const i = steps.findIndex((x) => x.step === st.step);
    (st.warnings || []).forEach((w) => {
      if (!byCode.has(w.code)) byCode.set(w.code, { message: w.message, steps: [] });
      byCode.get(w.code).steps.push([i, st.step]);
    });
  });
  const total = [...byCode.values()].reduce((n, f) => n + f.steps.length, 0);
  out.push(h("h2", { text: `Findings (${total})` }));
  if (!byCode.size) out.push(h("p", { class: "muted", text: "advcalc inspect raises no warning on this input." }));
  else out.push(h("ul", { class: "findings", "data-testid": "findings" }, [...byCode].map(([code, f]) => {
    const shown = f.steps.slice(0, 12).map(([i, step]) => [h("a", { href: `#/step/${i}`, text: stepName(step, i) }), " "]);
    const more = f.steps.length > 12 ? `… and ${f.steps.length - 12} more steps` : "";
    return h("li", {}, h("span", { class: "tag", text: code }), ` ${f.steps.length} step${f.steps.length === 1 ? "" : "s"}: `,
      shown, more, h("br"), h("span", { class: "muted", text: f.steps.length > 1 ? `the first: ${f.message}` : f.message }));
  })));
  const logged = o.inspect.logged_advantages;
  if (logged && typeof logged === "object")
    out.push(h("p", {}, h("b", { text: "Logged advantages: " }),
      `${logged.differing ?? 0} of ${logged.compared ?? 0} rows differ from advcalc's recomputation.`));

  out.push(h("h2", { text: "Steps" }));
  const cols = [
    ["step", "Step", (s) => s.step ?? s.index, (s) => stepName(s.step, s.index), "left"],
    ["rows", "Rows", (s) => s.rows],
    ["groups", "Groups", (s) => s.groups],
    ["score", "Score", (s) => s.score_mean, (s) => fmt(s.score_mean)],
    ["pass", "Pass rate", (s) => s.pass_rate, (s) => pct(s.pass_rate)],
    ["nosig", "No-signal", (s) => s.no_signal_groups],
    ["fragile", "Fragile", (s) => s.fragile_groups],
    ...(o.sequence_level ? [] : [["len", "Length", (s) => s.length_mean, (s) => fmt(s.length_mean)]]),
    ...o.labels.map((l, v) => [`adv${v}`, `Adv. std ${l}`, (s) => s.advantage_std[v], (s) => fmt(s.advantage_std[v])]),
    ["find", "Findings", (s) => s.findings.length, (s) => findingTags(s), "left"],
  ];
  out.push(table("steps", cols, steps, (s) => `#/step/${s.index}`, "step-row", (s) => ({
    new: state.newSteps.has(s.step), flagged: s.findings.length > 0,
  })));
  main.replaceChildren(...out.filter(Boolean));
}
// --log: the run's log against the values recomputed from IN (advcalc check)
function checkSection(c, steps) {
  const out = [h("h2", { text: `Logged vs recomputed (${c.log})` })];
  if (c.error) {
    out.push(h("p", { class: "warn", "data-testid": "check-error", text: `The log could not be checked: ${c.error}` }));
    return out;
  }
  const first = c.first_divergence;
  out.push(h("p", { "data-testid": "check-summary", class: first ? "warn" : null,
    text: first
      ? `${c.diverging} of ${c.compared} logged values (${c.format}) differ from the dumps; the first: step ${first.step}, ${first.metric}.`
      : `All ${c.compared} logged values (${c.format}) agree with the dumps.` }));
  for (const cause of c.causes) out.push(h("p", {}, h("b", { text: "likely cause: " }), cause));
  const names = Object.keys(c.metrics);
  const bad = names.filter((n) => c.metrics[n].some((p) => !p[3]));
  const usual = ["critic/score/mean", "critic/advantages/mean", "response_length/mean", "reward", "reward_std"]
    .filter((n) => names.includes(n) && !bad.includes(n));
  const shown = bad.concat(usual).slice(0, 8);
  const charts = shown.map((name) => {
    const points = c.metrics[name];
    const st = points.map((p) => {
      const i = steps.findIndex((x) => x.step === p[0]);
      return { step: p[0], index: i < 0 ? 0 : i, findings: p[3] ? [] : ["differs"] };
    });
    // at least twice the largest tolerance tall: values that agree draw as one line, not as
    // float32 noise blown up to the chart's height
    const span = 2 * Math.max(...points.map((p) => p[4] || 0));
    return chart(`${name}${bad.includes(name) ? " — differs" : ""}`, st, points.map((p) => [p[1], p[2]]), ["logged", "recomputed"], span);
  });
  if (charts.length) out.push(h("div", { class: "charts", "data-testid": "check-charts" }, charts));
  if (c.not_recomputed.length)
    out.push(h("p", { class: "muted", text: `Not recomputed (advcalc check lists why): ${c.not_recomputed.join(", ")}` }));
  return out;
}

function findingTags(s) {
  const tags = s.findings.map((c) => h("span", { class: "tag", text: c }));
  if (state.newSteps.has(s.step)) tags.unshift(h("span", { class: "tag new", "data-testid": "new-step", text: "new" }));
  return tags.length ? tags : "";
}
function chart(title, steps, ys, labels, minSpan = 0) {
  const W = 300, H = 130, R = 8, T = 8, B = 20;
  const n = steps.length;
  const lines = (labels || [""]).map((_, k) => ys.map((y) => (y && typeof y[k] === "number" ? y[k] : null)));
  const all = lines.flat().filter((v) => v !== null);
  let lo = Infinity, hi = -Infinity;
  for (const v of all) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  if (!all.length) { lo = 0; hi = 1; }
  if (lo > 0 && lo < hi / 3) lo = 0;
  if (hi === lo) { hi += Math.abs(hi) * 0.1 || 1; lo -= Math.abs(lo) * 0.1 || 0; }
  if (hi - lo < minSpan) { const mid = (hi + lo) / 2; lo = mid - minSpan / 2; hi = mid + minSpan / 2; }
  // the axis labels right-aligned left of the axis: room for the longer (10px text, about
  // 6 units a character), so a "-2.58e-8" keeps its sign
  const hiText = fmt(hi, 3), loText = fmt(lo, 3);
  const L = Math.max(44, 6 * Math.max(hiText.length, loText.length) + 6);
  const x = (i) => L + (n === 1 ? 0 : (i * (W - L - R)) / (n - 1));
  const y = (v) => T + (H - T - B) * (1 - (v - lo) / (hi - lo));
  const g = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": title });
  g.append(s("line", { class: "axis", x1: L, x2: W - R, y1: H - B, y2: H - B }));
  g.append(s("line", { class: "axis", x1: L, x2: L, y1: T, y2: H - B }));
  g.append(s("text", { x: L - 4, y: T + 8, "text-anchor": "end", text: hiText }));
  g.append(s("text", { x: L - 4, y: H - B, "text-anchor": "end", text: loText }));
  g.append(s("text", { x: L, y: H - 4, text: stepName(steps[0].step, 0) }));
  g.append(s("text", { x: W - R, y: H - 4, "text-anchor": "end", text: stepName(steps[n - 1].step, n - 1) }));
  lines.forEach((vals, k) => {
    const colour = PALETTE[k % PALETTE.length];
    let d = "";
    vals.forEach((v, i) => { if (v !== null) d += `${d ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`; });
    g.append(s("path", { d, fill: "none", stroke: colour, "stroke-width": 1.6 }));
    vals.forEach((v, i) => {
      if (v === null) return;
      g.append(s("circle", { class: "pt", cx: x(i), cy: y(v), r: n > 60 ? 1.5 : 2.6, fill: colour,
        onclick: () => go(`#/step/${steps[i].index ?? i}`) }, s("title", { text: `${stepName(steps[i].step, i)}: ${fmt(v)}` })));
    });
  });
  steps.forEach((st, i) => {
    if (st.findings.length) g.append(s("rect", { class: "flag pt", x: x(i) - 2, y: H - B + 1, width: 4, height: 4,
      onclick: () => go(`#/step/${st.index ?? i}`) }, s("title", { text: `${stepName(st.step, i)}: ${st.findings.join(", ")}` })));
  });
  const legend = labels && labels.length > 1
    ? h("div", { class: "legend" }, labels.map((l, k) => [h("i", { style: null, "data-c": k }), l]))
    : null;
  if (legend) legend.querySelectorAll("i").forEach((i) => { i.style.background = PALETTE[Number(i.dataset.c) % PALETTE.length]; });
  return h("div", { class: "chart" }, h("h3", { text: title }), g, legend);
}

// ---- sortable, filterable tables ---------------------------------------------------------
// `redraw`: what a click on a heading redraws (the whole view when not given)
function table(key, cols, rows, link, testid, marks, redraw) {
  const sort = state.sort[key] || { col: null, dir: 1 };
  const sorted = rows.slice();
  if (sort.col !== null) {
    const get = cols[sort.col][2];
    sorted.sort((a, b) => {
      const x = get(a), y = get(b);
      if (x === y) return 0;
      if (x === null || x === undefined) return 1;
      if (y === null || y === undefined) return -1;
      return (x < y ? -1 : 1) * sort.dir;
    });
  }
  const head = h("tr", {}, cols.map((c, k) => h("th", {
    class: c[4] || null, "aria-sort": sort.col === k ? (sort.dir > 0 ? "ascending" : "descending") : null,
    onclick: () => { state.sort[key] = { col: k, dir: sort.col === k ? -sort.dir : 1 }; (redraw || render)(); },
  }, h("button", { class: "sort", type: "button", text: c[1] }))));
  const body = sorted.map((r) => {
    const m = marks ? marks(r) : {};
    const cls = [m.new ? "new" : "", m.flagged ? "flagged" : ""].join(" ").trim() || null;
    return h("tr", { class: cls, "data-testid": testid, onclick: () => go(link(r)) },
      cols.map((c, k) => h("td", { class: c[4] || null },
        k === 0 ? h("a", { href: link(r), text: c[3] ? c[3](r) : c[2](r) }) : (c[3] ? c[3](r) : fmt(c[2](r))))));
  });
  return h("table", { class: "data", "data-testid": `${key}-table` }, h("thead", {}, head), h("tbody", {}, body));
}

// ---- a step ------------------------------------------------------------------------------
async function showStep(i, id) {
  const st = await api(`api/steps/${i}`);
  if (stale(id)) return;
  const o = state.overview;
  crumbs([["overview", "#/"], [stepName(st.step, i), null]]);
  const out = [h("h1", { text: `${stepName(st.step, i)}: ${st.rows} rows, ${st.groups.length} groups` })];
  const summary = o.steps[i];
  if (summary && summary.findings.length)
    out.push(h("p", {}, "Findings: ", summary.findings.map((c) => h("span", { class: "tag", text: c }))));
  if (!st.groups.length) {
    out.push(h("p", { class: "muted", text: st.row_list.length < st.rows
      ? `No uid groups in this input (or no variant groups its rows): its first ${st.row_list.length} of ${st.rows} rows are listed; a row's URL (#/row/N) opens any other.`
      : "No uid groups in this input (or no variant groups its rows): its rows are listed instead." }));
    out.push(rowTable("step-rows", st.row_list, st.labels, false));
    main.replaceChildren(...out.filter(Boolean));
    return;
  }
  // the filter belongs to its step
  if (!state.filter || state.filter.step !== i) state.filter = { step: i, text: "", only: false };
  const filter = state.filter;
  const search = h("input", { type: "search", placeholder: "filter by uid", value: filter.text, "data-testid": "group-filter",
    oninput: (e) => { state.filter = { ...(state.filter || filter), text: e.target.value }; draw(); } });
  const only = h("input", { type: "checkbox", id: "only", checked: filter.only || null,
    onchange: (e) => { state.filter = { ...(state.filter || filter), only: e.target.checked }; draw(); } });
  const holder = h("div", {});
  const cols = [
    ["uid", "Group (uid)", (g) => g.uid, null, "left"],
    ["size", "Rows", (g) => g.size],
    ["score", "Score (mean)", (g) => g.score_mean],
    ["range", "Scores", (g) => g.score_max - g.score_min, (g) => `${fmt(g.score_min)} … ${fmt(g.score_max)}`],
    ["pass", "Pass rate", (g) => g.pass_rate, (g) => pct(g.pass_rate)],
    ["len", "Length", (g) => g.length_mean],
    ...st.labels.map((l, v) => [`sp${v}`, `Adv. spread ${l}`, (g) => g.advantage_spread[v]]),
    ["find", "Findings", (g) => g.findings.length, (g) => g.findings.map((c) => h("span", { class: "tag", text: c.replace("_", "-") })), "left"],
  ];
  function draw() {
    const f = state.filter;
    const rows = st.groups.filter((g) => g.uid.toLowerCase().includes(f.text.toLowerCase()) && (!f.only || g.findings.length));
    holder.replaceChildren(h("p", { class: "muted", text: `${rows.length} of ${st.groups.length} groups` }),
      table("groups", cols, rows, (g) => `#/group/${g.index}`, "group-row", (g) => ({ flagged: g.findings.length > 0 }), draw));
  }
  out.push(h("div", { class: "toolbar" }, search, h("label", { for: "only" }, only, " only groups with findings (no signal, fragile)")));
  out.push(holder);
  main.replaceChildren(...out.filter(Boolean));
  draw();
}

// ---- a group -----------------------------------------------------------------------------
async function showGroup(g, id) {
  const gr = await api(`api/groups/${g}`);
  if (stale(id)) return;
  crumbs([["overview", "#/"], [stepName(gr.step, gr.step_index), `#/step/${gr.step_index}`], [`group ${gr.uid}`, null]]);
  const out = [h("h1", { text: `Group ${gr.uid}: ${gr.rows.length} rows` })];
  const tags = [];
  if (gr.no_signal) tags.push(h("span", { class: "tag", text: "no signal: every row has the same score" }));
  if (gr.fragile) tags.push(h("span", { class: "tag", text: "fragile: trainers' float32 departs from the exact advantage" }));
  if (tags.length) out.push(h("p", {}, tags));
  out.push(rowTable("group-rows", gr.rows, gr.labels, state.overview.has_logged));
  main.replaceChildren(...out.filter(Boolean));
}
function rowTable(key, rows, labels, logged) {
  let big = 1e-12;
  for (const r of rows) for (const a of r.advantages) big = Math.max(big, Math.abs(a));
  const bar = (v) => {
    const b = h("span", { class: "bar" });
    b.style.width = `${Math.round((40 * Math.abs(v)) / big)}px`;
    b.style.background = v >= 0 ? "#2e8540" : "#d1495b";
    return b;
  };
  const cols = [
    ["row", "Row", (r) => r.row, null, "left"],
    ["score", "Score", (r) => r.score],
    ["ok", "Correct", (r) => (r.correct ? 1 : 0), (r) => (r.correct ? "✓" : "✗")],
    ...(state.overview.sequence_level ? [] : [["len", "Length", (r) => r.length]]),
    ...labels.map((l, v) => [`a${v}`, `Advantage ${l}`, (r) => r.advantages[v], (r) => [fmt(r.advantages[v]), bar(r.advantages[v])]]),
  ];
  if (logged) cols.push(["logged", "Logged", (r) => r.logged]);
  return table(key, cols, rows, (r) => `#/row/${r.row}`, "row-link");
}

// ---- a row, token by token ---------------------------------------------------------------
const SIGNAL_HELP = {
  advantage: "the advantage each token gets", grad_weight: "dL/d log π of the loss replay",
  pg_loss: "the policy loss per token", is_weight: "rollout-correction IS weight",
  rejected: "1 where rollout correction rejected the token", kl: "old − ref log-prob (k1)",
  entropy: "the dump's entropy", reward: "token-level reward after KL shaping",
  score: "the token scores as read", returns: "returns",
};
function kindOf(name) { return name.split(":")[0]; }
async function showRow(r, pinned, id) {
  const d = await api(`api/rows/${r}`);
  if (stale(id)) return;
  const m = d.meta;
  const o = state.overview;
  const trail = [["overview", "#/"], [stepName(m.step, m.step_index), `#/step/${m.step_index}`]];
  if (m.group !== null) trail.push([`group ${m.uid}`, `#/group/${m.group}`]);
  trail.push([`row ${r}`, null]);
  crumbs(trail);
  const names = Object.keys(d.signals);
  if (!state.signal || !(state.signal in d.signals)) state.signal = names[0];
  const mode = state.mode || (m.pieces ? "text" : "strip");
  const out = [h("h1", { text: `Row ${r} of ${m.rows}` })];
  out.push(h("div", { class: "facts" },
    h("span", {}, h("b", { text: "score " }), fmt(m.score), m.correct ? " (correct)" : " (incorrect)"),
    o.sequence_level ? null : h("span", {}, h("b", { text: "length " }), `${m.length} valid of ${m.tokens} tokens`),
    m.labels.map((l, v) => h("span", {}, h("b", { text: `advantage ${l} ` }), fmt(m.row_advantages[v]), o.sequence_level ? "" : " mean")),
    m.logged !== null ? h("span", {}, h("b", { text: "logged " }), fmt(m.logged)) : null));
  const prev = r > 0 ? h("a", { href: `#/row/${r - 1}`, text: "← previous row" }) : null;
  const next = r + 1 < m.rows ? h("a", { href: `#/row/${r + 1}`, text: "next row →" }) : null;
  out.push(h("div", { class: "pager" }, prev, next));

  const select = h("select", { "data-testid": "signal", onchange: (e) => { state.signal = e.target.value; render(); } },
    names.map((n) => h("option", { value: n, selected: n === state.signal || null, text: n })));
  const modeSel = h("select", { "data-testid": "mode", onchange: (e) => { state.mode = e.target.value; render(); } },
    ["strip", "text"].map((k) => h("option", { value: k, selected: k === mode || null, text: k === "strip" ? "as a strip" : "as text" })));
  const values = d.signals[state.signal];
  const colour = colourFor(state.signal, values, d.mask);
  if (!o.sequence_level) out.push(h("div", { class: "toolbar" }, h("label", {}, "colour by ", select), h("label", {}, "show ", modeSel),
    h("span", { class: "muted", text: SIGNAL_HELP[kindOf(state.signal)] || "" })));
  if (!o.sequence_level) out.push(scaleLegend(colour));

  if (o.sequence_level) {
    out.push(h("p", { class: "muted", "data-testid": "sequence-level",
      text: "This dump has one score per row and no tokens (verl's JSONL, a sequence-level trainer dump): the row's numbers are below, its text after them." }));
  }
  const rejectedOf = d.signals[Object.keys(d.signals).find((k) => k.startsWith("rejected:"))] || null;
  const rewardAt = new Set(m.reward_at);
  const tokens = h("div", { class: `tokens ${mode}`, "data-testid": "tokens" });
  const labelOf = (t) => (m.pieces ? m.pieces[t] : m.token_ids ? `[${m.token_ids[t]}]` : `·`);
  for (let t = 0; t < d.mask.length; t++) {
    const span = h("span", { class: "t", "data-t": t });
    if (d.mask[t] === 0) span.classList.add("masked");
    else span.style.background = colour.of(values[t]);
    if (rejectedOf && rejectedOf[t] === 1) span.classList.add("rejected");
    if (rewardAt.has(t)) span.classList.add("reward");
    if (mode === "text") span.textContent = labelOf(t);
    tokens.append(span);
  }
  const inspector = h("aside", { id: "inspector", "data-testid": "inspector" });
  let current = null;
  const show = (t) => {
    if (current !== null) tokens.children[current]?.classList.remove("hover");
    current = t;
    tokens.children[t]?.classList.add("hover");
    inspector.replaceChildren(...inspect(d, t).filter(Boolean));
  };
  tokens.addEventListener("mouseover", (e) => { const t = e.target.dataset.t; if (t !== undefined) show(Number(t)); });
  // the keyboard: arrows move the inspected token, Enter pins it
  tokens.tabIndex = 0;
  tokens.setAttribute("aria-label", "the row's tokens: arrow keys move, Enter pins");
  tokens.addEventListener("keydown", (e) => {
    const step = { ArrowRight: 1, ArrowLeft: -1, ArrowDown: 64, ArrowUp: -64 }[e.key];
    if (step) {
      e.preventDefault();
      show(Math.max(0, Math.min(d.mask.length - 1, (current ?? start) + step)));
      tokens.children[current]?.scrollIntoView({ block: "nearest" });
    } else if (e.key === "Enter" && current !== null) {
      tokens.children[current].click();
    }
  });
  tokens.addEventListener("click", (e) => {
    const t = e.target.dataset.t;
    if (t !== undefined) history.replaceState(null, "", `#/row/${r}/token/${t}`);
    tokens.querySelectorAll(".pinned").forEach((x) => x.classList.remove("pinned"));
    if (t !== undefined) e.target.classList.add("pinned");
  });
  const start = pinned !== null && pinned < d.mask.length ? pinned : (m.reward_at[0] ?? 0);
  if (pinned !== null && pinned < d.mask.length) tokens.children[pinned].classList.add("pinned");
  inspector.replaceChildren(...inspect(d, start).filter(Boolean));
  // one score per row: no strip to draw, the row's numbers only
  out.push(o.sequence_level
    ? h("div", { class: "row-layout" }, h("div", {}), inspector)
    : h("div", { class: "row-layout" }, h("div", {}, tokens, keyLine()), inspector));

  const fields = h("div", { class: "fields" });
  if (m.decoded !== null) fields.append(h("h2", { text: "Response, decoded (--tokenizer)" }), h("pre", { text: m.decoded }));
  for (const f of m.text) fields.append(h("h2", { text: f.column }), h("pre", { text: f.text }));
  if (!m.pieces && m.token_ids && !o.tokenizer)
    fields.append(h("p", { class: "muted", text: "The dump has token ids: advcalc view --tokenizer tokenizer.json shows them as text." }));
  out.push(fields);
  main.replaceChildren(...out.filter(Boolean));
  if (pinned !== null) tokens.children[pinned]?.scrollIntoView({ block: "center" });
}
function keyLine() {
  const key = (cls, text) => h("span", {}, h("span", { class: `key ${cls}` }), text, "  ");
  return h("p", { class: "scale" }, key("masked", "mask 0 (tool or padding)"), key("reward", "reward position"),
    key("rejected", "rejected by rollout correction"));
}
function inspect(d, t) {
  const m = d.meta;
  const rows = Object.entries(d.signals).map(([name, vals]) =>
    h("tr", { class: name === state.signal ? "chosen" : null, "data-signal": name },
      h("td", { text: name }), h("td", { class: "v", text: vals[t] === null ? "NaN/inf" : String(vals[t]) })));
  return [
    h("h3", { "data-testid": "token-title",
      text: state.overview.sequence_level ? "the row's numbers" : `token ${t} of ${d.mask.length}` }),
    m.pieces ? h("p", { class: "mono", text: JSON.stringify(m.pieces[t]) }) : null,
    m.token_ids ? h("p", { class: "muted", text: `id ${m.token_ids[t]}` }) : null,
    h("p", { class: "muted", text: `mask ${d.mask[t]}${m.reward_at.includes(t) ? " · reward here" : ""}` }),
    h("table", {}, h("tbody", {}, rows)),
  ];
}
// a colour scale for a signal over this row's policy tokens: signed signals diverge around 0
// (IS weights around 1), the rest run light to dark
function colourFor(name, values, mask) {
  const kind = kindOf(name);
  const vals = values.filter((v, t) => mask[t] !== 0 && v !== null);
  const centre = kind === "is_weight" ? 1 : 0;
  const diverging = ["advantage", "grad_weight", "pg_loss", "reward", "score", "returns", "kl", "is_weight", "value"].includes(kind);
  if (kind === "rejected") {
    return { of: (v) => (v ? "#222" : "#e6eaee"), ramp: "linear-gradient(90deg,#e6eaee,#222)", lo: "kept", hi: "rejected" };
  }
  if (diverging) {
    let reach = 0;
    for (const v of vals) reach = Math.max(reach, Math.abs(v - centre));
    if (!vals.length) return { of: () => "rgb(247,247,247)", ramp: "rgb(247,247,247)", lo: "no policy token", hi: "" };
    if (reach === 0) {
      return { of: () => "rgb(247,247,247)", ramp: "rgb(247,247,247)", lo: `every policy token ${fmt(centre)}`, hi: "" };
    }
    const span = reach;
    const of = (v) => {
      if (v === null) return "#ff00ff";
      const x = Math.max(-1, Math.min(1, (v - centre) / span));
      const [r, g, b] = x >= 0 ? mix([247, 247, 247], [33, 102, 172], x) : mix([247, 247, 247], [178, 24, 43], -x);
      return `rgb(${r},${g},${b})`;
    };
    return { of, ramp: "linear-gradient(90deg,rgb(178,24,43),rgb(247,247,247),rgb(33,102,172))", lo: fmt(centre - span), hi: fmt(centre + span) };
  }
  let lo = Infinity, hi = -Infinity;
  for (const v of vals) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  if (!vals.length) { lo = 0; hi = 0; }
  const of = (v) => {
    if (v === null) return "#ff00ff";
    const x = hi > lo ? (v - lo) / (hi - lo) : 0.5;
    const [r, g, b] = mix([255, 247, 236], [127, 39, 4], x);
    return `rgb(${r},${g},${b})`;
  };
  return { of, ramp: "linear-gradient(90deg,rgb(255,247,236),rgb(127,39,4))", lo: fmt(lo), hi: fmt(hi) };
}
function mix(a, b, x) { return a.map((v, k) => Math.round(v + (b[k] - v) * x)); }
function scaleLegend(c) {
  const ramp = h("span", { class: "ramp" });
  ramp.style.background = c.ramp;
  return h("div", { class: "scale", "data-testid": "scale" }, h("span", { text: c.lo }), ramp, h("span", { text: c.hi }));
}

// ---- live: the server's version, polled ------------------------------------------------------
async function poll() {
  try {
    const v = await api("api/version");
    statusEl.className = v.state === "failed" || v.follow_error ? "error" : v.follow ? "live" : "";
    statusEl.textContent =
      v.state === "reading" ? "reading the input…" :
      v.state === "failed" ? `cannot read the input: ${v.error}` :
      v.follow_error ? `live; the last change could not be read: ${v.follow_error}` :
      v.follow ? `live · ${v.steps} step${v.steps === 1 ? "" : "s"}` : "";
    if (v.state === "ready" && v.version !== state.version) {
      const first = state.version === null;
      state.version = v.version;
      const before = state.overview ? state.overview.steps.map((s) => s.step) : null;
      state.overview = await api("api/overview");
      if (!first && before) {
        state.overview.steps.forEach((s) => { if (!before.includes(s.step)) state.newSteps.add(s.step); });
      }
      await render();
    } else if (v.state === "failed" && state.version === null) {
      main.replaceChildren(h("p", { class: "warn", "data-testid": "error", text: `advcalc view cannot read the input: ${v.error}` }));
    } else if (v.state === "reading" && state.version === null) {
      main.replaceChildren(h("p", { class: "muted", text: "Reading the input: the overview appears when the passes are done." }));
    }
  } catch (e) {
    statusEl.className = "error";
    statusEl.textContent = `the view is not answering (${e.message})`;
  }
  setTimeout(poll, 500);
}
window.addEventListener("hashchange", () => { if (state.version !== null) render(); });
poll();
