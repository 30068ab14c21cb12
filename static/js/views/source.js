// The scenario's code, with the line that just ran and the line that runs next, like Python
// Tutor's two arrows: green for the line of the current event, red for the line of the next one.
// A run that failed also gets its error line marked. Clicking a line number sets a breakpoint on
// that line (breakpoints.js); lines with one carry a red dot.

import { esc } from "../format.js";

let root = null;
let body = null;
let whereEl = null;
let lineEls = [];
let filename = null;
let shown = { cur: 0, next: 0 }; // 1-based lines currently marked (0: none)

const KEYWORDS = new Set(
  ("False None True and as assert async await break class continue def del elif else except finally for " +
    "from global if import in is lambda nonlocal not or pass raise return try while with yield").split(" "),
);

// A tiny Python highlighter: comments, strings (triple-quoted ones may span lines), keywords and
// numbers. Enough to make the code readable; correctness at the edges does not matter.
function highlight(lines) {
  let open = null; // the quote of a triple-quoted string still open at the end of the last line
  return lines.map((line) => {
    const out = [];
    let i = 0;
    const push = (cls, text) => out.push(cls ? `<span class="${cls}">${esc(text)}</span>` : esc(text));
    if (open) {
      const end = line.indexOf(open);
      if (end < 0) return `<span class="py-str">${esc(line)}</span>`;
      push("py-str", line.slice(0, end + 3));
      i = end + 3;
      open = null;
    }
    while (i < line.length) {
      const rest = line.slice(i);
      let m;
      if (rest[0] === "#") {
        push("py-com", rest);
        break;
      } else if ((m = /^[rbfuRBFU]{0,2}("""|''')/.exec(rest))) {
        const q = m[1];
        const end = rest.indexOf(q, m[0].length);
        if (end < 0) {
          push("py-str", rest);
          open = q;
          break;
        }
        push("py-str", rest.slice(0, end + 3));
        i += end + 3;
      } else if ((m = /^[rbfuRBFU]{0,2}("(?:[^"\\]|\\.)*"?|'(?:[^'\\]|\\.)*'?)/.exec(rest))) {
        push("py-str", m[0]);
        i += m[0].length;
      } else if ((m = /^[A-Za-z_]\w*/.exec(rest))) {
        const cls = KEYWORDS.has(m[0]) ? "py-kw" : rest[m[0].length] === "(" ? "py-call" : null;
        push(cls, m[0]);
        i += m[0].length;
      } else if ((m = /^\d[\d_.eE]*/.exec(rest))) {
        push("py-num", m[0]);
        i += m[0].length;
      } else {
        push(null, rest[0]);
        i += 1;
      }
    }
    return out.join("");
  });
}

let onToggleLine = () => {};
let bpShown = new Set(); // lines drawn with a breakpoint dot

export function mount(el, options = {}) {
  root = el;
  if (options.onToggleLine) onToggleLine = options.onToggleLine;
  root.classList.add("source-view");
  root.innerHTML = `
    <div class="view-head">
      <h2>Source</h2>
      <span class="source-file"></span>
      <span class="legend"><span class="arrow cur">➜</span> just ran <span class="arrow next">➜</span> runs next</span>
    </div>
    <div class="source-body" tabindex="-1"></div>
    <div class="source-where"></div>`;
  body = root.querySelector(".source-body");
  whereEl = root.querySelector(".source-where");
  // The gutter: a click (or Enter on a focused line number) toggles that line's breakpoint.
  body.addEventListener("click", (e) => {
    const no = e.target.closest(".lineno");
    if (no) onToggleLine(Number(no.parentElement.dataset.line));
  });
  body.addEventListener("keydown", (e) => {
    const no = e.target.closest(".lineno");
    if (no && (e.key === "Enter" || e.key === " ")) {
      e.preventDefault();
      e.stopPropagation();
      onToggleLine(Number(no.parentElement.dataset.line));
    }
  });
}

// Draws a dot on each line of `lines` (a Set of 1-based line numbers), and removes the others.
export function setBreakpoints(lines) {
  for (const line of bpShown) if (!lines.has(line)) mark(line, "bp", false);
  for (const line of lines) mark(line, "bp", true);
  for (const line of lines) {
    const no = lineEls[line - 1]?.querySelector(".lineno");
    if (no) no.setAttribute("aria-pressed", "true");
  }
  for (const line of bpShown) {
    const no = !lines.has(line) && lineEls[line - 1]?.querySelector(".lineno");
    if (no) no.setAttribute("aria-pressed", "false");
  }
  bpShown = new Set(lines);
}

export function sameFileAs(file) {
  return sameFile(file);
}

// `source`: the scenario text; `error`: the run's error ({type, message, file, line}) or null.
export function load({ source, filename: name, error }) {
  filename = name || null;
  root.querySelector(".source-file").textContent = filename || "";
  const lines = (source || "").replace(/\n$/, "").split("\n");
  const html = highlight(lines);
  // A line too long for the pane wraps, its continuation indented four columns past the line's own
  // indentation (a hanging indent, as editors do), so the code's shape stays readable.
  const hang = (i) => Math.min(40, (/^ */.exec(lines[i])[0].length || 0) + 4);
  body.innerHTML = html
    .map(
      (code, i) =>
        `<div class="src-line" data-line="${i + 1}"><span class="marks"></span>` +
        `<span class="lineno" role="button" tabindex="0" aria-pressed="false" aria-label="breakpoint on line ${i + 1}" title="Set or clear a breakpoint on this line">${i + 1}</span>` +
        `<code style="--hang:${hang(i)}ch">${code || " "}</code></div>`,
    )
    .join("");
  lineEls = [...body.children];
  shown = { cur: 0, next: 0 };
  bpShown = new Set();
  setError(error);
}

export function setError(error) {
  for (const el of body.querySelectorAll(".src-line.error")) {
    el.classList.remove("error");
    el.removeAttribute("title");
  }
  const el = error && error.line && sameFile(error.file) ? lineEls[error.line - 1] : null;
  if (el) {
    el.classList.add("error");
    el.title = `${error.type}: ${error.message}`;
  }
}

export function scrollToError() {
  const el = body.querySelector(".src-line.error");
  if (el) el.scrollIntoView({ block: "center" });
}

function sameFile(file) {
  // Events name the file the scenario was compiled under; a missing name means "the scenario".
  return !file || !filename || file === filename;
}

// The scenario line of an event (or of the state's `now`), 0 if it has none there.
function lineOf(event) {
  const src = event && event.src;
  return src && src.line && sameFile(src.file) ? src.line : 0;
}

function mark(line, cls, on) {
  const el = line ? lineEls[line - 1] : null;
  if (el) el.classList.toggle(cls, on);
  return el;
}

export function render(state, ctx) {
  const now = state && state.now ? state.now : null;
  const cur = lineOf(now);
  const next = lineOf(ctx.next);
  if (cur !== shown.cur) {
    mark(shown.cur, "cur", false);
    mark(cur, "cur", true);
  }
  if (next !== shown.next) {
    mark(shown.next, "next", false);
    mark(next, "next", true);
  }
  shown = { cur, next };
  const src = now && now.src;
  whereEl.textContent = src && src.file && !sameFile(src.file) ? `in ${src.file}, line ${src.line}` : "";
  const el = lineEls[(cur || next) - 1];
  if (el) ctx.defer("source", () => keepVisible(el));
}

// Scroll only when the line is out of view: scrolling on every step would make the code jump.
function keepVisible(el) {
  const top = el.offsetTop; // .source-body is positioned, so this is relative to it
  const bottom = top + el.offsetHeight;
  if (top < body.scrollTop + 8 || bottom > body.scrollTop + body.clientHeight - 8) {
    body.scrollTop = Math.max(0, top - body.clientHeight / 3);
  }
}
