// The daemon's API as the page calls it: same origin, the token as a bearer header.
// The token lives in sessionStorage (this tab only) and is never written to the console.

const KEY = "gbr-token";
const listeners = new Set();

export class ApiError extends Error {
  constructor(status, message, type) {
    super(message);
    this.status = status;
    this.type = type;
  }
}

/** Take a `?token=` from the address once, keep it for this tab, and drop it from the URL. */
function takeToken() {
  const url = new URL(location.href);
  const token = url.searchParams.get("token");
  if (token === null) return;
  if (token) sessionStorage.setItem(KEY, token);
  url.searchParams.delete("token");
  history.replaceState(history.state, "", url.pathname + url.search + url.hash);
}

export function setToken(token) {
  sessionStorage.setItem(KEY, token);
}

/** Called with each failure the whole page should know about (401, unreachable). */
export function onFailure(listener) {
  listeners.add(listener);
}

function headers(extra = {}) {
  const token = sessionStorage.getItem(KEY);
  return token ? { ...extra, authorization: `Bearer ${token}` } : extra;
}

function send(path, init) {
  return fetch(path, { ...init, headers: headers(init.headers), cache: "no-store" });
}

/** The response of a sent request, or an ApiError that the page's listeners hear of. */
async function settle(sent) {
  let response;
  try {
    response = await sent;
  } catch (error) {
    if (error.name === "AbortError") throw error;
    const failure = new ApiError(0, "the daemon is not answering", "Unreachable");
    listeners.forEach((listener) => listener(failure));
    throw failure;
  }
  if (response.ok) return response;
  let body = {};
  try { body = await response.json(); } catch { /* not JSON: keep the status */ }
  const failure = new ApiError(
    response.status, body.error || `the daemon answered HTTP ${response.status}`, body.type || "",
  );
  if (response.status === 401) listeners.forEach((listener) => listener(failure));
  throw failure;
}

function request(path, init) {
  return settle(send(path, init));
}

// The first load's calls, sent as soon as this module arrives (index.html loads it on its
// own, so it need not wait for the other modules): the state bar's, and the empty search
// page's examples. The first getJson of each path takes its answer.
const early = new Map();

function sendEarly() {
  const params = new URLSearchParams(location.search);
  const paths = ["/web/state"];
  if (!["q", "file", "graph", "ask"].some((name) => params.has(name))) paths.push("/web/examples");
  for (const path of paths) {
    const sent = send(path, {});
    sent.catch(() => {}); // a failure is reported when it is taken, or not at all
    early.set(path, sent);
  }
}

export async function getJson(path, params = {}, signal) {
  const query = new URLSearchParams(params).toString();
  const sent = !query && !signal && early.get(path);
  early.delete(path);
  const response = await (sent ? settle(sent) : request(query ? `${path}?${query}` : path, { signal }));
  return response.json();
}

export async function postJson(path, body, signal) {
  const response = await request(path, {
    method: "POST", body: JSON.stringify(body), signal,
    headers: { "content-type": "application/json" },
  });
  return response.json();
}

/** POST and read server-sent events: `onEvent(name, data)` for each, until the end. */
export async function postEvents(path, body, onEvent, signal) {
  const response = await request(path, {
    method: "POST", body: JSON.stringify(body), signal,
    headers: { "content-type": "application/json", accept: "text/event-stream" },
  });
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue; // a keep-alive comment
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
        if (field === "event") event = text;
        else if (field === "data") data.push(text);
      }
      if (data.length) onEvent(event, JSON.parse(data.join("\n")));
    }
  }
}

takeToken();
sendEarly();
