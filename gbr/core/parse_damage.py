"""Which top-level nodes of a parsed Gleam file are damaged, and which lines go with them.

A file of which only part fails to parse still has definitions that tree-sitter parsed
intact; the chunker keeps those and drops the rest, and this module says which is which.
A definition is kept only when its whole subtree is free of ERROR and MISSING nodes *and*
no line of it is shared with a dropped node, since a chunk is made of whole lines.

One grammar gap is not damage: the bundled Gleam grammar (tree-sitter-language-pack
0.13.0, and every other packaged grammar measured, see bench/parse_coverage.py) rejects a
type variable in a constant's annotation, `pub const default_config: Config(message) =
Config(..)`, which the compiler accepts (lustre's effect and runtime modules rely on it).
tree-sitter recovers by wrapping just the variable (and its comma) in an ERROR and keeps the
constant whole, so such a constant is read as intact.
"""

from __future__ import annotations

from collections.abc import Sequence

from tree_sitter import Node, Parser, Range

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


def parsed_alone(parser: Parser, content: bytes, node: Node) -> Node | None:
    """The node parsed again on its own, when that parse is intact; None otherwise.

    tree-sitter's recovery from one broken function can leave ERROR nodes in later,
    valid ones (seen on a real edit: `member.status` read as an error three functions
    further down). Parsing just the node's range gives it back whole, with the same
    absolute positions, so only the definitions that are broken in themselves are lost.
    """
    saved = parser.included_ranges
    try:
        parser.included_ranges = [
            Range(node.start_point, node.end_point, node.start_byte, node.end_byte)
        ]
        alone = parser.parse(content).root_node.children
    finally:
        parser.included_ranges = saved
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


def dropped_nodes(nodes: Sequence[Node], bad: Sequence[Node]) -> set[int]:
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


def line_ranges(nodes: Sequence[Node], ids: set[int]) -> tuple[tuple[int, int], ...]:
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


def end_row(node: Node) -> int:
    """Last row a node occupies; comment nodes end at column 0 of the following row."""
    end = node.end_point
    return end.row - 1 if end.column == 0 and end.row > node.start_point.row else end.row
