// Where the run page's data comes from: the server (GET /api/runs/{id}, its story, memory and
// graph.dot, and the event stream), or, in an exported HTML file (app/export_html.py,
// docs/viewer.md "Exports"), the JSON inlined in the page as <script id="lens-data">. main.js
// asks this module only, so both cases take one code path.

import { getJSON, getText } from "./api.js";
import { openStream } from "./stream.js";

// The inlined data, or null on a page served by the app.
function inlined() {
  const el = document.getElementById("lens-data");
  return el ? JSON.parse(el.textContent) : null;
}

export function dataSource(runId, config) {
  const data = inlined();
  return data ? fromData(data) : fromServer(runId, config);
}

function fromServer(runId, config) {
  const base = `/api/runs/${encodeURIComponent(runId)}`;
  return {
    standalone: false,
    run: () => getJSON(base),
    story: () => getJSON(`${base}/story`),
    memory: () => getJSON(config.urls?.memory || `${base}/memory`),
    graphDot: () => getText(`${base}/graph.dot`),
    events: (handlers) => openStream(runId, handlers),
    traceHref: `${base}/trace.json`,
    exportHref: `${base}/export.html`,
    chromeHref: `${base}/trace.chrome.json`,
  };
}

function fromData(data) {
  const has = (value, what) =>
    value === null || value === undefined
      ? Promise.reject(new Error(`this file has no ${what}`))
      : Promise.resolve(value);
  const { derived, ...trace } = data.trace;
  return {
    standalone: true,
    run: () => has(data.run, "run"),
    story: () => has(data.story, "story"),
    memory: () => has(data.memory, "memory report"),
    graphDot: () => has(data.dot, "graph"),
    // The whole run in one batch, then done, after the caller's first render (as a stream would).
    events: ({ onItems, onDone }) => {
      const items = trace.events.map((event, i) => ({ event, ...derived[i] }));
      setTimeout(() => {
        onItems(items);
        onDone(data.done);
      }, 0);
      return { close: () => {} };
    },
    // The trace.json link downloads the inlined trace (without the derived part).
    traceHref: URL.createObjectURL(new Blob([JSON.stringify(trace)], { type: "application/json" })),
    exportHref: null,
    chromeHref: null, // made by the server (engine.trace.export.to_chrome); a file has no server
  };
}
