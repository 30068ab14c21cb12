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

export async function getJSON(url) {
  const response = await fetch(url, { headers: { Accept: "application/json" } });
  if (!response.ok) throw await errorOf(response);
  return response.json();
}

export async function getText(url) {
  const response = await fetch(url);
  if (!response.ok) throw await errorOf(response);
  return response.text();
}

export async function postJSON(url, body) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: JSON.stringify(body),
  });
  if (!response.ok) throw await errorOf(response);
  return response.json();
}

// A file's bytes as the request body (a trace document for POST /api/traces), unparsed: a
// trace can be tens of megabytes, and the server checks it anyway.
export async function postFile(url, file) {
  const response = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json" },
    body: file,
  });
  if (!response.ok) throw await errorOf(response);
  return response.json();
}

export function readConfig() {
  const el = document.getElementById("config");
  try {
    return el ? JSON.parse(el.textContent) : {};
  } catch {
    return {};
  }
}
