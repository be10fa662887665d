"""Cut a Gleam source file into chunks that follow its AST.

Each top-level definition becomes one chunk, with the `///` doc, `//` comments and
`@attributes` directly above it. A definition too large for the embedding window is split
at the boundaries of its children (the statements of a function body, the constructors of
a type), never inside one, and each later part carries the parent's signature as a header.
The parts of a node cover its lines exactly once, so no source line is lost or doubled.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from tree_sitter import Node, Parser

from gbr.core.records import Chunk, ChunkKind, FileProblem, SourceFile

# Bump when the chunks produced for the same source change: the store then re-indexes.
CHUNKER_VERSION = "3"

TokenCounter = Callable[[str], int]

_DEFINITIONS: dict[str, ChunkKind] = {
    "function": "function",
    "type_definition": "type",
    "type_alias": "type_alias",
    "constant": "constant",
    "external_type": "external_type",
    "external_function": "function",
}
# Nodes that glue onto the definition below them.
_LEADING = {"statement_comment", "comment", "attribute"}
_SIGNATURE_LIMIT = 240


def new_parser() -> Parser:
    """A fresh Gleam parser; tree-sitter parsers are not shared between threads."""
    from tree_sitter_language_pack import get_parser

    return get_parser("gleam")


@dataclass(frozen=True, slots=True)
class ChunkLimits:
    """The embedding window, in model tokens, that a chunk's text should fit."""

    max_tokens: int = 254  # 256 minus [CLS] and [SEP]


def chunk_file(
    source: SourceFile,
    parser: Parser,
    count_tokens: TokenCounter,
    limits: ChunkLimits = ChunkLimits(),
) -> list[Chunk] | FileProblem:
    """Chunks of a file, or the problem that makes it unindexable (never an exception)."""
    try:
        text = source.content.decode("utf-8")
    except UnicodeDecodeError as exc:
        return invalid_utf8_problem(source.path, source.content, exc)
    tree = parser.parse(source.content)
    root = tree.root_node
    if root.has_error:
        return _syntax_problem(source.path, root, text)
    lines = text.splitlines()
    return list(_chunks(root, lines, source, count_tokens, limits))


def invalid_utf8_problem(path: str, content: bytes, exc: UnicodeDecodeError) -> FileProblem:
    line = content.count(b"\n", 0, exc.start) + 1
    return FileProblem(
        path=path,
        kind="invalid_utf8",
        reason=f"invalid UTF-8 at byte {exc.start} (line {line}); save the file as UTF-8",
        line=line,
    )


def _syntax_problem(path: str, root: Node, text: str) -> FileProblem:
    bad = _first_error(root) or root
    row, col = bad.start_point.row, bad.start_point.column
    lines = text.splitlines()
    excerpt = lines[row].strip()[:80] if row < len(lines) else ""
    what = f"missing {bad.type!r}" if bad.is_missing else "syntax error"
    return FileProblem(
        path=path,
        kind="parse_failed",
        reason=f"{what} at line {row + 1}, column {col + 1}: {excerpt!r}",
        line=row + 1,
        column=col + 1,
        excerpt=excerpt,
    )


def _first_error(node: Node) -> Node | None:
    """The earliest ERROR or missing node, which is where a person should look."""
    if node.type == "ERROR" or node.is_missing:
        return node
    for child in node.children:
        if child.has_error or child.is_missing:
            found = _first_error(child)
            if found is not None:
                return found
    return None


def _chunks(
    root: Node,
    lines: list[str],
    source: SourceFile,
    count_tokens: TokenCounter,
    limits: ChunkLimits,
) -> Iterator[Chunk]:
    children = root.children
    first_def = next((i for i, n in enumerate(children) if n.type in _DEFINITIONS), None)
    yield from _module_chunk(children[:first_def], lines, source)

    leading: list[Node] = []
    for node in children:
        if node.type in _LEADING:
            leading.append(node)
            continue
        if node.type not in _DEFINITIONS:
            leading = []  # an import or module comment breaks the glue
            continue
        attached = _contiguous_above(leading, node)
        leading = []
        yield from _definition_chunks(node, attached, lines, source, count_tokens, limits)


def _contiguous_above(leading: list[Node], node: Node) -> list[Node]:
    """The leading nodes with no blank line between them and the definition."""
    kept: list[Node] = []
    next_row = node.start_point.row
    for lead in reversed(leading):
        if _end_row(lead) + 1 < next_row:
            break
        kept.append(lead)
        next_row = lead.start_point.row
    kept.reverse()
    return kept


def _end_row(node: Node) -> int:
    """Last row a node occupies; comment nodes end at column 0 of the following row."""
    end = node.end_point
    return end.row - 1 if end.column == 0 and end.row > node.start_point.row else end.row


def _module_chunk(head: Sequence[Node], lines: list[str], source: SourceFile) -> Iterator[Chunk]:
    """The module doc and imports, so that "what does module X do" has a chunk to find."""
    if not any(n.type in ("module_comment", "import") for n in head):
        return
    # Leading comments of the first definition belong to it, not to the module chunk.
    while head and head[-1].type in _LEADING:
        head = head[:-1]
    if not head:
        return
    start, end = head[0].start_point.row, _end_row(head[-1])
    doc = " ".join(
        _comment_text(n, lines, "////") for n in head if n.type == "module_comment"
    ).strip()
    yield Chunk(
        path=source.path,
        module=source.module,
        package=source.package,
        kind="module",
        name=source.module,
        signature=f"module {source.module}",
        visibility="pub",
        start_line=start + 1,
        end_line=end + 1,
        part=0,
        parts=1,
        doc=doc,
        text="\n".join(lines[start : end + 1]),
    )


def _comment_text(node: Node, lines: list[str], marker: str) -> str:
    row = node.start_point.row
    return lines[row].strip().removeprefix(marker).strip() if row < len(lines) else ""


def _definition_chunks(
    node: Node,
    leading: list[Node],
    lines: list[str],
    source: SourceFile,
    count_tokens: TokenCounter,
    limits: ChunkLimits,
) -> Iterator[Chunk]:
    kind = _DEFINITIONS[node.type]
    start = leading[0].start_point.row if leading else node.start_point.row
    end = _end_row(node)
    name = _name(node, lines)
    signature = _signature(node, lines)
    doc = " ".join(
        _comment_text(n, lines, "///") for n in leading if n.type == "statement_comment"
    ).strip()
    visibility = "pub" if any(c.type == "visibility_modifier" for c in node.children) else "private"
    spans = _split_spans(node, start, end, lines, signature, count_tokens, limits)
    for part, (first, last) in enumerate(spans):
        yield Chunk(
            path=source.path,
            module=source.module,
            package=source.package,
            kind=kind,
            name=name,
            signature=signature,
            visibility=visibility,
            start_line=first + 1,
            end_line=last + 1,
            part=part,
            parts=len(spans),
            doc=doc,
            text="\n".join(lines[first : last + 1]),
            header=signature if part > 0 else "",
        )


def _name(node: Node, lines: list[str]) -> str:
    named = node.child_by_field_name("name")
    if named is None:
        type_name = next((c for c in node.children if c.type == "type_name"), None)
        if type_name is not None:
            named = next((c for c in type_name.children if c.type == "type_identifier"), type_name)
    if named is None:
        return "?"
    return _node_text(named, lines)


def _node_text(node: Node, lines: list[str]) -> str:
    (r0, c0), (r1, c1) = node.start_point, node.end_point
    if r0 == r1:
        return lines[r0][c0:c1]
    return "\n".join([lines[r0][c0:], *lines[r0 + 1 : r1], lines[r1][:c1]])


def _signature(node: Node, lines: list[str]) -> str:
    """The node's text up to its body, on one line: what a person reads first."""
    body = node.child_by_field_name("body")
    if body is None and node.type == "type_definition":
        body = next((c for c in node.children if c.type == "{"), None)
    if body is not None:
        (r0, c0), (r1, c1) = node.start_point, body.start_point
        parts = [lines[r0][c0:]] if r0 != r1 else [lines[r0][c0:c1]]
        if r1 != r0:
            parts += [*lines[r0 + 1 : r1], lines[r1][:c1]]
        text = " ".join(parts)
    else:
        text = _node_text(node, lines)
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r"\( ", "(", re.sub(r" \)", ")", text)).removesuffix(",")
    if len(text) > _SIGNATURE_LIMIT:
        text = text[: _SIGNATURE_LIMIT - 1] + "…"
    return text


def _split_spans(
    node: Node,
    start: int,
    end: int,
    lines: list[str],
    signature: str,
    count_tokens: TokenCounter,
    limits: ChunkLimits,
) -> list[tuple[int, int]]:
    """Line spans (0-based, inclusive) of the parts: one span unless the node is too big."""
    whole = "\n".join(lines[start : end + 1])
    if count_tokens(whole) <= limits.max_tokens:
        return [(start, end)]
    items = _split_children(node)
    if len(items) < 2:
        return [(start, end)]  # one indivisible child: keep it whole, the embedder truncates
    units = _units(items, start, end)
    unit_tokens = [count_tokens("\n".join(lines[a : b + 1])) for a, b in units]
    budget = max(limits.max_tokens - count_tokens(signature), limits.max_tokens // 2)
    spans: list[tuple[int, int]] = []
    cur_start, cur_end, cur_tokens = units[0][0], units[0][1], unit_tokens[0]
    for (a, b), tokens in zip(units[1:], unit_tokens[1:], strict=True):
        if cur_tokens + tokens > budget:
            spans.append((cur_start, cur_end))
            cur_start, cur_tokens = a, 0
        cur_end = b
        cur_tokens += tokens
    spans.append((cur_start, cur_end))
    return spans


def _split_children(node: Node) -> list[Node]:
    """The children a node may be cut between: body statements or type constructors."""
    if node.type == "function":
        body = node.child_by_field_name("body")
        return list(body.named_children) if body is not None else []
    if node.type == "type_definition":
        ctors = next((c for c in node.children if c.type == "data_constructors"), None)
        return list(ctors.named_children) if ctors is not None else []
    return []


def _units(items: list[Node], start: int, end: int) -> list[tuple[int, int]]:
    """Contiguous line ranges covering start..end, one per group of children.

    Children that share a line are one unit, since a cut between them would cut a line.
    Lines between children (blank lines, comments) go with the child below them; the
    node's head goes with the first child and its closing lines with the last.
    """
    groups: list[list[int]] = []
    for item in items:
        first, last = item.start_point.row, _end_row(item)
        if groups and first <= groups[-1][1]:
            groups[-1][1] = max(groups[-1][1], last)
        else:
            groups.append([first, last])
    units: list[tuple[int, int]] = []
    cursor = start
    for i, (_, last) in enumerate(groups):
        unit_end = end if i == len(groups) - 1 else last
        units.append((cursor, unit_end))
        cursor = unit_end + 1
    return units
