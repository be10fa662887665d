// The index's state in the top bar, and a banner when the daemon is gone, restarted or ailing.

import { getJson, onFailure } from "./api.js";
import { el } from "./dom.js";

const POLL_MS = 4000;
let firstPid = null;
let lastOk = 0;

function banner(message, warn = false) {
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

function describe(status, health) {
  const parts = [`${status.files_ok + (status.files_partial || 0)} files`, `${status.chunks} chunks`];
  const embedded = status.embedded;
  if (embedded && embedded.of > 0 && embedded.chunks < embedded.of) {
    const share = Math.floor((100 * embedded.chunks) / embedded.of);
    parts.push(el("span", { class: "busy" }, `still embedding ${share} %`));
  }
  if (!status.ready) parts.push(el("span", { class: "busy" }, "first pass: indexing…"));
  else if (status.indexing) parts.push(el("span", { class: "busy" }, "indexing…"));
  parts.push(health.status === "ok"
    ? el("span", { class: "ok" }, "healthy")
    : el("span", { class: "busy" }, health.status));
  const nodes = [];
  parts.forEach((part, i) => { if (i) nodes.push(" · "); nodes.push(part); });
  return nodes;
}

async function poll() {
  // Both at once: the state is drawn when the slower of the two comes, not after the sum.
  const [healthy, stated] = await Promise.allSettled([getJson("/health"), getJson("/status")]);
  if (healthy.status === "rejected") {
    dead();
    return;
  }
  const health = healthy.value;
  if (firstPid === null) firstPid = health.pid;
  if (health.pid !== firstPid) {
    banner(`The daemon was restarted (pid ${firstPid} is now ${health.pid}); reload the page.`, true);
  } else if (health.status !== "ok") {
    const why = (health.degraded || []).map((d) => `${d.component} ${d.state}: ${d.reason}`).join("; ");
    banner(`The daemon is degraded: ${why || health.status}. Results may be stale.`, true);
  } else {
    clearBanner();
  }
  if (stated.status === "rejected") {
    if (stated.reason.status === 401) document.getElementById("state").textContent = "token needed";
    return;
  }
  lastOk = Date.now();
  document.getElementById("state").replaceChildren(...describe(stated.value, health));
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
