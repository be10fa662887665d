// The page's router and keys: which view the address shows, and what each key does there.

import { onFailure, setToken } from "./api.js";
import { copy } from "./dom.js";
import { showSearch } from "./search.js";
import { banner, refreshStatus, startStatus } from "./status.js";

let view = null;
let routed = 0;

// The search view comes with the page; the others are fetched when first shown, so a first
// load asks for five modules rather than eight (a browser opens six connections at once).
const LATER = {
  file: () => import("./file.js").then((m) => m.showFile),
  graph: () => import("./graph.js").then((m) => m.showGraph),
  ask: () => import("./ask.js").then((m) => m.showAsk),
};

async function route() {
  const params = new URLSearchParams(location.search);
  const which = ["file", "graph", "ask"].find((name) => params.has(name)) || "search";
  const turn = ++routed;
  let show = showSearch;
  if (which !== "search") {
    try {
      show = await LATER[which]();
    } catch {
      banner(`The page could not load its ${which} view from the daemon; reload the page.`);
      return;
    }
  }
  if (turn !== routed) return; // a newer address was routed while this view loaded
  if (view && view.leave) view.leave();
  view = show(document.getElementById("main"), params);
  document.getElementById("nav-search").classList.toggle("on", which === "search");
  document.getElementById("nav-ask").classList.toggle("on", which === "ask");
}

/** Go to a URL of this page without reloading it. */
export function navigate(href, replace = false) {
  const target = new URL(href, location.href);
  const sameDoc = target.pathname === location.pathname && target.search === location.search;
  if (replace) history.replaceState(null, "", target);
  else history.pushState(null, "", target);
  if (sameDoc && view && view.onHash) view.onHash();
  else route();
}
window.gbrNavigate = navigate;

document.addEventListener("click", (event) => {
  const link = event.target.closest("a[href]");
  if (!link || event.defaultPrevented || event.button !== 0) return;
  if (event.ctrlKey || event.metaKey || event.shiftKey || event.altKey) return;
  if (link.origin !== location.origin || link.target) return;
  event.preventDefault();
  navigate(link.href);
});
window.addEventListener("popstate", () => route());

function typing(target) {
  return target.closest("input, textarea, select, [contenteditable]");
}

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  const keys = document.getElementById("keys");
  if (event.key === "Escape") {
    if (keys.open) keys.close();
    else if (typing(event.target)) event.target.blur();
    return;
  }
  const inBox = typing(event.target);
  const inSearchBox = event.target.id === "q";
  if (inBox && !(inSearchBox && ["ArrowDown", "ArrowUp", "Enter"].includes(event.key))) return;
  const handled = {
    "/": () => {
      if (view && view.focus) view.focus();
      else navigate("/");
    },
    "?": () => (keys.open ? keys.close() : keys.showModal()),
    j: () => view && view.move && view.move(1),
    k: () => view && view.move && view.move(-1),
    ArrowDown: () => view && view.move && view.move(1),
    ArrowUp: () => view && view.move && view.move(-1),
    Enter: () => view && view.open && view.open(),
    y: () => {
      const link = view && view.permalink ? view.permalink() : location.href;
      if (link) copy(link, "permalink");
    },
    g: () => {
      const name = view && view.graphName && view.graphName();
      if (name) navigate(`/?${new URLSearchParams({ graph: name })}`);
    },
    a: () => navigate("/?ask="),
  }[event.key];
  if (!handled) return;
  // Arrows and Enter in the search box only act when there are hits to act on.
  if (inSearchBox && !(view && view.hasHits && view.hasHits())) return;
  event.preventDefault();
  handled();
});

function askForToken() {
  const form = document.getElementById("token-form");
  form.hidden = false;
  document.getElementById("token-input").focus();
}

document.getElementById("token-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const input = document.getElementById("token-input");
  if (!input.value) return;
  setToken(input.value);
  input.value = "";
  event.target.hidden = true;
  refreshStatus();
  route();
});
document.getElementById("keys-button").addEventListener("click", () => {
  document.getElementById("keys").showModal();
});

onFailure((failure) => { if (failure.status === 401) askForToken(); });
startStatus();
route();
