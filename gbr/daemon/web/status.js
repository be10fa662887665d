// The index's state in the top bar, and a banner when the daemon is gone, restarted or ailing.

import { getJson, onFailure } from "./api.js";
import { el } from "./dom.js";

const POLL_MS = 4000;
let firstPid = null;
let lastOk = 0;

export function banner(message, warn = false) {
  const box = document.getElementById("banner");
  box.replaceChildren(message);
  box.className = warn ? "banner warn" : "banner";
  box.hidden = false;
}

function clearBanner() {
  document.getElementById("banner").hidden = true;
}

function dead() {
  banner(
    `The daemon at ${location.host} is not answering: it has stopped or is stuck. ` +
    "Start it again with `gleambrctl serve`, then reload this page.",
  );
  document.getElementById("state").replaceChildren(el("span", { class: "error" }, "daemon down"));
}

function describe(state) {
  const parts = [`${state.files} files`, `${state.chunks} chunks`];
  const embedded = state.embedded;
  if (embedded && embedded.of > 0 && embedded.chunks < embedded.of) {
    const share = Math.floor((100 * embedded.chunks) / embedded.of);
    parts.push(el("span", { class: "busy" }, `still embedding ${share} %`));
  }
  if (!state.ready) parts.push(el("span", { class: "busy" }, "first pass: indexing…"));
  else if (state.indexing) parts.push(el("span", { class: "busy" }, "indexing…"));
  parts.push(state.status === "ok"
    ? el("span", { class: "ok" }, "healthy")
    : el("span", { class: "busy" }, state.status));
  const nodes = [];
  parts.forEach((part, i) => { if (i) nodes.push(" · "); nodes.push(part); });
  return nodes;
}

function judge(health) {
  if (firstPid === null) firstPid = health.pid;
  if (health.pid !== firstPid) {
    banner(`The daemon was restarted (pid ${firstPid} is now ${health.pid}); reload the page.`, true);
  } else if (health.status !== "ok") {
    const why = (health.degraded || []).map((d) => `${d.component} ${d.state}: ${d.reason}`).join("; ");
    banner(`The daemon is degraded: ${why || health.status}. Results may be stale.`, true);
  } else {
    clearBanner();
  }
}

async function poll() {
  // One light call (health and counts); /status lists far more and was the slowest call
  // of a first load. When it fails, /health (no token) tells a live daemon from a dead one.
  let state;
  try {
    state = await getJson("/web/state");
  } catch (error) {
    if (!error.status) {
      dead();
      return;
    }
    const shown = error.status === 401 ? "token needed" : error.message;
    document.getElementById("state").replaceChildren(el("span", { class: "error" }, shown));
    try { judge(await getJson("/health")); } catch { dead(); }
    return;
  }
  judge(state);
  lastOk = Date.now();
  document.getElementById("state").replaceChildren(...describe(state));
  if (!performance.getEntriesByName("gbr-status").length) performance.mark("gbr-status");
}

export function startStatus() {
  onFailure((failure) => { if (failure.status === 0) dead(); });
  poll();
  setInterval(poll, POLL_MS);
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && Date.now() - lastOk > POLL_MS) poll();
  });
}

export { poll as refreshStatus };
