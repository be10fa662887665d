// The call graph of a name (or a module's imports), drawn as SVG in layers: callers to the
// left, the name in the middle, what it calls to the right. Nodes are links.

import { getJson } from "./api.js";
import { el, fileHref } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
const NODE_H = 34;
const GAP_Y = 14;
const GAP_X = 70;
const CHAR_W = 7.4;

function svg(tag, attrs = {}, ...children) {
  const node = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  for (const child of children) node.append(typeof child === "string" ? document.createTextNode(child) : child);
  return node;
}

function split(id) {
  const dot = id.lastIndexOf(".");
  return dot < 0 ? ["", id] : [id.slice(0, dot), id.slice(dot + 1)];
}

/** Layer of each node: 0 for the focus, -n for n calls above it, +n for n below. */
export function layers(graph) {
  const layer = new Map();
  const focus = graph.focus || (graph.nodes[0] && graph.nodes[0].id);
  if (!focus) return layer;
  layer.set(focus, 0);
  const queue = [focus];
  while (queue.length) {
    const id = queue.shift();
    const here = layer.get(id);
    for (const edge of graph.edges) {
      if (edge.source === id && !layer.has(edge.target) && here >= 0) {
        layer.set(edge.target, here + 1);
        queue.push(edge.target);
      }
      if (edge.target === id && !layer.has(edge.source) && here <= 0) {
        layer.set(edge.source, here - 1);
        queue.push(edge.source);
      }
    }
  }
  let extra = 1 + Math.max(0, ...layer.values());
  for (const node of graph.nodes) if (!layer.has(node.id)) layer.set(node.id, extra);
  return layer;
}

function draw(graph, onPick) {
  const layer = layers(graph);
  const columns = new Map();
  for (const node of graph.nodes) {
    const n = layer.get(node.id);
    if (!columns.has(n)) columns.set(n, []);
    columns.get(n).push(node);
  }
  const order = [...columns.keys()].sort((a, b) => a - b);
  const width = new Map(order.map((n) => [n, Math.max(...columns.get(n).map((node) =>
    Math.max(split(node.id)[1].length, split(node.id)[0].length * 0.85)) ) * CHAR_W + 24]));
  const tallest = Math.max(...order.map((n) => columns.get(n).length));
  const height = tallest * (NODE_H + GAP_Y) + GAP_Y;
  const place = new Map();
  let x = 16;
  for (const n of order) {
    const nodes = columns.get(n).sort((a, b) => a.id.localeCompare(b.id));
    const top = (height - nodes.length * (NODE_H + GAP_Y) + GAP_Y) / 2;
    nodes.forEach((node, i) => place.set(node.id, { x, y: top + i * (NODE_H + GAP_Y), w: width.get(n) }));
    x += width.get(n) + GAP_X;
  }
  const root = svg("svg", { class: "callgraph", id: "callgraph", width: x - GAP_X + 16, height, role: "img",
    "aria-label": `call graph of ${graph.focus || "the package"}` });
  root.append(svg("defs", {}, svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5,
    markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" }, svg("path", { d: "M 0 0 L 10 5 L 0 10 z" }))));
  for (const edge of graph.edges) {
    const a = place.get(edge.source);
    const b = place.get(edge.target);
    if (!a || !b) continue;
    const forward = a.x < b.x;
    const x1 = forward ? a.x + a.w : a.x;
    const x2 = forward ? b.x : b.x + b.w;
    const y1 = a.y + NODE_H / 2;
    const y2 = b.y + NODE_H / 2;
    const bend = forward ? GAP_X / 2 : -GAP_X / 2;
    root.append(svg("path", { class: "edge", d: `M ${x1} ${y1} C ${x1 + bend} ${y1}, ${x2 - bend} ${y2}, ${x2} ${y2}`,
      "marker-end": "url(#arrow)", "data-edge": `${edge.source}>${edge.target}` }));
  }
  for (const node of graph.nodes) {
    const at = place.get(node.id);
    const [module, name] = split(node.id);
    const cls = ["node", node.internal ? "internal" : "external", node.id === graph.focus ? "focus" : ""].join(" ").trim();
    const group = svg("g", { class: cls, transform: `translate(${at.x} ${at.y})`, "data-id": node.id, tabindex: 0, role: "link" },
      svg("title", {}, node.id),
      svg("rect", { width: at.w, height: NODE_H, rx: 5 }),
      svg("text", { x: 10, y: 15 }, name || module),
      svg("text", { x: 10, y: 28, class: "mod" }, name ? module : ""));
    group.addEventListener("click", () => onPick(node));
    group.addEventListener("keydown", (event) => { if (event.key === "Enter") onPick(node); });
    root.append(group);
  }
  return root;
}

export function showGraph(main, params) {
  const name = params.get("graph");
  const depth = Number(params.get("depth") || 2);
  const title = el("h2", {}, name);
  const where = el("span", { class: "dim", id: "graph-def" });
  const depthBox = el("select", { id: "depth" }, [1, 2, 3].map((d) =>
    el("option", { value: d, selected: d === depth }, `depth ${d}`)));
  const box = el("div", { class: "graph-wrap", id: "graph" }, el("p", { class: "dim" }, "loading…"));
  main.replaceChildren(el("div", { class: "graphbar" }, title, where, depthBox),
    el("p", { class: "dim" }, "Callers on the left, callees on the right; click a node to centre it."), box);
  depthBox.addEventListener("change", () =>
    window.gbrNavigate(`/?${new URLSearchParams({ graph: name, depth: depthBox.value })}`));

  const pick = (node) => window.gbrNavigate(`/?${new URLSearchParams({ graph: node.id, depth })}`);
  getJson("/graph/graph", { name, depth }).then((graph) => {
    box.replaceChildren(graph.nodes.length ? draw(graph, pick) : el("p", { class: "dim" }, "nothing calls it, and it calls nothing"));
  }).catch((error) => box.replaceChildren(el("p", { class: "error" }, error.message)));
  getJson("/graph/refs", { name }).then((refs) => {
    const def = refs.definitions[0];
    if (def) where.replaceChildren("defined at ", el("a", { href: fileHref(def.path, def.line) + "", id: "graph-open" }, `${def.path}:${def.line}`));
  }).catch(() => {});
  return { graphName: () => name };
}
