// The home page's scenario editor: CodeMirror 6 (static/vendor/codemirror/, see its NOTICE.md)
// with Python highlighting and line numbers, over the form's <textarea name="source">, which it
// keeps in sync and hides. The draft is kept in localStorage across reloads; Ctrl+Enter (Cmd+Enter)
// submits the form; markError() marks a failed run's line with its message until the next edit of
// the text or the next run. If the bundle cannot load, the plain textarea stays and works as before.

const DRAFT_KEY = "autograd-lens:draft";

function loadDraft() {
  try {
    return localStorage.getItem(DRAFT_KEY);
  } catch {
    return null; // storage disabled (a private window, a policy): no draft, no harm
  }
}

function saveDraft(text) {
  try {
    localStorage.setItem(DRAFT_KEY, text);
  } catch {
    // full or disabled: the draft is a convenience
  }
}

// The textarea alone, when CodeMirror is not there: same interface, Tab indents with spaces.
function plainEditor(textarea, form) {
  textarea.hidden = false;
  textarea.addEventListener("input", () => saveDraft(textarea.value));
  textarea.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      form.requestSubmit();
    } else if (e.key === "Tab" && !e.shiftKey) {
      e.preventDefault();
      textarea.setRangeText("    ", textarea.selectionStart, textarea.selectionEnd, "end");
    }
  });
  return {
    get value() {
      return textarea.value;
    },
    set value(text) {
      textarea.value = text;
      saveDraft(text);
    },
    markError() {},
    clearError() {},
    focus: () => textarea.focus(),
  };
}

/**
 * Mount the editor in `mount` (a div), over `textarea`; `starter` is the text when there is no
 * draft. Returns {value (get/set), markError(line, message), clearError(), focus()}.
 */
export async function createEditor({ mount, textarea, form, starter }) {
  const draft = loadDraft();
  textarea.value = draft ?? starter;
  let cm;
  try {
    cm = await import("/static/vendor/codemirror/codemirror.js");
  } catch (err) {
    console.warn("the code editor did not load, using a plain text box:", err);
    return plainEditor(textarea, form);
  }
  const { EditorView, EditorState, Decoration, WidgetType, StateEffect, StateField, Prec } = cm;

  class MessageWidget extends WidgetType {
    constructor(message) {
      super();
      this.message = message;
    }
    eq(other) {
      return other.message === this.message;
    }
    toDOM() {
      const div = document.createElement("div");
      div.className = "cm-run-error-message";
      div.setAttribute("role", "alert");
      div.textContent = this.message; // a user's error text: never HTML
      return div;
    }
  }

  // The failed run's line: a line class and the message under it, until the text changes.
  const setRunError = StateEffect.define();
  const runError = StateField.define({
    create: () => Decoration.none,
    update(decos, tr) {
      for (const effect of tr.effects) {
        if (effect.is(setRunError)) {
          if (!effect.value) return Decoration.none;
          const line = tr.state.doc.line(effect.value.line);
          return Decoration.set([
            Decoration.line({ class: "cm-run-error-line" }).range(line.from),
            Decoration.widget({ widget: new MessageWidget(effect.value.message), block: true, side: 1 }).range(line.to),
          ]);
        }
      }
      return tr.docChanged ? Decoration.none : decos;
    },
    provide: (field) => EditorView.decorations.from(field),
  });

  const submit = () => {
    form.requestSubmit();
    return true;
  };
  const view = new EditorView({
    parent: mount,
    state: EditorState.create({
      doc: textarea.value,
      extensions: [
        cm.basicSetup,
        cm.python(),
        cm.syntaxHighlighting(cm.classHighlighter), // tok-keyword, tok-string...: stable class names
        cm.indentUnit.of("    "),
        Prec.highest(cm.keymap.of([{ key: "Mod-Enter", run: submit }, cm.indentWithTab])),
        runError,
        EditorView.contentAttributes.of({ "aria-label": "Scenario code" }),
        EditorView.updateListener.of((update) => {
          if (!update.docChanged) return;
          textarea.value = update.state.doc.toString();
          saveDraft(textarea.value);
        }),
      ],
    }),
  });
  textarea.hidden = true;
  mount.hidden = false;
  window.scenarioEditor = view; // for tests and the console

  return {
    get value() {
      return view.state.doc.toString();
    },
    set value(text) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
    },
    markError(line, message) {
      const n = Math.min(Math.max(1, line), view.state.doc.lines);
      const at = view.state.doc.line(n).from;
      view.dispatch({ effects: setRunError.of({ line: n, message }), selection: { anchor: at }, scrollIntoView: true });
    },
    clearError() {
      view.dispatch({ effects: setRunError.of(null) });
    },
    focus: () => view.focus(),
  };
}
