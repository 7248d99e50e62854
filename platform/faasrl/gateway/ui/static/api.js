// The gateway's /v1 API with the bearer token: kept in this tab's sessionStorage, sent only as
// the Authorization header (never in a URL, so never in a log or the history).

const TOKEN_KEY = "faasrl.token";
const ROOT = new URL("../", document.baseURI); // the gateway, wherever /ui/ is mounted

export class Unauthorized extends Error {}

export class ApiError extends Error {
  constructor(status, body) {
    const err = (body && body.error) || {};
    super(`${status} ${err.type || ""}: ${err.message || JSON.stringify(body)}`);
    this.status = status;
    this.body = body;
  }
}

export const token = {
  get: () => sessionStorage.getItem(TOKEN_KEY),
  set: (value) => sessionStorage.setItem(TOKEN_KEY, value),
  clear: () => sessionStorage.removeItem(TOKEN_KEY),
};

function headers(extra = {}) {
  const out = { ...extra };
  const value = token.get();
  if (value) out.Authorization = `Bearer ${value}`;
  return out;
}

async function request(method, path, { query, signal, extraHeaders, json } = {}) {
  const url = new URL(path.replace(/^\//, ""), ROOT);
  for (const [k, v] of Object.entries(query || {})) {
    if (v !== undefined && v !== null && v !== "") url.searchParams.set(k, v);
  }
  const body = json === undefined ? undefined : JSON.stringify(json);
  const extra = json === undefined ? extraHeaders : { ...extraHeaders,
                                                      "Content-Type": "application/json" };
  const resp = await fetch(url, { method, headers: headers(extra), signal, body,
                                  cache: "no-store" });
  if (resp.status === 401) throw new Unauthorized("the gateway wants a token");
  if (!resp.ok) {
    let body = null;
    try { body = await resp.json(); } catch { body = await resp.text().catch(() => ""); }
    throw new ApiError(resp.status, body);
  }
  return resp;
}

export async function get(path, options) {
  return (await request("GET", path, options)).json();
}

export async function getText(path, options) {
  return (await request("GET", path, options)).text();
}

export async function post(path, options) {
  return (await request("POST", path, options)).json();
}

// Fetch a file (the Authorization header rules out a plain link) and hand it to the browser as
// a download named as the gateway names it.
export async function download(path, fallbackName) {
  const resp = await request("GET", path);
  const disposition = resp.headers.get("Content-Disposition") || "";
  const name = (disposition.match(/filename="([^"]+)"/) || [])[1] || fallbackName;
  const url = URL.createObjectURL(await resp.blob());
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
  return name;
}

// A file as a blob: URL for an element's src (a <video>: the Authorization header rules out the
// route's own URL there), with the type the gateway said; the caller revokes it when the page
// goes.
export async function objectUrl(path, { signal } = {}) {
  const blob = await (await request("GET", path, { signal })).blob();
  return { url: URL.createObjectURL(blob), type: blob.type };
}

// Server-sent events over fetch(): EventSource cannot send an Authorization header. Calls
// onEvent(name, data, id) per event; on a dropped stream it reconnects with Last-Event-ID
// (so no row comes twice) up to `retries` times in a row, until `end` or the signal aborts.
export async function followEvents(path, { onEvent, onState, signal, retries = 20 }) {
  let lastId = null;
  let failures = 0;
  while (!signal.aborted) {
    let ended = false;
    try {
      const extraHeaders = lastId === null ? {} : { "Last-Event-ID": lastId };
      const resp = await request("GET", path, { signal, extraHeaders });
      onState?.("live");
      failures = 0;
      const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += value.replace(/\r\n?/g, "\n");
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const event = parseEvent(buffer.slice(0, cut));
          buffer = buffer.slice(cut + 2);
          if (!event) continue;
          if (event.id !== null) lastId = event.id;
          onEvent(event.name, event.data, event.id);
          if (event.name === "end") ended = true;
        }
      }
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof Unauthorized) throw err;
      failures += 1;
    }
    if (ended || signal.aborted) return;
    if (failures > retries) {
      onState?.("lost");
      return;
    }
    onState?.("reconnecting");
    await new Promise((resolve) => setTimeout(resolve, Math.min(1000 * 2 ** failures, 10_000)));
  }
}

function parseEvent(block) {
  let name = "message";
  let id = null;
  const data = [];
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "event") name = value;
    else if (field === "data") data.push(value);
    else if (field === "id") id = value;
  }
  if (!data.length) return null;
  return { name, id, data: JSON.parse(data.join("\n")) };
}
