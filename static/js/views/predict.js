// Predict mode: before a decision of the run is shown (a cache hit or a recomputation? which frame
// recomputes? will early stop fire? which holder is freed next?), the learner answers a question;
// then the step is shown with a verdict and the caption that explains it. The questions come
// from the trace (Note [Predict questions] in engine/trace/predict.py); this view asks them and
// keeps the score. main.js decides when to ask (on a forward move onto a step with a question).

import { captionHTML, esc } from "../format.js";
import { decorate } from "../glossary.js";

let root = null;
let onAnswer = null;
let open = null; // the question being asked
let result = null; // {question, chosen} shown after an answer, while at its step
const answers = new Map(); // question id -> chosen option id (null: skipped)

export function mount(el, options) {
  root = el;
  onAnswer = options.onAnswer;
  root.classList.add("predict-view");
  root.hidden = true;
  root.addEventListener("click", (e) => {
    const b = e.target.closest("button[data-option]");
    if (!b || !open) return;
    const q = open;
    const chosen = b.dataset.option === "" ? null : b.dataset.option;
    answers.set(q.id, chosen);
    open = null;
    result = { question: q, chosen };
    onAnswer(q, chosen);
  });
}

export function isAsking() {
  return open !== null;
}

export function answered(question) {
  return answers.has(question.id);
}

// Keys 1-9 pick an option, 0 or Escape skips (main.js forwards them while a question is open).
export function pick(key) {
  if (!open) return false;
  const buttons = [...root.querySelectorAll("button[data-option]")];
  const b = key === "skip" ? buttons.find((x) => x.dataset.option === "") : buttons[Number(key) - 1];
  if (b && b.dataset.option !== undefined) b.click();
  return Boolean(b);
}

export function ask(question) {
  open = question;
  result = null;
  const options = question.options
    .map(
      (o, i) =>
        `<li><button type="button" class="option" data-option="${esc(o.id)}"><kbd>${i + 1}</kbd> ${captionHTML(o.label)}</button></li>`,
    )
    .join("");
  root.innerHTML = `
    <div class="predict-q" role="group" aria-labelledby="predict-prompt">
      <p class="predict-kicker">Predict before you look</p>
      <p id="predict-prompt" class="predict-prompt">${captionHTML(question.prompt)}</p>
      <ol class="predict-options">${options}</ol>
      <button type="button" class="skip" data-option="">skip (0)</button>
    </div>`;
  decorate(root.querySelector(".predict-prompt"));
  root.hidden = false;
  root.querySelector("button.option").focus();
}

export function score() {
  let right = 0;
  let tried = 0;
  for (const [id, chosen] of answers) {
    if (chosen === null) continue;
    tried += 1;
    if (questionsById.get(id)?.answer === chosen) right += 1;
  }
  return { right, tried, skipped: answers.size - tried };
}

const questionsById = new Map();

export function load(questions) {
  questionsById.clear();
  for (const q of questions) questionsById.set(q.id, q);
}

export function reset() {
  answers.clear();
  open = null;
  result = null;
  if (root) root.hidden = true;
}

// Called at every render: the verdict stays while the learner is at the answered step; at the
// end of the story the final score is shown.
export function render(state, ctx) {
  if (!ctx.predictOn) {
    root.hidden = true;
    return;
  }
  if (open) return; // a question is on screen: nothing moves until it is answered
  const { right, tried, skipped } = score();
  const total = questionsById.size;
  if (result && ctx.storyIndex === result.question.step) {
    const q = result.question;
    const good = result.chosen === q.answer;
    const right_ = q.options.find((o) => o.id === q.answer);
    const verdict =
      result.chosen === null
        ? `Skipped. The answer: ${captionHTML(right_ ? right_.label : q.answer)}.`
        : good
          ? "Right!"
          : `Not quite: the answer is ${captionHTML(right_ ? right_.label : q.answer)}.`;
    root.innerHTML = `
      <p class="predict-verdict ${result.chosen === null ? "skipped" : good ? "right" : "wrong"}" role="status">${verdict}
        <span class="predict-score">score ${right} / ${tried}</span></p>`;
    root.hidden = false;
    return;
  }
  if (ctx.atEnd && answers.size) {
    root.innerHTML = `<p class="predict-final" role="status">End of the story: you predicted <strong>${right} of ${tried}</strong>
      correctly${skipped ? ` (${skipped} skipped)` : ""}, out of ${total} questions in this run.</p>`;
    root.hidden = false;
    return;
  }
  root.innerHTML = `<p class="predict-status">Predict mode: ${total} questions in this run · score ${right} / ${tried}</p>`;
  root.hidden = false;
}
