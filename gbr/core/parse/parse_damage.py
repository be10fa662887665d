"""Which top-level nodes of a parsed Gleam file are damaged, and which lines go with them.

A file of which only part fails to parse still has definitions that tree-sitter parsed
intact; the chunker keeps those and drops the rest, and this module says which is which.
A definition is kept only when its whole subtree is free of ERROR and MISSING nodes *and*
no line of it is shared with a dropped node, since a chunk is made of whole lines.
tree-sitter's recovery can damage or swallow valid definitions next to the real error; those
are parsed again on their own ranges (`parsed_alone`, `salvage`) and kept when intact.

One grammar gap is not damage: the bundled Gleam grammar (tree-sitter-language-pack
0.13.0, and every other packaged grammar measured, see bench/parse_coverage.py) rejects a
type variable in a constant's annotation, `pub const default_config: Config(message) =
Config(..)`, which the compiler accepts (lustre's effect and runtime modules rely on it).
tree-sitter recovers by wrapping just the variable (and its comma) in an ERROR and keeps the
constant whole, so such a constant is read as intact.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tree_sitter import Node, Parser, Point, Range

# What the recovery wraps for a type variable in a constant's annotation: `a` or `a,`.
_TYPE_VARIABLE_TOKENS = {"identifier", ","}
_COMMENT_LIKE = {"statement_comment", "comment", "attribute"}


def is_damaged(node: Node) -> bool:
    """Whether tree-sitter had to recover somewhere inside this top-level node."""
    if node.is_error or node.is_missing:
        return True
    return node.has_error and not is_type_variable_gap(node)


def is_type_variable_gap(node: Node) -> bool:
    """A constant whose only errors are type variables in its annotation (see above)."""
    if node.type != "constant":
        return False
    value_at = next((c.start_byte for c in node.children if c.type == "="), None)
    if value_at is None:
        return False
    errors = _errors_below(node)
    return bool(errors) and all(
        e.is_error
        and e.end_byte <= value_at
        and all(c.type in _TYPE_VARIABLE_TOKENS and not c.has_error for c in e.children)
        for e in errors
    )


# A line that starts a top-level item: `gleam format` writes them at column 0, and code
# inside a definition is indented.
_ITEM_START = re.compile(r"(?:pub |fn |type |const |opaque |@|///)")


@dataclass(frozen=True, slots=True)
class Lost:
    """The stand-in for the part of a damaged node that holds its error: rows left out."""

    start_point: Point
    end_point: Point
    id: int
    type: str = "ERROR"
    has_error: bool = True
    is_error: bool = True
    is_missing: bool = False


def top_level(root: Node) -> list[Node]:
    """The root's children, with the definitions of old `if erlang { ... }` groups inlined."""
    nodes: list[Node] = []
    for node in root.children:
        if node.type == "target_group":
            nodes.extend(c for c in node.named_children if c.type != "target")
        else:
            nodes.append(node)
    return nodes


def salvage(
    parser: Parser,
    content: bytes,
    lines: Sequence[str],
    nodes: Sequence[Node],
    is_bad: Callable[[Node], bool],
) -> list[Any]:
    """The top-level nodes with each run of bad ones replaced by the pieces worth keeping.

    tree-sitter often lets a broken function (or an unclosed brace) swallow the valid
    definitions after it, and may cut the last of them in two nodes. A run of neighbouring
    bad nodes is parsed again as one range; if that is still damaged, then from the first
    line after its start that begins a top-level item at column 0 (as `gleam format`
    writes them), the rest is parsed on its own and treated like a file of its own
    (recursively). The part before that line is kept if it parses intact alone, and is
    otherwise a Lost stand-in for the rows that are left out.
    """
    out: list[Any] = []
    run: list[Node] = []
    for node in [*nodes, None]:
        if node is not None and is_bad(node):
            run.append(node)
            continue
        if run:
            out.extend(_salvage_run(parser, content, lines, run, is_bad))
            run = []
        if node is not None:
            out.append(node)
    return out


def _salvage_run(
    parser: Parser,
    content: bytes,
    lines: Sequence[str],
    run: Sequence[Node],
    is_bad: Callable[[Node], bool],
) -> list[Any]:
    start, end = run[0], run[-1]
    whole = _parse_range(parser, content, start.start_byte, end.end_byte, start.start_point,
                         end.end_point)  # fmt: skip
    if whole and not any(is_bad(n) for n in whole):
        return list(whole)
    first, last = start.start_point.row, end_row(end)
    split = next((r for r in range(first + 1, last + 1) if _ITEM_START.match(lines[r])), None)
    if split is None:
        return list(run)
    at = _row_byte(content, split)
    head = _parse_range(parser, content, start.start_byte, at, start.start_point, Point(split, 0))
    pieces: list[Any] = (
        head
        if head and not any(is_bad(n) for n in head)
        else [Lost(start.start_point, Point(split - 1, 1), -1 - start.start_byte)]
    )
    rest = _parse_range(parser, content, at, end.end_byte, Point(split, 0), end.end_point)
    rest = [parsed_alone(parser, content, n) or n if is_bad(n) else n for n in rest]
    return pieces + salvage(parser, content, lines, rest, is_bad)


def _row_byte(content: bytes, row: int) -> int:
    at = 0
    for _ in range(row):
        at = content.index(b"\n", at) + 1
    return at


def _parse_range(
    parser: Parser, content: bytes, start: int, end: int, start_point: Point, end_point: Point
) -> list[Node]:
    """The top-level nodes of content[start:end] parsed on its own, at their real positions."""
    saved = parser.included_ranges
    try:
        parser.included_ranges = [Range(start_point, end_point, start, end)]
        return top_level(parser.parse(content).root_node)
    finally:
        parser.included_ranges = saved


def parsed_alone(parser: Parser, content: bytes, node: Node) -> Node | None:
    """The node parsed again on its own, when that parse is intact; None otherwise.

    tree-sitter's recovery from one broken function can leave ERROR nodes in later,
    valid ones (seen on a real edit: `member.status` read as an error three functions
    further down). Parsing just the node's range gives it back whole, with the same
    absolute positions, so only the definitions that are broken in themselves are lost.
    """
    alone = _parse_range(
        parser, content, node.start_byte, node.end_byte, node.start_point, node.end_point
    )
    if len(alone) != 1:
        return None
    again = alone[0]
    same = (again.type, again.start_byte, again.end_byte) == (
        node.type,
        node.start_byte,
        node.end_byte,
    )
    return again if same and not is_damaged(again) else None


def _errors_below(node: Node) -> list[Node]:
    """Every ERROR or MISSING node under node (not descending into an ERROR)."""
    found: list[Node] = []
    stack = list(node.children)
    while stack:
        current = stack.pop()
        if current.is_error or current.is_missing:
            found.append(current)
        elif current.has_error:
            stack.extend(current.children)
    return found


def dropped_nodes(nodes: Sequence[Any], bad: Sequence[Any]) -> set[int]:
    """Ids of the nodes to leave out: the bad ones, those sharing a line with a left-out
    node, and the comments and attributes glued directly above a left-out node."""
    dropped = {n.id for n in bad}
    changed = True
    while changed:
        changed = False
        out_rows = [(n.start_point.row, end_row(n)) for n in nodes if n.id in dropped]
        for node in nodes:
            if node.id in dropped:
                continue
            first, last = node.start_point.row, end_row(node)
            if any(first <= b and a <= last for a, b in out_rows):
                dropped.add(node.id)
                changed = True
    # The doc comment and attributes of a left-out definition describe lost code.
    for i, node in enumerate(nodes):
        if node.id not in dropped:
            continue
        above = node.start_point.row
        for lead in reversed(nodes[:i]):
            if lead.type not in _COMMENT_LIKE or end_row(lead) + 1 < above:
                break
            dropped.add(lead.id)
            above = lead.start_point.row
    return dropped


def line_ranges(nodes: Sequence[Any], ids: set[int]) -> tuple[tuple[int, int], ...]:
    """1-based inclusive line ranges of the given nodes, neighbours merged."""
    ranges: list[list[int]] = []
    for node in nodes:
        if node.id not in ids:
            continue
        first, last = node.start_point.row + 1, end_row(node) + 1
        if ranges and first <= ranges[-1][1] + 1:
            ranges[-1][1] = max(ranges[-1][1], last)
        else:
            ranges.append([first, last])
    return tuple((a, b) for a, b in ranges)


def end_row(node: Node | Lost) -> int:
    """Last row a node occupies; comment nodes end at column 0 of the following row."""
    end = node.end_point
    return end.row - 1 if end.column == 0 and end.row > node.start_point.row else end.row
