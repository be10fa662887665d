// The file view: the whole file highlighted (by the daemon, from the tree-sitter grammar),
// `#L12-L20` anchors, the file's definitions, and a side panel for a name the graph knows.

import { getJson } from "./api.js";
import { el, fileHref } from "./dom.js";

function range() {
  const match = /^#L(\d+)(?:-L?(\d+))?$/.exec(location.hash);
  if (!match) return null;
  const start = Number(match[1]);
  const end = match[2] ? Number(match[2]) : start;
  return [Math.min(start, end), Math.max(start, end)];
}

function segmentNode(segment) {
  const [text, kind, target] = segment;
  const cls = kind ? `t-${kind}` : "";
  if (target) {
    const href = `${location.pathname}?${new URLSearchParams({ ...currentFile(), sym: target })}${location.hash}`;
    return el("a", { class: `sym ${cls}`.trim(), href, "data-target": target, text });
  }
  return cls ? el("span", { class: cls, text }) : document.createTextNode(text);
}

function currentFile() {
  return { file: new URLSearchParams(location.search).get("file") || "" };
}

function site(path, line, label) {
  return el("a", { class: "site", href: fileHref(path, line) }, label || `${path}:${line}`);
}

function symbolHref(target) {
  return `/?${new URLSearchParams({ ...currentFile(), sym: target })}${location.hash}`;
}

async function fillPanel(panel, target) {
  panel.replaceChildren(el("p", { class: "dim" }, `loading ${target}…`));
  const [refs, callers, callees] = await Promise.allSettled([
    getJson("/graph/refs", { name: target }),
    getJson("/graph/callers", { name: target }),
    getJson("/graph/callees", { name: target }),
  ]);
  const close = el("a", { class: "close", href: `/?${new URLSearchParams(currentFile())}${location.hash}`, title: "Close" }, "✕");
  const head = [close, el("h2", {}, target),
    el("a", { href: `/?${new URLSearchParams({ graph: target })}`, id: "graph-link" }, "call graph")];
  if (refs.status === "rejected") {
    panel.replaceChildren(...head, el("p", { class: "error" }, refs.reason.message));
    return;
  }
  const data = refs.value;
  const defs = data.definitions.map((d) => el("li", {}, site(d.path, d.line), " ", el("span", { class: "tag" }, d.kind)));
  const references = data.references.map((r) =>
    el("li", {}, site(r.path, r.line), " ", el("span", { class: "dim" }, r.source ? `in ${r.source}` : r.kind)));
  const walked = (result, key) => {
    if (result.status === "rejected") return [el("li", { class: "error" }, result.reason.message)];
    const entries = result.value[key];
    if (!entries.length) return [el("li", { class: "dim" }, "none")];
    return entries.map((entry) => {
      const name = `${entry.module}.${entry.name}`;
      const label = entry.name || `${entry.module} (module code)`;
      const first = entry.sites[0];
      return el("li", { class: key.slice(0, -1) },
        entry.name ? el("a", { href: symbolHref(name), class: "name", title: name }, label) : label,
        " ", site(first.path, first.line),
        entry.sites.length > 1 ? el("span", { class: "dim" }, ` +${entry.sites.length - 1}`) : "");
    });
  };
  panel.replaceChildren(
    ...head,
    el("h3", {}, "Definition"), el("ul", { id: "panel-defs" }, defs.length ? defs : [el("li", { class: "dim" }, "outside the package")]),
    el("h3", {}, "Callers"), el("ul", { id: "panel-callers" }, walked(callers, "callers")),
    el("h3", {}, "Callees"), el("ul", { id: "panel-callees" }, walked(callees, "callees")),
    el("h3", {}, `References (${references.length})`), el("ul", { id: "panel-refs" }, references));
}

export function showFile(main, params) {
  const path = params.get("file");
  const sym = params.get("sym");
  const defs = el("aside", { class: "defs", id: "defs" });
  const code = el("div", { class: "code", id: "code" });
  const head = el("div", { class: "filehead" }, el("h2", {}, path));
  const panel = el("aside", { class: "panel", id: "panel", hidden: !sym });
  const layout = el("div", { class: sym ? "fileview" : "fileview nopanel" }, defs, el("section", {}, head, code), panel);
  main.replaceChildren(layout);
  let lines = [];

  function applyHash() {
    for (const node of code.querySelectorAll(".line.hl")) node.classList.remove("hl");
    const span = range();
    if (!span || !lines.length) return;
    const [start, end] = span;
    for (let n = start; n <= Math.min(end, lines.length); n++) lines[n - 1].classList.add("hl");
    const first = lines[start - 1];
    if (first) first.scrollIntoView({ block: "center" });
  }

  let anchor = null; // the line a shift-click extends from
  code.addEventListener("click", (event) => {
    const number = event.target.closest("a.ln");
    if (!number) return;
    event.preventDefault();
    event.stopPropagation();
    const line = Number(number.dataset.line);
    const hash = event.shiftKey && anchor ? `#L${Math.min(anchor, line)}-L${Math.max(anchor, line)}` : `#L${line}`;
    if (!event.shiftKey) anchor = line;
    window.gbrNavigate(`${location.pathname}${location.search}${hash}`, true);
  });

  getJson("/web/file", { path }).then((data) => {
    head.append(el("span", { class: "dim" }, data.module));
    lines = data.lines.map((segments, i) => {
      const n = i + 1;
      return el("div", { class: "line", id: `L${n}` },
        el("a", { class: "ln", href: `#L${n}`, "data-line": n }, String(n)),
        el("span", { class: "src" }, segments.map(segmentNode)));
    });
    code.replaceChildren(...lines);
    defs.replaceChildren(el("h3", {}, "Definitions"), el("ul", {}, data.definitions.map((d) =>
      el("li", {}, el("a", { href: `/?${new URLSearchParams({ file: path, sym: d.target })}#L${d.start_line}`, title: d.signature || d.name }, d.name),
        el("span", { class: "k" }, d.kind)))));
    if (sym) for (const a of code.querySelectorAll("a.sym")) a.classList.toggle("on", a.dataset.target === sym);
    applyHash();
    document.body.dataset.file = path;
  }).catch((error) => {
    code.replaceChildren(el("p", { class: "error", id: "file-error" }, error.message));
  });
  if (sym) fillPanel(panel, sym).catch((error) => panel.replaceChildren(el("p", { class: "error" }, error.message)));

  return {
    onHash: applyHash,
    permalink: () => location.href,
    graphName: () => sym,
    move: (delta) => {
      const span = range();
      const line = Math.max(1, Math.min(lines.length, (span ? span[0] : 0) + delta));
      if (lines.length) window.gbrNavigate(`${location.pathname}${location.search}#L${line}`, true);
    },
  };
}
