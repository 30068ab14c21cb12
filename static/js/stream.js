// The run's events, streamed by the server as Server-Sent Events.
//
// Messages: `event: events` with `id: <last seq>` and data `[{event, changes, caption}, ...]`,
// then one `event: done` with data `{status, error, n_events}` (Note [The event stream] in
// app/routes/stream.py). After a dropped connection we reconnect and send Last-Event-ID, so the
// server resumes after the last batch we got (the Player also drops anything it already holds).
// The stream ends after `done`.
//
// Note [Reading the stream with fetch]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// The stream is read with fetch() and parsed here rather than with EventSource: Chromium's
// EventSource parses a message's data line by line on the page's main thread, and for the 91 MB
// of a 100,000-event run it took about 2 s where fetch, a TextDecoder and indexOf take 0.3 s
// besides the JSON.parse both need (bench/bench_ui.py). What EventSource did for us is done
// here, for this server's messages: reconnecting after a network error (resuming after the last
// id), giving up on an error status, and telling the page (onProblem) either way.
// The parser relies on the SSE framing only: a message ends at a blank line; `\r\n` and `\r` end
// lines as `\n` does (a `\r` at the end of a chunk waits for the next one, which may start with
// `\n`); lines starting with `:` are comments (keep-alives); several `data:` lines are joined
// with `\n`. A message's text is assembled once, when its blank line arrives, from the chunks
// that hold it: each chunk is searched once, so a 2 MB message costs no more than its bytes.

const RETRY_MS = 1000;

export function openStream(runId, { onItems, onDone, onProblem }) {
  const url = `/api/runs/${encodeURIComponent(runId)}/events`;
  let lastId = null; // the id of the last message handled: where a reconnection resumes
  let finished = false;
  let closed = false;
  let controller = null;

  // One message's text (without its blank line): `event`, `id` and `data` fields.
  function dispatch(text) {
    let event = "message";
    let id = null;
    const data = [];
    for (const line of text.split("\n")) {
      if (!line || line[0] === ":") continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value[0] === " ") value = value.slice(1);
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
      else if (field === "id") id = value;
    }
    if (id !== null) lastId = id;
    if (!data.length) return;
    if (event === "events") {
      let items;
      try {
        items = JSON.parse(data.join("\n"));
      } catch (err) {
        fail(`a malformed batch of events arrived (${err.message})`);
        return;
      }
      onItems(items);
    } else if (event === "done") {
      finished = true;
      close();
      let summary = {};
      try {
        summary = JSON.parse(data.join("\n"));
      } catch {
        // A done without a body still ends the run: the summary is only informative.
      }
      onDone(summary);
    }
  }

  function fail(text) {
    close();
    onProblem(text, { fatal: true });
  }

  function close() {
    closed = true;
    if (controller) controller.abort();
  }

  async function connect() {
    controller = new AbortController();
    const headers = { Accept: "text/event-stream" };
    if (lastId !== null) headers["Last-Event-ID"] = lastId;
    let response;
    try {
      response = await fetch(url, { headers, cache: "no-store", signal: controller.signal });
    } catch {
      reconnect();
      return;
    }
    if (!response.ok) {
      // An error status is an answer, not a lost connection: retrying would get it again.
      fail("the connection to the server was closed before the run finished");
      return;
    }
    onProblem(null, { fatal: false }); // connected (again): clear any notice
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let parts = []; // the text of the message being received, in pieces
    let endsWithNewline = false; // whether that text ends with "\n" (a blank line may follow)
    let heldCR = false; // a "\r" ended the last chunk
    try {
      while (!closed) {
        const { value, done } = await reader.read();
        if (done) break;
        let text = decoder.decode(value, { stream: true });
        if (heldCR) text = `\r${text}`;
        heldCR = text.endsWith("\r");
        if (heldCR) text = text.slice(0, -1);
        if (text.includes("\r")) text = text.replace(/\r\n?/g, "\n");
        let from = 0;
        if (endsWithNewline && text[0] === "\n") {
          dispatch(parts.join(""));
          parts = [];
          from = 1;
        }
        for (let i = text.indexOf("\n\n", from); i >= 0 && !closed; i = text.indexOf("\n\n", from)) {
          parts.push(text.slice(from, i));
          dispatch(parts.join(""));
          parts = [];
          from = i + 2;
        }
        const rest = text.slice(from);
        if (rest) parts.push(rest);
        if (rest) endsWithNewline = rest.endsWith("\n");
        else if (!parts.length) endsWithNewline = false;
      }
    } catch {
      // The connection broke (or we aborted it): see below.
    }
    if (!closed) reconnect(); // the stream ended without `done`
  }

  function reconnect() {
    if (closed) return;
    onProblem("connection lost, reconnecting…", { fatal: false });
    setTimeout(() => {
      if (!closed) connect();
    }, RETRY_MS);
  }

  connect();
  return {
    close: () => {
      if (!finished) close();
    },
  };
}
