// The few HTTP calls the pages make. The server answers errors as JSON with a message; we turn
// them into Error objects whose message a page can show as is.

async function errorOf(response) {
  let detail = `${response.status} ${response.statusText}`;
  try {
    const body = await response.json();
    const d = body.detail ?? body.message ?? body.error;
    if (typeof d === "string") detail = d;
    else if (Array.isArray(d)) detail = d.map((e) => e.msg || JSON.stringify(e)).join("; ");
    else if (d) detail = JSON.stringify(d);
  } catch {
    // Not JSON: keep the status line.
  }
  const err = new Error(detail);
  err.status = response.status;
  return err;
}

// fetch, with an error status thrown as an Error carrying the server's message.
async function request(url, init) {
  const response = await fetch(url, init);
  if (!response.ok) throw await errorOf(response);
  return response;
}

export async function getJSON(url) {
  return (await request(url, { headers: { Accept: "application/json" } })).json();
}

export async function getText(url) {
  return (await request(url)).text();
}

// POST a body the server reads as JSON, and its JSON answer.
async function post(url, body) {
  const headers = { "Content-Type": "application/json", Accept: "application/json" };
  return (await request(url, { method: "POST", headers, body })).json();
}

export async function postJSON(url, body) {
  return post(url, JSON.stringify(body));
}

// A file's bytes as the request body (a trace document for POST /api/traces), unparsed: a
// trace can be tens of megabytes, and the server checks it anyway.
export async function postFile(url, file) {
  return post(url, file);
}

export function readConfig() {
  const el = document.getElementById("config");
  try {
    return el ? JSON.parse(el.textContent) : {};
  } catch {
    return {};
  }
}
