"""Cut a Gleam source file into chunks that follow its AST.

Each top-level definition becomes one chunk, with the `///` doc, `//` comments and
`@attributes` directly above it. A definition too large for the embedding window is split
at the boundaries of its children (the statements of a function body, the constructors of
a type), never inside one, and each later part carries the parent's signature as a header.
The parts of a node cover its lines exactly once, and no line is in two chunks, so no
source line is lost or doubled. The one exception is size: a part over the character cap
(gbr.core.parse.oversize) is cut into windows of lines, and a single line over it into pieces.

Positions from tree-sitter are rows and *byte* columns; text is always cut from the bytes,
and rows are split on `\\n` only, as tree-sitter counts them (`str.splitlines` would also
split on form feeds and U+2028 and shift every later line).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from tree_sitter import Node, Parser

from gbr.core.parse.oversize import MAX_CHUNK_CHARS, Piece, parse_yielding, span_chars, windows
from gbr.core.parse.parse_damage import (
    Lost,
    dropped_nodes,
    end_row,
    is_damaged,
    is_type_variable_gap,
    line_ranges,
    parsed_alone,
    salvage,
    top_level,
)
from gbr.core.records import Chunk, ChunkKind, FileProblem, PartialFile, SourceFile, Visibility
from gbr.core.telemetry import log

# Bump when the chunks produced for the same source change: the store then re-indexes.
CHUNKER_VERSION = "7"

TokenCounter = Callable[[str], int]

_DEFINITIONS: dict[str, ChunkKind] = {
    "function": "function",
    "type_definition": "type",
    "type_alias": "type_alias",
    "constant": "constant",
    "external_type": "external_type",
    "external_function": "function",
}
_COMMENTS = {"statement_comment", "comment"}
# Nodes that glue onto the definition below them.
_LEADING = {*_COMMENTS, "attribute"}
# Everything else at the top level is something the compiler would reject; the grammar
# is lenient and parses stray expressions there without an ERROR node.
_TOP_LEVEL = {*_DEFINITIONS, *_LEADING, "import", "module_comment"}
_OPENERS = {"(", "[", "{", "#(", "<<"}
_CLOSERS = {")", "]", "}", ">>"}
_SIGNATURE_LIMIT = 240
# Strings and comments, or else a character Gleam never allows outside them.
_NON_ASCII_CODE = re.compile(r'"(?:[^"\\]|\\.)*"?|//[^\n]*|(?P<bad>[^\x00-\x7f])')
_BOM = b"\xef\xbb\xbf"


def new_parser() -> Parser:
    """A fresh Gleam parser; tree-sitter parsers are not shared between threads."""
    from tree_sitter_language_pack import get_parser

    return get_parser("gleam")


@dataclass(frozen=True, slots=True)
class ChunkLimits:
    """The embedding window, in model tokens, that a chunk's text should fit."""

    max_tokens: int = 254  # 256 minus [CLS] and [SEP]


@dataclass(frozen=True, slots=True)
class _Text:
    """The decoded source, by rows as tree-sitter counts them, and its bytes."""

    content: bytes
    lines: list[str]

    def of(self, node: Node) -> str:
        return self.content[node.start_byte : node.end_byte].decode("utf-8", "replace")

    def rows(self, first: int, last: int) -> str:
        return "\n".join(self.lines[first : last + 1])

    def column(self, row: int, byte_column: int) -> int:
        """1-based column in characters, which is what an editor shows."""
        line = self.lines[row] if row < len(self.lines) else ""
        return len(line.encode("utf-8")[:byte_column].decode("utf-8", "replace")) + 1


def chunk_file(
    source: SourceFile,
    parser: Parser,
    count_tokens: TokenCounter,
    limits: ChunkLimits = ChunkLimits(),
    on_tree: Callable[[Node], None] | None = None,
) -> list[Chunk] | PartialFile | FileProblem:
    """Chunks of a file, or the problem that makes it unindexable (never an exception).

    A file with syntax errors gives a PartialFile: the chunks of the definitions that parsed
    intact (see gbr.core.parse.parse_damage), with the first error and the lines left out. When no
    definition survives, the file is a FileProblem (`parse_failed`), dropped whole.
    `on_tree` is handed the parsed root, so the code graph is read from the same parse.
    A file reached through a link out of the package is never quoted in its problem.
    """
    result = _chunk_or_problem(source, parser, count_tokens, limits, on_tree)
    return _unquoted(result) if source.outside else result


def _unquoted(
    result: list[Chunk] | PartialFile | FileProblem,
) -> list[Chunk] | PartialFile | FileProblem:
    """The result with its problem's excerpt left out of the record and of the reason: a
    problem goes to `status`, `events.jsonl` and logs, where a line of a file from outside
    the package (a secret, maybe) has no business (issue 15)."""

    def blank(problem: FileProblem) -> FileProblem:
        if not problem.excerpt:
            return problem
        reason = problem.reason.replace(
            repr(problem.excerpt), "(a file outside the package: not quoted)"
        )
        return replace(problem, excerpt="", reason=reason)

    if isinstance(result, FileProblem):
        return blank(result)
    if isinstance(result, PartialFile):
        return PartialFile(result.chunks, blank(result.problem))
    return result


def _chunk_or_problem(
    source: SourceFile,
    parser: Parser,
    count_tokens: TokenCounter,
    limits: ChunkLimits,
    on_tree: Callable[[Node], None] | None,
) -> list[Chunk] | PartialFile | FileProblem:
    try:
        text = source.content.decode("utf-8")
    except UnicodeDecodeError as exc:
        return invalid_utf8_problem(source.path, source.content, exc)
    # A byte order mark is not Gleam; drop it before parsing so that offsets stay aligned.
    content = source.content.removeprefix(_BOM)
    text = text.removeprefix("\ufeff")
    src = _Text(content, [line.removesuffix("\r") for line in text.split("\n")])
    root = parse_yielding(parser, content).root_node
    if on_tree is not None:
        on_tree(root)
    nodes = top_level(root)
    bad = [n for n in nodes if _is_bad(n)]
    if bad:  # a definition damaged only by recovery from an error elsewhere is kept
        nodes = [_intact(parser, content, n) if n in bad else n for n in nodes]
        bad = [n for n in nodes if _is_bad(n)]
    if root.has_error and not bad and not any(is_type_variable_gap(n) for n in nodes):
        bad = nodes  # an error outside every top-level node: nothing can be trusted
    if not bad:
        return list(_chunks(nodes, src, source, count_tokens, limits))
    problem = _first_problem(source.path, text, src, bad[0])
    if bad is not nodes:  # definitions swallowed by a damaged node are given back
        nodes = salvage(parser, content, src.lines, nodes, _is_bad)
        bad = [n for n in nodes if isinstance(n, Lost) or _is_bad(n)]
    dropped = dropped_nodes(nodes, bad)
    chunks = tuple(_chunks(nodes, src, source, count_tokens, limits, dropped))
    if not any(c.kind != "module" for c in chunks):
        return problem  # no definition survived: the file is dropped whole
    return _partial(problem, chunks, line_ranges(nodes, dropped))


def _is_bad(node: Node) -> bool:
    """Damaged, or something that may not stand at the top level."""
    return node.type not in _TOP_LEVEL or is_damaged(node)


def _intact(parser: Parser, content: bytes, node: Node) -> Node:
    if node.type not in _DEFINITIONS or node.is_error:
        return node
    return parsed_alone(parser, content, node) or node


def _first_problem(path: str, text: str, src: _Text, bad: Node) -> FileProblem:
    """Where the first damaged (or stray) top-level node went wrong."""
    if not bad.has_error and not bad.is_error and not bad.is_missing:
        return _stray_problem(path, bad, src)
    return _non_ascii_problem(path, text, src, bad) or _syntax_problem(path, bad, src)


def _partial(
    problem: FileProblem, chunks: tuple[Chunk, ...], dropped: tuple[tuple[int, int], ...]
) -> PartialFile:
    lines = ", ".join(f"{a}-{b}" if b > a else str(a) for a, b in dropped)
    plural = "s" if len(dropped) > 1 or dropped[0][1] > dropped[0][0] else ""
    reason = f"{problem.reason}; line{plural} {lines} not indexed, the rest is"
    return PartialFile(
        chunks,
        replace(problem, kind="parse_partial", reason=reason, dropped_lines=dropped),
    )


def invalid_utf8_problem(path: str, content: bytes, exc: UnicodeDecodeError) -> FileProblem:
    line_start = content.rfind(b"\n", 0, exc.start) + 1
    line = content.count(b"\n", 0, exc.start) + 1
    column = len(content[line_start : exc.start].decode("utf-8", "replace")) + 1
    line_end = content.find(b"\n", exc.start)
    excerpt = content[line_start : line_end if line_end >= 0 else len(content)]
    return FileProblem(
        path=path,
        kind="invalid_utf8",
        reason=(
            f"invalid UTF-8 at byte {exc.start} (line {line}, column {column}); "
            "save the file as UTF-8"
        ),
        line=line,
        column=column,
        excerpt=excerpt.decode("utf-8", "replace").strip()[:80],
    )


def _syntax_problem(path: str, root: Node, src: _Text) -> FileProblem:
    outer = _first_error(root) or root
    bad = outer
    # An ERROR node can wrap everything from an unclosed `{` to the end of the file; the
    # error nested inside it is where the parser got stuck, which is where to look.
    while bad.is_error:
        nested = _first_error_below(bad)
        if nested is None:
            break
        bad = nested
    row = bad.start_point.row
    col = src.column(row, bad.start_point.column)
    excerpt = src.lines[row].strip()[:80] if row < len(src.lines) else ""
    what = f"missing {bad.type!r}" if bad.is_missing else "syntax error"
    reason = f"{what} at line {row + 1}, column {col}: {excerpt!r}"
    # A bracket left loose in the wrapping ERROR was never closed: name the outermost one.
    openers = (c for c in outer.children if c.type in _OPENERS and c.end_byte <= bad.start_byte)
    opener = next(openers, None) if outer is not bad else None
    if opener is not None:
        o_row = opener.start_point.row
        o_col = src.column(o_row, opener.start_point.column)
        reason += f" (inside the {opener.type!r} at line {o_row + 1}, column {o_col}; unclosed?)"
    return FileProblem(
        path=path,
        kind="parse_failed",
        reason=reason,
        line=row + 1,
        column=col,
        excerpt=excerpt,
    )


def _non_ascii_problem(path: str, text: str, src: _Text, root: Node) -> FileProblem | None:
    """A non-ASCII letter in a name (`fn café`) derails the grammar into an ERROR that
    starts at the definition's first column; the letter itself is the place to look."""
    bad = next((m for m in _NON_ASCII_CODE.finditer(text) if m.group("bad")), None)
    if bad is None:
        return None
    error = _first_error(root) or root
    offset = len(text[: bad.start()].encode("utf-8"))
    if offset >= max(error.end_byte, error.start_byte + 1):
        return None  # the grammar's error comes first
    row = text.count("\n", 0, bad.start())
    col = bad.start() - (text.rfind("\n", 0, bad.start()) + 1) + 1
    excerpt = src.lines[row].strip()[:80]
    return FileProblem(
        path=path,
        kind="parse_failed",
        reason=(
            f"syntax error at line {row + 1}, column {col}: non-ASCII character "
            f"{bad.group()!r} outside a string or comment: {excerpt!r}"
        ),
        line=row + 1,
        column=col,
        excerpt=excerpt,
    )


def _first_error(node: Node) -> Node | None:
    """The earliest ERROR or missing node, which is where a person should look."""
    if node.is_error or node.is_missing:
        return node
    found = _first_error_below(node)
    if found is not None:
        return found
    # A missing token the grammar inlines leaves only `has_error` on its parent.
    return node if node.has_error else None


def _first_error_below(node: Node) -> Node | None:
    for child in node.children:
        if child.is_error or child.is_missing:
            return child
        if child.has_error:
            return _first_error(child)
    return None


def _stray_problem(path: str, node: Node, src: _Text) -> FileProblem:
    row = node.start_point.row
    col = src.column(row, node.start_point.column)
    excerpt = src.lines[row].strip()[:80]
    return FileProblem(
        path=path,
        kind="parse_failed",
        reason=(
            f"syntax error at line {row + 1}, column {col}: {excerpt!r} "
            "(only imports, definitions and comments may stand at the top level)"
        ),
        line=row + 1,
        column=col,
        excerpt=excerpt,
    )


@dataclass(slots=True)
class _Group:
    """One definition (or several sharing a line), with the lines glued above it."""

    nodes: list[Node]
    leading: list[Node]
    start: int  # 0-based rows, inclusive
    end: int


def _chunks(
    nodes: list[Node],
    src: _Text,
    source: SourceFile,
    count_tokens: TokenCounter,
    limits: ChunkLimits,
    dropped: set[int] | None = None,
) -> Iterator[Chunk]:
    """The chunks of the top-level nodes; `dropped` ids are left out and glue nothing."""
    dropped = dropped or set()
    module_span = _module_head(nodes, dropped)
    if module_span is not None:
        yield from _module_chunks(module_span, src, source, count_tokens, limits)
    covered = end_row(module_span[-1]) if module_span else -1  # last row already chunked

    groups: list[_Group] = []
    leading: list[Node] = []
    for node in nodes:
        if node.type in _LEADING and node.id not in dropped:
            leading.append(node)
            continue
        if node.type not in _DEFINITIONS or node.id in dropped:
            leading = []  # an import, a module comment or lost code breaks the glue
            continue
        # A comment that ends the previous chunk's last line stays with that chunk.
        attached = [n for n in _contiguous_above(leading, node) if n.start_point.row > covered]
        leading = []
        if groups and node.start_point.row <= groups[-1].end:
            # Two definitions on one line: one chunk, since a line is never split.
            groups[-1].nodes.append(node)
            groups[-1].end = max(groups[-1].end, end_row(node))
        else:
            start = attached[0].start_point.row if attached else node.start_point.row
            groups.append(_Group([node], attached, start, end_row(node)))
        covered = groups[-1].end
    for group in groups:
        yield from _definition_chunks(group, src, source, count_tokens, limits)


def _module_head(nodes: list[Node], dropped: set[int]) -> list[Node] | None:
    """The module doc and imports above the first definition: the first stretch of them
    that no left-out node interrupts (a broken first line does not hide the imports)."""
    start = 0
    for i, node in enumerate([*nodes, None]):
        if node is not None and node.type not in _DEFINITIONS and node.id not in dropped:
            continue
        row = node.start_point.row if node is not None else None
        span = _module_span(nodes[start:i], row)
        if span is not None or node is None or node.id not in dropped:
            return span
        start = i + 1
    return None


def _contiguous_above(leading: list[Node], node: Node) -> list[Node]:
    """The leading nodes with no blank line between them and the definition."""
    kept: list[Node] = []
    next_row = node.start_point.row
    for lead in reversed(leading):
        if end_row(lead) + 1 < next_row:
            break
        kept.append(lead)
        next_row = lead.start_point.row
    kept.reverse()
    return kept


def _module_span(head: Sequence[Node], first_def_row: int | None) -> list[Node] | None:
    """The module doc and imports above the first definition, if there are any."""
    nodes = list(head)
    # Leading comments of the first definition belong to it, not to the module chunk, and
    # so does a line it shares with an import.
    while nodes and (
        nodes[-1].type in _LEADING
        or (first_def_row is not None and end_row(nodes[-1]) >= first_def_row)
    ):
        nodes.pop()
    if not any(n.type in ("module_comment", "import") for n in nodes):
        return None
    return nodes


def _module_chunks(
    head: list[Node],
    src: _Text,
    source: SourceFile,
    count_tokens: TokenCounter,
    limits: ChunkLimits,
) -> Iterator[Chunk]:
    """The module doc and imports, so that "what does module X do" has a chunk to find."""
    start, end = head[0].start_point.row, end_row(head[-1])
    doc = _doc(head, src, "module_comment", "////")
    signature = f"module {source.module}"
    spans = [(start, end)]
    if _over(src, start, end, count_tokens, limits.max_tokens):
        # Cut between paragraphs of the module doc and between imports.
        paragraphs: list[list[Node]] = []
        for i, n in enumerate(head):
            if i == 0 or _blank_module_comment(head[i - 1], src) or n.type != "module_comment":
                paragraphs.append([n])
            else:
                paragraphs[-1].append(n)
        ranges = [(p[0].start_point.row, end_row(p[-1])) for p in paragraphs]
        units = _units(ranges, start, end)
        spans = _pack(units, src, count_tokens, _budget(signature, count_tokens, limits))
    yield from _parts(source, src, spans, "module", source.module, signature, "pub", doc)


def _parts(
    source: SourceFile,
    src: _Text,
    spans: Sequence[tuple[int, int]],
    kind: ChunkKind,
    name: str,
    signature: str,
    visibility: Visibility,
    doc: str,
) -> Iterator[Chunk]:
    """One chunk per span of a node; later parts carry the signature as their header.

    A span over the character cap is cut into windows of lines (see gbr.core.parse.oversize).
    """
    pieces: list[Piece] = []
    for first, last in spans:
        if span_chars(src.lines, first, last) <= MAX_CHUNK_CHARS:
            pieces.append((first, last, src.rows(first, last)))
            continue
        cut = windows(src.lines, first, last)
        log().info(
            "chunk_cut",
            file=source.path,
            name=name,
            start_line=first + 1,
            end_line=last + 1,
            parts=len(cut),
            reason=f"over {MAX_CHUNK_CHARS} characters with no smaller child to split at",
        )
        pieces.extend(cut)
    for part, (first, last, text) in enumerate(pieces):
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
            parts=len(pieces),
            doc=doc,
            text=text,
            header=signature if part > 0 else "",
        )


def _blank_module_comment(node: Node, src: _Text) -> bool:
    return node.type == "module_comment" and not _comment_text(node, src, "////")


def _comment_text(node: Node, src: _Text, marker: str) -> str:
    return src.of(node).strip().removeprefix(marker).strip()


def _doc(nodes: Sequence[Node], src: _Text, node_type: str, marker: str) -> str:
    """The text of the doc comments, markers stripped, on one line."""
    texts = (_comment_text(n, src, marker) for n in nodes if n.type == node_type)
    return " ".join(t for t in texts if t)


def _definition_chunks(
    group: _Group,
    src: _Text,
    source: SourceFile,
    count_tokens: TokenCounter,
    limits: ChunkLimits,
) -> Iterator[Chunk]:
    node = group.nodes[0]
    kind = _DEFINITIONS[node.type]
    name = _name(node, src)
    signature = _signature(node, src)
    doc = _doc(group.leading, src, "statement_comment", "///")
    visibility: Visibility = (
        "pub" if any(c.type == "visibility_modifier" for c in node.children) else "private"
    )
    spans = _split_spans(group, src, signature, count_tokens, limits)
    yield from _parts(source, src, spans, kind, name, signature, visibility, doc)


def _name(node: Node, src: _Text) -> str:
    named = node.child_by_field_name("name")
    if named is None or named.type == "type_name":
        type_name = named or next((c for c in node.children if c.type == "type_name"), None)
        if type_name is not None:
            named = next((c for c in type_name.children if c.type == "type_identifier"), type_name)
    if named is None:
        return "?"
    return src.of(named)


def _signature(node: Node, src: _Text) -> str:
    """The node's text up to its body, on one line, as `gleam format` would write it."""
    body = node.child_by_field_name("body")
    if body is None and node.type == "type_definition":
        body = next((c for c in node.children if c.type == "{"), None)
    stop = body.start_byte if body is not None else node.end_byte
    tokens = _enough(_tokens(node, stop, src))
    out: list[str] = []
    for i, (text, gap) in enumerate(tokens):
        following = tokens[i + 1][0] if i + 1 < len(tokens) else ""
        if text == "," and following in _CLOSERS:
            continue  # the trailing comma of a parameter list written one per line
        if out and gap and out[-1] not in _OPENERS and text not in _CLOSERS and text != ",":
            out.append(" ")
        out.append(text)
    signature = "".join(out)
    if len(signature) > _SIGNATURE_LIMIT:
        signature = signature[: _SIGNATURE_LIMIT - 1] + "…"
    return signature


_LITERALS = {"string", "integer", "float"}


def _enough(tokens: Iterator[tuple[str, bool]]) -> list[tuple[str, bool]]:
    """The leading tokens that can show in a signature cut at _SIGNATURE_LIMIT characters.

    A constant has no body, so its "signature" walks its whole value: for a 4.7 MB list
    that was a million tokens. Twice the limit leaves room for the commas dropped later.
    """
    out: list[tuple[str, bool]] = []
    size = 0
    for text, gap in tokens:
        out.append((text, gap))
        size += len(text) if text != "," else 0
        if size > 2 * _SIGNATURE_LIMIT:
            break
    return out


def _tokens(node: Node, stop: int, src: _Text) -> Iterator[tuple[str, bool]]:
    """The leaf tokens of node that start before byte `stop`, comments left out, each with
    whether whitespace stood before it. A string literal is one token, kept verbatim."""
    prev_end: int | None = None
    stack = [node]
    while stack:
        current = stack.pop()
        if current.start_byte >= stop or current.type in _COMMENTS:
            continue
        # Literals are leaves: `-1` is an `integer` whose only child is the `-`.
        if current.child_count and current.type not in _LITERALS:
            stack.extend(reversed(current.children))
            continue
        text = src.of(current)
        if not text:
            continue
        gap = prev_end is not None and current.start_byte > prev_end
        prev_end = current.end_byte
        yield " ".join(text.split("\n")) if current.type == "string" else text, gap


def _split_spans(
    group: _Group,
    src: _Text,
    signature: str,
    count_tokens: TokenCounter,
    limits: ChunkLimits,
) -> list[tuple[int, int]]:
    """Line spans (0-based, inclusive) of the parts: one span unless the node is too big."""
    start, end = group.start, group.end
    if not _over(src, start, end, count_tokens, limits.max_tokens):
        return [(start, end)]
    items = [c for n in group.nodes for c in _split_children(n) if c.type not in _COMMENTS]
    groups = _row_groups(items)
    if len(groups) < 2:
        # One indivisible child: kept whole (the embedder truncates), or cut into line
        # windows by _parts when it is over the character cap.
        return [(start, end)]
    units = _units(groups, start, end)
    return _pack(units, src, count_tokens, _budget(signature, count_tokens, limits))


def _over(src: _Text, first: int, last: int, count_tokens: TokenCounter, budget: int) -> bool:
    """Whether rows first..last exceed `budget` tokens.

    A text of fewer UTF-8 bytes than the budget is not tokenized: every token covers at
    least one byte (a sentencepiece model may add one leading piece, hence fewer rather
    than as many), so it cannot be over. Tokenizing was most of the time to chunk a file.
    """
    if span_chars(src.lines, first, last) > MAX_CHUNK_CHARS:
        return True
    text = src.rows(first, last)
    if len(text) < budget and len(text.encode()) < budget:
        return False
    return count_tokens(text) > budget


def _span_tokens(src: _Text, first: int, last: int, count_tokens: TokenCounter, budget: int) -> int:
    """The tokens of rows first..last; `budget + 1` for a span over the character cap,
    which is over without tokenizing it (counting a 10 MB function alone took hundreds of
    MB)."""
    if span_chars(src.lines, first, last) > MAX_CHUNK_CHARS:
        return budget + 1
    return count_tokens(src.rows(first, last))


def _budget(signature: str, count_tokens: TokenCounter, limits: ChunkLimits) -> int:
    """Tokens left for a part's text once the signature header is repeated above it."""
    return max(limits.max_tokens - count_tokens(signature), limits.max_tokens // 2)


def _pack(
    units: list[tuple[int, int]], src: _Text, count_tokens: TokenCounter, budget: int
) -> list[tuple[int, int]]:
    """Greedily merge neighbouring units while they fit the budget.

    Tokens of whole lines add up: the tokenizer splits on whitespace, and units meet at
    line breaks.
    """
    unit_tokens = [_span_tokens(src, a, b, count_tokens, budget) for a, b in units]
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


def _row_groups(items: list[Node]) -> list[tuple[int, int]]:
    """Row ranges of the items, those sharing a row merged, since a cut never splits a line."""
    groups: list[list[int]] = []
    for item in items:
        first, last = item.start_point.row, end_row(item)
        if groups and first <= groups[-1][1]:
            groups[-1][1] = max(groups[-1][1], last)
        else:
            groups.append([first, last])
    return [(a, b) for a, b in groups]


def _units(groups: list[tuple[int, int]], start: int, end: int) -> list[tuple[int, int]]:
    """Contiguous line ranges covering start..end, one per group of children.

    Lines between children (blank lines, comments) go with the child below them; the
    node's head goes with the first child and its closing lines with the last.
    """
    units: list[tuple[int, int]] = []
    cursor = start
    for i, (_, last) in enumerate(groups):
        unit_end = end if i == len(groups) - 1 else last
        units.append((cursor, unit_end))
        cursor = unit_end + 1
    return units
