// Search as you type: debounced, the newest request wins, the filters live in the URL.

import { getJson, postJson } from "./api.js";
import { el, fileHref, marked, queryTerms } from "./dom.js";

const DEBOUNCE_MS = 120;
const PAGE = 10;
const SNIPPET_LINES = 4;
const KINDS = ["function", "type", "type_alias", "constant", "external_type", "module"];
const DEFAULTS = { mode: "hybrid", kind: "", path: "", tests: "demote" };

function select(id, label, options, value) {
  return el("label", {}, label, el("select", { id },
    options.map(([v, text]) => el("option", { value: v, selected: v === value }, text))));
}

/** The lines of a hit worth showing: from the first that holds a query term, else its top. */
function snippet(hit, terms) {
  const lines = hit.text.split("\n");
  let first = lines.findIndex((line) => {
    const lower = line.toLowerCase();
    return !line.trim().startsWith("//") && terms.some((t) => lower.includes(t));
  });
  if (first < 0) first = Math.max(0, lines.findIndex((line) => !line.trim().startsWith("//")));
  const offset = Math.max(0, hit.end_line - hit.start_line + 1 - lines.length);
  return lines.slice(first, first + SNIPPET_LINES).map((line, i) => ({
    number: hit.start_line + offset + first + i, text: line,
  }));
}

function firstLine(text) {
  return (text || "").split("\n").map((l) => l.trim()).find((l) => l) || "";
}

function renderHit(hit, index, terms) {
  const href = fileHref(hit.path, hit.start_line, hit.end_line);
  return el("li", { class: "hit", "data-index": index },
    el("div", { class: "hit-head" },
      el("a", { class: "loc", href }, `${hit.path}:${hit.start_line}`),
      el("span", { class: "name" }, ...marked(hit.name || "(module)", terms)),
      el("span", { class: "tag" }, hit.kind),
      el("span", { class: "dim" }, hit.module)),
    hit.signature ? el("div", { class: "sig" }, ...marked(hit.signature, terms)) : null,
    hit.doc ? el("div", { class: "doc" }, ...marked(firstLine(hit.doc), terms)) : null,
    el("pre", { class: "snip" }, snippet(hit, terms).map((line) =>
      el("div", {}, el("span", { class: "n" }, String(line.number)), ...marked(line.text, terms)))));
}

export function showSearch(main, params) {
  const state = {
    q: params.get("q") || "",
    mode: params.get("mode") || DEFAULTS.mode,
    kind: params.get("kind") || DEFAULTS.kind,
    path: params.get("path") || DEFAULTS.path,
    tests: params.get("tests") || DEFAULTS.tests,
    k: PAGE,
  };
  let hits = [];
  let selected = 0;
  let seq = 0;
  let controller = null;
  let timer = 0;

  const input = el("input", {
    id: "q", type: "search", value: state.q, placeholder: "Search the code: a name, or words",
    autocomplete: "off", spellcheck: "false", "aria-label": "Search",
  });
  const bar = el("form", { class: "searchbar", role: "search" },
    input,
    select("mode", "mode", [["hybrid", "hybrid"], ["bm25", "words (BM25)"], ["dense", "meaning"]], state.mode),
    select("kind", "kind", [["", "any"], ...KINDS.map((k) => [k, k])], state.kind),
    el("label", {}, "path", el("input", { id: "path", value: state.path, placeholder: "src/…", spellcheck: "false" })),
    select("tests", "tests", [["include", "include"], ["demote", "demote"], ["exclude", "exclude"]], state.tests));
  const summary = el("div", { class: "summary", id: "summary" });
  const list = el("ol", { class: "hits", id: "hits" });
  const more = el("button", { type: "button", class: "more", id: "more", hidden: true }, "Show more");
  const examples = el("div", { class: "examples", id: "examples", hidden: true });
  main.replaceChildren(bar, summary, list, more, examples);

  function syncUrl() {
    const url = new URLSearchParams();
    if (state.q) url.set("q", state.q);
    for (const key of ["mode", "kind", "path", "tests"]) {
      if (state[key] !== DEFAULTS[key]) url.set(key, state[key]);
    }
    const text = url.toString();
    history.replaceState(null, "", text ? `/?${text}` : "/");
  }

  function choose(index) {
    const items = list.children;
    if (!items.length) return;
    selected = Math.max(0, Math.min(items.length - 1, index));
    for (const item of items) item.classList.toggle("sel", Number(item.dataset.index) === selected);
    items[selected].scrollIntoView({ block: "nearest" });
  }

  async function showExamples() {
    list.replaceChildren();
    more.hidden = true;
    summary.textContent = "";
    examples.hidden = false;
    if (examples.childElementCount) return;
    try {
      const data = await getJson("/web/examples");
      const items = data.queries.map((query) =>
        el("li", {}, el("a", { href: `/?${new URLSearchParams({ q: query })}`, class: "example" }, query)));
      examples.replaceChildren(
        el("p", { class: "dim" }, "Type a name or a few words. Try one of these, drawn from this package:"),
        el("ul", {}, items),
        el("p", { class: "dim" }, "Press ? for the keys."));
      performance.mark("gbr-examples"); // bench/web_page.py times the first load by it
    } catch (error) {
      examples.replaceChildren(el("p", { class: "error" }, error.message));
    }
  }

  async function run() {
    clearTimeout(timer);
    syncUrl();
    const query = state.q.trim();
    const mine = ++seq;
    if (!query) {
      if (controller) controller.abort();
      controller = null;
      showExamples();
      return;
    }
    examples.hidden = true;
    // One search on its way at a time: the daemon finishes a search whose caller went
    // away, so aborting each keystroke's request would only pile them up on a slow
    // daemon. Input typed meanwhile is sent when the answer comes, and that answer,
    // stale by then, is dropped.
    if (controller) return;
    const sent = (controller = new AbortController());
    const body = { query, k: state.k, mode: state.mode, tests: state.tests };
    if (state.kind) body.kinds = [state.kind];
    if (state.path) body.path = state.path;
    let data;
    performance.mark("gbr-request");
    try {
      data = await postJson("/search", body, sent.signal);
    } catch (error) {
      if (controller === sent) controller = null;
      if (error.name === "AbortError") return;
      if (mine !== seq) { run(); return; }
      list.replaceChildren();
      more.hidden = true;
      summary.replaceChildren(el("span", { class: "error" }, error.message));
      return;
    }
    if (controller === sent) controller = null;
    if (mine !== seq) { run(); return; } // newer input came while this one was on its way
    performance.mark("gbr-response");
    performance.measure("gbr-search", "gbr-request", "gbr-response");
    hits = data.results;
    const terms = queryTerms(query);
    list.replaceChildren(...hits.map((hit, i) => renderHit(hit, i, terms)));
    const shown = `${hits.length} hit${hits.length === 1 ? "" : "s"} (${data.mode})`;
    summary.replaceChildren(shown, data.hint ? el("span", { class: "error" }, ` · ${data.hint}`) : "");
    more.hidden = hits.length < state.k || state.k >= 200;
    choose(Math.min(selected, hits.length - 1));
    document.body.dataset.searched = String(mine);
    document.body.dataset.query = query;
    // Drawn when the next frame starts (layout and paint of this one are done by then):
    // bench/web_page.py reads these measures.
    requestAnimationFrame(() => setTimeout(() => {
      performance.mark("gbr-drawn");
      performance.measure("gbr-draw", "gbr-response", "gbr-drawn");
    }, 0));
  }

  function schedule() {
    clearTimeout(timer);
    timer = setTimeout(run, DEBOUNCE_MS);
  }

  input.addEventListener("input", () => {
    state.q = input.value;
    state.k = PAGE;
    selected = 0;
    schedule();
  });
  bar.addEventListener("change", (event) => {
    if (event.target === input) return;
    state[event.target.id] = event.target.value;
    state.k = PAGE;
    run();
  });
  bar.querySelector("#path").addEventListener("input", (event) => {
    state.path = event.target.value;
    schedule();
  });
  bar.addEventListener("submit", (event) => event.preventDefault());
  more.addEventListener("click", () => { state.k = Math.min(200, state.k + PAGE); run(); });

  run();
  if (!state.q) input.focus();

  const current = () => hits[selected];
  return {
    focus: () => { input.focus(); input.select(); },
    move: (delta) => choose(selected + delta),
    hasHits: () => hits.length > 0,
    open: () => { const hit = current(); if (hit) window.gbrNavigate(fileHref(hit.path, hit.start_line, hit.end_line)); },
    permalink: () => { const hit = current(); return hit ? location.origin + fileHref(hit.path, hit.start_line, hit.end_line) : location.href; },
    graphName: () => { const hit = current(); return hit && hit.name ? `${hit.module}.${hit.name}` : null; },
    leave: () => { clearTimeout(timer); if (controller) controller.abort(); controller = null; },
  };
}
