// Building the page from index data: always with text nodes, never with HTML strings.

/** An element with attributes and children; strings become text nodes. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(typeof child === "string" ? document.createTextNode(child) : child);
  }
  return node;
}

/** The words of a query worth marking in code: two characters or more. */
export function queryTerms(query) {
  const words = query.toLowerCase().split(/[^a-z0-9_]+/).filter((w) => w.length >= 2);
  return [...new Set(words)].sort((a, b) => b.length - a.length);
}

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** `text` as nodes, with each occurrence of a term wrapped in <mark>. */
export function marked(text, terms) {
  if (!terms.length) return [document.createTextNode(text)];
  const pattern = new RegExp(terms.map(escapeRegExp).join("|"), "gi");
  const nodes = [];
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) nodes.push(document.createTextNode(text.slice(last, match.index)));
    nodes.push(el("mark", { text: match[0] }));
    last = match.index + match[0].length;
  }
  if (last < text.length) nodes.push(document.createTextNode(text.slice(last)));
  return nodes;
}

/** The link to a file of the index, at a line or a range. */
export function fileHref(path, start, end) {
  const url = new URLSearchParams({ file: path });
  let hash = "";
  if (start) hash = end && end !== start ? `#L${start}-L${end}` : `#L${start}`;
  return `/?${url}${hash}`;
}

const CITATION = /([\w./-]+\.gleam):(\d+)(?:-(\d+))?/g;

/** Answer text with each `path.gleam:12` (or `:12-20`) as a link into the file view. */
export function withCitations(text) {
  const nodes = [];
  let last = 0;
  for (const match of text.matchAll(CITATION)) {
    if (match.index > last) nodes.push(document.createTextNode(text.slice(last, match.index)));
    const end = match[3] ? Number(match[3]) : undefined;
    nodes.push(el("a", { href: fileHref(match[1], Number(match[2]), end), class: "cite" }, match[0]));
    last = match.index + match[0].length;
  }
  if (last < text.length) nodes.push(document.createTextNode(text.slice(last)));
  return nodes;
}

let toastTimer = 0;
export function toast(message) {
  const box = document.getElementById("toast");
  box.textContent = message;
  box.hidden = false;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { box.hidden = true; }, 3500);
}

/** Copy `text`; where the clipboard is refused, show it to copy by hand. */
export async function copy(text, what) {
  try {
    await navigator.clipboard.writeText(text);
    toast(`copied ${what}: ${text}`);
  } catch {
    toast(`${what} (copy it by hand): ${text}`);
  }
}
