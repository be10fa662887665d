"""Gleam source as lines of classed segments, for the web page's file view.

The page draws code from these segments with `textContent`, so nothing from a file is ever
parsed as HTML there; this module only decides which class each stretch of text gets. It
reads the tree-sitter tree gbr already parses with, so the colours follow the grammar the
index follows: a string is a string even when it holds `//` or `<script>`.

Every line comes back whole: the texts of its segments joined are the line exactly (tabs,
spaces and all), so the view can never drop or double a character. Columns are 1-based
and count characters, as gbr.core.graph positions do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

# The classes the page's stylesheet knows; one short word each.
COMMENT = "comment"
DOC = "doc"
STRING = "string"
NUMBER = "number"
KEYWORD = "keyword"
TYPE = "type"
FUNCTION = "function"
MODULE = "module"
ATTRIBUTE = "attribute"
OPERATOR = "operator"
CLASSES = (COMMENT, DOC, STRING, NUMBER, KEYWORD, TYPE, FUNCTION, MODULE, ATTRIBUTE, OPERATOR)

# Whole nodes drawn in one class, without looking inside.
_WHOLE = {
    "comment": COMMENT,
    "statement_comment": DOC,
    "module_comment": DOC,
    "string": STRING,
    "integer": NUMBER,
    "float": NUMBER,
    "attribute": ATTRIBUTE,
    "module": MODULE,
    "visibility_modifier": KEYWORD,
    "opacity_modifier": KEYWORD,
}
_NAMED_LEAVES = {"type_identifier": TYPE, "constructor_name": TYPE, "type_var": TYPE}
# Identifiers that name a function where they stand: a definition or the callee of a call.
_FUNCTION_PARENTS = {"function", "external_function", "function_call"}
_OPERATORS = {"|>", "->", "<-", "<>", "==", "!=", "&&", "||", "..", "<=", ">=", "+.", "-."}
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_QUALIFIED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?")


class SyntaxNode(Protocol):
    """The part of a tree-sitter Node read here (a Protocol keeps this module typed)."""

    @property
    def type(self) -> str: ...
    @property
    def is_named(self) -> bool: ...
    @property
    def start_byte(self) -> int: ...
    @property
    def end_byte(self) -> int: ...
    @property
    def children(self) -> Sequence[SyntaxNode]: ...
    @property
    def parent(self) -> SyntaxNode | None: ...


@dataclass(frozen=True, slots=True)
class Span:
    """Bytes [start, end) of the file drawn in class `kind`."""

    start: int
    end: int
    kind: str


@dataclass(frozen=True, slots=True)
class Link:
    """A name at (line, col) that the code graph knows: it points at `target`."""

    line: int
    col: int
    target: str


Segment = list[str]  # [text, class] or [text, class, target]; class "" is plain text


def spans(root: SyntaxNode, content: bytes) -> list[Span]:
    """The classed stretches of the file, in order and never overlapping."""
    found: list[Span] = []
    stack = [root]
    while stack:
        node = stack.pop()
        kind = _class_of(node, content)
        if kind is not None:
            if node.end_byte > node.start_byte:
                found.append(Span(node.start_byte, node.end_byte, kind))
            continue
        stack.extend(reversed(node.children))
    found.sort(key=lambda s: s.start)
    return _without_overlaps(found)


def _class_of(node: SyntaxNode, content: bytes) -> str | None:
    kind = _WHOLE.get(node.type)
    if kind is not None:
        return kind
    if node.children:
        return None
    if node.type in _NAMED_LEAVES:
        return _NAMED_LEAVES[node.type]
    parent = node.parent
    if node.type == "identifier" and parent is not None and parent.type in _FUNCTION_PARENTS:
        return FUNCTION
    if node.type == "label" and parent is not None and parent.type == "field_access":
        grand = parent.parent
        return FUNCTION if grand is not None and grand.type == "function_call" else None
    if node.is_named:
        return None
    text = content[node.start_byte : node.end_byte].decode("utf-8", "replace")
    if _WORD.fullmatch(text):
        return KEYWORD
    return OPERATOR if text in _OPERATORS else None


def _without_overlaps(found: list[Span]) -> list[Span]:
    kept: list[Span] = []
    for span in found:
        if kept and span.start < kept[-1].end:
            continue  # an inner span of one already kept (the grammar's nesting)
        kept.append(span)
    return kept


def lines(content: bytes, found: Iterable[Span], links: Iterable[Link] = ()) -> list[list[Segment]]:
    """Each line of the file (split on `\\n`, as tree-sitter counts rows) as segments.

    `content` must be UTF-8 (a UnicodeDecodeError otherwise): the caller says so to a person.
    A link covers the name at its position, qualified or not (`isbn.is_valid`), and splits
    whatever segments it overlaps; the pieces keep their classes.
    """
    text = content.decode("utf-8")
    rows = text.split("\n")
    classes = _char_classes(content, text, found)
    targets = _char_targets(rows, links)
    result: list[list[Segment]] = []
    offset = 0
    for number, row in enumerate(rows, start=1):
        row_targets = targets.get(number, {})
        result.append(list(_segments(row, classes[offset : offset + len(row)], row_targets)))
        offset += len(row) + 1
    return result


def _char_classes(content: bytes, text: str, found: Iterable[Span]) -> list[str]:
    """The class of each character of `text` ("" for plain)."""
    classes = [""] * len(text)
    starts: list[int] = []  # the character at each byte offset
    for index, char in enumerate(text):
        starts.extend([index] * len(char.encode("utf-8", "surrogatepass")))
    starts.extend([len(text)] * (len(content) + 1 - len(starts)))
    for span in found:
        first, last = starts[min(span.start, len(content))], starts[min(span.end, len(content))]
        classes[first:last] = [span.kind] * (last - first)
    return classes


def _char_targets(rows: Sequence[str], links: Iterable[Link]) -> dict[int, dict[int, str]]:
    """{line: {0-based column: target}} for every character a link covers."""
    targets: dict[int, dict[int, str]] = {}
    for link in links:
        if not 1 <= link.line <= len(rows):
            continue
        row = rows[link.line - 1]
        match = _QUALIFIED.match(row, link.col - 1)
        if match is None:
            continue
        line = targets.setdefault(link.line, {})
        for col in range(match.start(), match.end()):
            line.setdefault(col, link.target)
    return targets


def _segments(row: str, classes: Sequence[str], targets: dict[int, str]) -> Iterator[Segment]:
    start = 0
    for end in range(1, len(row) + 1):
        if end < len(row) and (classes[end], targets.get(end)) == (
            classes[start],
            targets.get(start),
        ):
            continue
        target = targets.get(start)
        piece = [row[start:end], classes[start]]
        yield [*piece, target] if target else piece
        start = end
