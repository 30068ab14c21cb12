// The run's events, streamed by the server as Server-Sent Events.
//
// Messages: `event: events` with `id: <last seq>` and data `[{event, changes, caption}, ...]`,
// then one `event: done` with data `{status, error, n_events}`. EventSource reconnects by itself
// after a dropped connection and sends Last-Event-ID, so the server resumes after the last batch
// we got (the Player also drops anything it already holds). We close the source on `done`:
// otherwise EventSource would reconnect forever once the server ends the stream.

export function openStream(runId, { onItems, onDone, onProblem }) {
  const source = new EventSource(`/api/runs/${encodeURIComponent(runId)}/events`);
  let finished = false;

  source.addEventListener("events", (message) => {
    let items;
    try {
      items = JSON.parse(message.data);
    } catch (err) {
      onProblem(`a malformed batch of events arrived (${err.message})`, { fatal: true });
      source.close();
      return;
    }
    onItems(items);
  });

  source.addEventListener("done", (message) => {
    finished = true;
    source.close();
    let summary = {};
    try {
      summary = JSON.parse(message.data);
    } catch {
      // A done without a body still ends the run: the summary is only informative.
    }
    onDone(summary);
  });

  source.addEventListener("error", () => {
    if (finished) return;
    // CONNECTING: the browser retries by itself (and resumes with Last-Event-ID).
    // CLOSED: it gave up (the server answered with an error status, for example).
    if (source.readyState === EventSource.CLOSED) {
      onProblem("the connection to the server was closed before the run finished", { fatal: true });
    } else {
      onProblem("connection lost, reconnecting…", { fatal: false });
    }
  });

  source.addEventListener("open", () => {
    if (!finished) onProblem(null, { fatal: false }); // connected again: clear any notice
  });

  return { close: () => source.close() };
}
