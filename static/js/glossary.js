// Explanation cards: every term the viewer shows (`_CheckpointFrame`, `recomputed[g0]`, "holder",
// "Rule 3"...) gets a card on hover and on keyboard focus, with two or three plain sentences and
// the PyTorch source it mirrors. The terms and the patterns that find them come from the server
// (engine/trace/glossary.py, Note [Glossary terms]); this module only finds them in the page.
//
// Captions contain names the user controls (variables, file names, uploaded traces), so nothing
// here builds HTML from text: terms are wrapped with DOM calls (splitText, createElement).

let terms = []; // [{id, title, text, source, code: [RegExp], words: [RegExp]}]
const byId = new Map();
let card = null;
let shownFor = null; // the term element whose card is shown

export function setTerms(list) {
  terms = (list || []).map((t) => ({
    ...t,
    code: (t.code || []).map((p) => new RegExp(p)),
    words: (t.words || []).map((p) => new RegExp(p)),
  }));
  byId.clear();
  for (const t of terms) byId.set(t.id, t);
}

export function explain(id) {
  return byId.get(id) || null;
}

function makeTerm(el, term) {
  el.classList.add("term");
  el.tabIndex = 0;
  el.dataset.term = term.id;
}

// Marks the terms inside `el`: each <code> whose whole text is a term, and in plain text the
// first occurrence of each term (so a sentence does not become a row of links).
export function decorate(el) {
  if (!el || !terms.length) return;
  for (const code of el.querySelectorAll("code:not(.term)")) {
    const text = code.textContent;
    const term = terms.find((t) => t.code.some((re) => re.test(text)));
    if (term) makeTerm(code, term);
  }
  const used = new Set(el.querySelectorAll ? [...el.querySelectorAll(".term")].map((x) => x.dataset.term) : []);
  const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT, {
    acceptNode: (node) =>
      node.parentElement.closest("code, button, a, .term, kbd, select, option")
        ? NodeFilter.FILTER_REJECT
        : NodeFilter.FILTER_ACCEPT,
  });
  const nodes = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) nodes.push(n);
  for (const term of terms) {
    if (used.has(term.id) || !term.words.length) continue;
    for (let i = 0; i < nodes.length; i++) {
      const node = nodes[i];
      let m = null;
      for (const re of term.words) {
        const found = re.exec(node.data);
        if (found && (!m || found.index < m.index)) m = found;
      }
      if (!m) continue;
      // node = before | match | after: the match goes into a span, the rest stays text.
      const match = node.splitText(m.index);
      const after = match.splitText(m[0].length);
      const span = document.createElement("span");
      match.replaceWith(span);
      span.append(match);
      makeTerm(span, term);
      nodes.splice(i, 1, node, after); // later terms may still be found in both halves
      used.add(term.id);
      break;
    }
  }
}

// --- the card ------------------------------------------------------------------------------------

function ensureCard() {
  if (card) return card;
  card = document.createElement("div");
  card.id = "term-card";
  card.setAttribute("role", "tooltip");
  card.hidden = true;
  document.body.append(card);
  return card;
}

function show(el) {
  const term = byId.get(el.dataset.term);
  if (!term) return;
  const c = ensureCard();
  c.replaceChildren();
  const title = document.createElement("strong");
  title.textContent = term.title;
  const text = document.createElement("p");
  text.textContent = term.text;
  const source = document.createElement("p");
  source.className = "term-source";
  source.textContent = `PyTorch: ${term.source}`;
  c.append(title, text, source);
  c.hidden = false;
  shownFor = el;
  el.setAttribute("aria-describedby", "term-card");
  // Below the term, kept inside the viewport (flipped above it when there is no room below).
  const r = el.getBoundingClientRect();
  const w = c.offsetWidth;
  const h = c.offsetHeight;
  const left = Math.max(4, Math.min(r.left, window.innerWidth - w - 4));
  const top = r.bottom + 6 + h <= window.innerHeight ? r.bottom + 6 : Math.max(4, r.top - h - 6);
  c.style.left = `${left}px`;
  c.style.top = `${top}px`;
}

export function hide() {
  if (!card || card.hidden) return;
  card.hidden = true;
  if (shownFor) shownFor.removeAttribute("aria-describedby");
  shownFor = null;
}

// One set of listeners for the whole page: terms come and go with every step.
document.addEventListener("mouseover", (e) => {
  const t = e.target.closest && e.target.closest(".term");
  if (t && t !== shownFor) show(t);
});
document.addEventListener("mouseout", (e) => {
  const t = e.target.closest && e.target.closest(".term");
  if (t && t === shownFor && !t.contains(e.relatedTarget)) hide();
});
document.addEventListener("focusin", (e) => {
  const t = e.target.closest && e.target.closest(".term");
  if (t) show(t);
  else hide();
});
document.addEventListener("focusout", (e) => {
  if (e.target === shownFor) hide();
});
document.addEventListener("keydown", (e) => {
  if (e.key === "Escape" && card && !card.hidden) hide();
});
