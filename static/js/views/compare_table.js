// The table of the compare page: one row per strategy of POST /api/compare (app/compare.py, Note
// [Strategies compared]), and under it the same strategy on torch when asked for. Every figure
// comes from the row as the server sent it; server text goes in through esc() only.

import { bytes, esc } from "../format.js";

let root = null;

export function mount(el) {
  root = el;
}

// Where a run opens: the viewer at the step where it holds the most, every event shown.
export function peakURL(row) {
  if (row.status === "done" && row.peak_held_step) {
    return `/runs/${encodeURIComponent(row.id)}?step=${row.peak_held_step}&level=events`;
  }
  return row.id ? `/runs/${encodeURIComponent(row.id)}` : null;
}

// The columns after the strategy, in order; `approx` marks the figures torch's trace sees only in
// part (the memory ones), dimmed on torch rows.
const COLUMNS = [
  {
    key: "peak_held",
    label: "held for the backward",
    tip: "the most bytes kept for the backward at one time: saved activations plus recomputed ones. What checkpointing shrinks.",
    approx: true,
  },
  {
    key: "peak_live",
    label: "peak live",
    tip: "the most bytes alive at one time, parameters, inputs and gradients included",
    approx: true,
  },
  {
    key: "extra_block_runs",
    label: "extra block runs",
    tip: "block forward calls beyond one per block: the price of recomputing",
  },
  {
    key: "recomputed_ops",
    label: "re-run ops",
    tip: "operations run again inside recomputations",
    approx: true,
  },
  {
    key: "recomputations",
    label: "recompu­tations",
    tip: "how many times a checkpoint re-ran its region in the backward",
  },
  {
    key: "early_stops",
    label: "early stops",
    tip: "recomputations stopped as soon as they had rebuilt what the backward needed",
  },
  {
    key: "hook_bytes",
    label: "hook bytes",
    tip: "bytes through the script's own saved_tensors_hooks in the forward: measured the way you would on torch, exact on both backends",
  },
  {
    key: "wall_ms",
    label: "wall time",
    tip: "how long the run took, recording its trace included",
  },
];

const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);

function ratioCell(row, base, maxHeld) {
  const held = row.peak_held;
  const width = maxHeld ? Math.max(2, Math.round((100 * held) / maxHeld)) : 0;
  let ratio = "";
  if (row.strategy === "none") ratio = `<span class="cmp-ratio base">baseline</span>`;
  else if (base) {
    const pct = Math.round((100 * held) / base - 100);
    const text = pct === 0 ? "±0%" : pct < 0 ? `−${-pct}%` : `+${pct}%`;
    ratio = `<span class="cmp-ratio ${pct < 0 ? "less" : "more"}" title="relative to no checkpointing">${text}</span>`;
  }
  return `<td class="num cmp-held" data-key="peak_held" data-value="${held}">
      <span class="cmp-held-figures"><b>${esc(bytes(held))}</b>${ratio}</span>
      <span class="cmp-bar" aria-hidden="true"><i style="width:${width}%"></i></span>
    </td>`;
}

function measuredText(m) {
  return `${bytes(m.saved_bytes)} in ${m.saved_tensors} saved tensors; block calls ${m.block_calls.join(", ")}`;
}

function figureCells(row, ctx) {
  const torch = row.backend === "torch";
  const cells = [];
  for (const col of COLUMNS) {
    const dim = torch && col.approx ? " cmp-approx" : "";
    const star = torch && col.approx ? `<sup class="cmp-star">*</sup>` : "";
    if (col.key === "peak_held" && !torch) {
      cells.push(ratioCell(row, ctx.base, ctx.maxHeld));
      continue;
    }
    if (col.key === "hook_bytes") {
      const m = row.measured;
      let mark = "";
      const twin = !torch && ctx.torchOf(row.strategy);
      if (m && twin && twin.status === "done" && twin.measured) {
        mark = same(m, twin.measured)
          ? `<span class="cmp-same" title="torch measured the same: ${esc(measuredText(twin.measured))}">✓ same as torch</span>`
          : `<span class="cmp-differ" title="torch measured ${esc(measuredText(twin.measured))}">≠ torch</span>`;
      }
      const value = m ? m.saved_bytes : "";
      const title = m ? ` title="${esc(measuredText(m))}"` : "";
      cells.push(
        `<td class="num" data-key="hook_bytes" data-value="${value}"${title}>${m ? esc(bytes(m.saved_bytes)) : "–"}${mark}</td>`,
      );
      continue;
    }
    const v = row[col.key];
    let text;
    if (v === null || v === undefined) text = "–";
    else if (col.key === "peak_held" || col.key === "peak_live") text = bytes(v);
    else if (col.key === "wall_ms") text = `${Math.round(v)} ms`;
    else text = String(v);
    const title =
      col.key === "extra_block_runs" && row.measured
        ? ` title="block calls, forward included: ${esc(row.measured.block_calls.join(", "))}"`
        : "";
    cells.push(
      `<td class="num${dim}" data-key="${col.key}" data-value="${esc(v ?? "")}"${title}>${esc(text)}${star}</td>`,
    );
  }
  return cells.join("");
}

function statusCells(row) {
  const span = COLUMNS.length;
  if (row.status === "error") {
    const e = row.error || {};
    const message = typeof e === "string" ? e : [e.type, e.message].filter(Boolean).join(": ");
    return `<td colspan="${span}" class="cmp-row-error">This run failed: ${esc(message || "unknown error")}</td>`;
  }
  const words = { waiting: "waiting for room on the server…", queued: "queued…", running: "running…" };
  return `<td colspan="${span}" class="cmp-pending"><span class="status status-${esc(row.status)}">${esc(
    words[row.status] || row.status,
  )}</span></td>`;
}

function rowHTML(row, strategy, ctx) {
  const torch = row.backend === "torch";
  const name = torch
    ? `<span class="cmp-on-torch">↳ the same on <span class="backend-badge backend-torch">torch</span></span>`
    : `<span class="cmp-strategy-title">${esc(strategy.title)}</span>
       <span class="cmp-strategy-desc">${esc(strategy.description)}</span>`;
  const cells = row.status === "done" ? figureCells(row, ctx) : statusCells(row);
  const url = peakURL(row);
  const link = url
    ? `<a class="cmp-open" href="${esc(url)}">${row.status === "done" ? "open at peak →" : "open →"}</a>`
    : "";
  return `<tr class="cmp-row s-${esc(row.strategy)} backend-${esc(row.backend)} st-${esc(row.status)}" data-strategy="${esc(row.strategy)}"
      data-backend="${esc(row.backend)}" data-status="${esc(row.status)}">
    <th scope="row" class="cmp-strategy">
      ${torch ? "" : `<i class="cmp-swatch s-${esc(row.strategy)}" aria-hidden="true"></i>`}${name}
    </th>
    ${cells}
    <td class="cmp-link">${link}</td>
  </tr>`;
}

const KEY = `
  <dl class="cmp-key">
    <div><dt>held for the backward</dt><dd>the most bytes kept for the backward at one time (saved + recomputed
      activations): what checkpointing shrinks. The bar and % compare it with no checkpointing.</dd></div>
    <div><dt>peak live</dt><dd>every byte alive at one time, parameters, inputs and gradients included:
      checkpointing only changes the activations' part of it.</dd></div>
    <div><dt>extra block runs / re-run ops</dt><dd>block forward calls beyond one per block, and the
      operations run again: what checkpointing costs (hover a figure for each block's calls).</dd></div>
    <div><dt>recomputations / early stops</dt><dd>how often a checkpoint re-ran its region, and how often it
      stopped as soon as it had what the backward needed.</dd></div>
    <div><dt>hook bytes</dt><dd>what the script measured itself, as you would on torch: bytes through its
      outermost <code>saved_tensors_hooks</code>. Checkpointed activations never pass them; a tensor saved
      twice counts twice, so it is not the same figure as "held".</dd></div>
  </dl>`;

export function render(state) {
  const doc = state.compare;
  if (!doc) {
    root.innerHTML = `<p class="cmp-empty dim">${state.error ? "No figures yet." : "Starting the runs…"}</p>`;
    return;
  }
  const rows = doc.rows;
  const done = rows.filter((r) => r.status === "done");
  const engineDone = done.filter((r) => r.backend === "engine");
  const none = engineDone.find((r) => r.strategy === "none");
  const ctx = {
    base: none ? none.peak_held : null,
    maxHeld: Math.max(0, ...engineDone.map((r) => r.peak_held)),
    torchOf: (s) => rows.find((r) => r.strategy === s && r.backend === "torch"),
  };
  const strategies = new Map(doc.strategies.map((s) => [s.id, s]));
  const head = COLUMNS.map(
    (c) => `<th scope="col" class="num" title="${esc(c.tip)}"><span class="cmp-th">${esc(c.label)}</span></th>`,
  ).join("");
  const body = rows
    .map((r) => rowHTML(r, strategies.get(r.strategy) || { title: r.title, description: "" }, ctx))
    .join("");
  const torch = rows.some((r) => r.backend === "torch");
  const foot = torch
    ? `<p class="cmp-footnote small"><sup class="cmp-star">*</sup> On torch, dimmed: torch's trace does not see
        every tensor torch makes internally, so its memory figures are incomplete and not comparable
        with the engine's. The script's own measurements, hook bytes and block calls, are exact on both: where
        they agree, the engine row says "✓ same as torch".</p>`
    : "";
  root.innerHTML = `
    <table class="cmp-table">
      <thead><tr><th scope="col">strategy</th>${head}<th scope="col"><span class="visually-hidden">link</span></th></tr></thead>
      <tbody>${body}</tbody>
    </table>${foot}${KEY}`;
}
