// The home page's "Pitfalls" section (docs/pitfalls.md): one card per broken/fixed pair, named by
// the error text or symptom people search for, with links to the broken run, the fixed run and
// the diff of the two (GET /pitfalls/{pair}/{broken|fixed|diff} start the runs, then redirect);
// and a search box that takes a pasted error text or traceback and lists the scenarios it points
// to (GET /api/scenarios/search, which does the matching: app/pitfalls.py). Nothing is matched here.
//
//   import * as pitfalls from "./pitfalls.js";
//   pitfalls.mount(document.getElementById("pitfalls"));

import { getJSON, postJSON } from "./api.js";
import { captionHTML, esc } from "./format.js";

const STYLESHEET = "/static/css/pitfalls.css";
const DEBOUNCE_MS = 200;

let root = null;
const state = { pairs: [], query: "", hits: null, searching: false, error: null };

// "https://github.com/huggingface/transformers/issues/26221" -> "transformers#26221"
function reportLabel(url) {
  const m = /github\.com\/[^/]+\/([^/]+)\/(?:issues|pull)\/(\d+)/.exec(url);
  return m ? `${m[1]}#${m[2]}` : url;
}

function reports(urls) {
  if (!urls.length) return "";
  const links = urls.map((u) => `<a href="${esc(u)}" rel="noopener" target="_blank">${esc(reportLabel(u))}</a>`);
  return `<p class="pitfall-reports small">Reported in ${links.join(", ")}</p>`;
}

function links(pair) {
  return `
    <div class="pitfall-links">
      <a class="pitfall-broken" href="${esc(pair.links.broken)}">broken ✗</a>
      <a class="pitfall-fixed" href="${esc(pair.links.fixed)}">fixed ✓</a>
      <a class="pitfall-diff" href="${esc(pair.links.diff)}" title="both runs, their traces aligned side by side">diff</a>
    </div>`;
}

// "Pitfall 2, broken: a cache consulted in the forward, ..." -> "a cache consulted in the forward, ...";
// "Pitfall 3b, broken: ..." too (the causes of one symptom are numbered 3a, 3b, ...).
const TITLE = /^Pitfall (\d+[a-z]?), (broken|fixed): /;
const shortTitle = (title) => title.replace(TITLE, "");
// Its number, shown on the card: "3a" to "3d" mark the causes of one symptom as one family.
const number = (title) => (TITLE.exec(title) || [])[1] || "";

// The card names the first symptom, what people search for; the others only help the search.
function card(pair) {
  return `
    <li class="pitfall" data-pair="${esc(pair.pair)}">
      <code class="pitfall-symptom">${esc(pair.symptoms[0])}</code>
      <p class="pitfall-title"><span class="pitfall-number">${esc(number(pair.title))}</span> ${captionHTML(shortTitle(pair.title))}</p>
      ${links(pair)}
      ${reports(pair.reports)}
    </li>`;
}

function hit(h) {
  const s = h.scenario;
  const pair = s.pair && state.pairs.find((p) => p.pair === s.pair);
  const actions = pair
    ? links(pair)
    : `<div class="pitfall-links"><button type="button" class="pitfall-run" data-id="${esc(s.id)}">open ▶</button></div>`;
  return `
    <li class="pitfall-hit" data-id="${esc(s.id)}">
      <span class="pitfall-hit-title">${captionHTML(s.title)}</span>
      <span class="scenario-id">${esc(s.id)}.py</span>
      ${h.symptom ? `<code class="pitfall-symptom">${esc(h.symptom)}</code>` : ""}
      ${actions}
    </li>`;
}

function results() {
  if (state.error) return `<p class="index-error">${esc(state.error)}</p>`;
  if (state.hits === null) return "";
  if (!state.hits.length) {
    return `<p class="small">No scenario matches this text. The cards below cover the failures reported most.</p>`;
  }
  return `<ul class="pitfall-hits">${state.hits.map(hit).join("")}</ul>`;
}

export function render(s = state) {
  if (!root) return;
  root.querySelector(".pitfall-results").innerHTML = results();
  root.querySelector(".pitfall-list").innerHTML = s.pairs.length
    ? s.pairs.map(card).join("")
    : `<li class="loading">Loading the pitfalls…</li>`;
  root.dataset.ready = s.pairs.length ? "1" : "";
}

let timer = null;
let asked = 0; // answers to older queries arriving late are dropped

async function search(query) {
  const mine = ++asked;
  state.query = query;
  if (!query.trim()) {
    state.hits = null;
    state.error = null;
    render();
    return;
  }
  try {
    const hits = await getJSON(`/api/scenarios/search?q=${encodeURIComponent(query)}`);
    if (mine !== asked) return;
    state.hits = hits;
    state.error = null;
  } catch (err) {
    if (mine !== asked) return;
    state.error = `Cannot search: ${err.message}`;
  }
  render();
  root.dataset.searched = String(mine);
}

async function open(id, button) {
  button.disabled = true;
  try {
    const created = await postJSON("/api/runs", { scenario: id });
    location.assign(created.url || `/runs/${encodeURIComponent(created.id)}`);
  } catch (err) {
    state.error = err.message;
    button.disabled = false;
    render();
  }
}

function ensureStylesheet() {
  if (document.querySelector(`link[href="${STYLESHEET}"]`)) return;
  const link = document.createElement("link");
  link.rel = "stylesheet";
  link.href = STYLESHEET;
  document.head.append(link);
}

export async function mount(element) {
  if (!element) return;
  root = element;
  ensureStylesheet();
  root.hidden = false;
  root.classList.add("pitfalls");
  root.setAttribute("aria-labelledby", "pitfalls-title");
  root.innerHTML = `
    <h2 id="pitfalls-title">Pitfalls: the checkpointing failures people report</h2>
    <p class="small">Each is a broken run and its fix, on the engine (and on torch 2.8.0, with the same
      trace). Step through the broken one to see why it happens, then open the diff to see what the
      fix changes.</p>
    <label class="pitfall-search-label" for="pitfall-search">Paste an error message or a traceback</label>
    <textarea id="pitfall-search" class="pitfall-search" rows="2" spellcheck="false"
      placeholder="e.g. CheckpointError: torch.utils.checkpoint: Recomputed values for the following tensors have different metadata…"></textarea>
    <div class="pitfall-results" role="status" aria-live="polite"></div>
    <ul class="pitfall-list"></ul>`;
  const box = root.querySelector("#pitfall-search");
  box.addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => search(box.value), DEBOUNCE_MS);
  });
  root.addEventListener("click", (e) => {
    const run = e.target.closest(".pitfall-run");
    if (run) open(run.dataset.id, run);
  });
  render();
  try {
    state.pairs = await getJSON("/api/pitfalls");
  } catch (err) {
    state.error = `Cannot load the pitfalls: ${err.message}`;
  }
  render();
}
