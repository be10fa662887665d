"""The references inside one top-level definition, found by walking its syntax tree.

The walk keeps the set of local names bound at each point (parameters, `let` and `use`
bindings, case patterns), so that a local never resolves to a top-level definition of the
same spelling: in `fn f(map) { map }` the body reads the parameter, not a function `map`.
A `let` binds for the statements after it, not for its own value (`let x = x + 1`).

A local with a module alias's spelling is subtler: the compiler reads `x.f` as a record
field first and falls back to the module, so `result.try(…)` calls gleam/result even inside
`fn f(result: Result(a, b))` (seen in squirrel), while `request.body` with a local `request`
is the local's field. Without types we keep that split by use: a called `alias.f` is the
module's, a read one is the local's.

The walk is iterative (an explicit stack): a pipeline of a thousand steps is a left-nested
tree a thousand levels deep, which would overflow Python's recursion limit.
"""

from __future__ import annotations

from collections.abc import Iterator

from tree_sitter import Node

from gbr.core.graph.model import RefKind
from gbr.core.graph.scope import FileScope, Target

Found = tuple[Node, RefKind, Target]  # the name's node, how it is used, what it is

_EXPR, _PATTERN = 0, 1
# Nodes that never hold a reference (literals, comments, labels, definition names).
_INERT = frozenset(
    {"label", "string", "integer", "float", "comment", "statement_comment", "module_comment"}
    | {"discard", "hole", "type_var", "type_name", "type_parameters", "visibility_modifier"}
    | {"opacity_modifier", "attribute", "external_function_body", "ERROR"}
)
# Subtrees of a pattern or a parameter list whose identifiers bind nothing.
_NOT_BINDING = frozenset(
    {"type", "function_type", "tuple_type", "remote_type_identifier"}
    | {"remote_constructor_name", "bit_string_segment_options"}
)
_BINDS = {"let": "pattern", "let_assert": "pattern", "use": "assignments"}
# Operators the compiler binds looser than `|>` (concatenation, comparison, boolean).
_LOOSER_THAN_PIPE = frozenset(
    {"<>", "==", "!=", "<", ">", "<=", ">=", "<.", ">.", "<=.", ">=.", "&&", "||"}
)
# Every node type the walk treats in its own way (the hot loop tests this set first).
_SPECIAL = _INERT | frozenset(
    {"identifier", "type_identifier", "constructor_name", "remote_type_identifier"}
    | {"remote_constructor_name", "field_access", "function", "anonymous_function"}
    | {"external_function", "block", "function_call", "binary_expression", "case_clause"}
    | {"constant", "data_constructor", "argument", *_BINDS}
)


def walk(top: Node, names: FileScope, text: bytes) -> Iterator[Found]:
    """Every resolved reference under `top`, in no particular order."""
    stack: list[tuple[Node, frozenset[str], int, RefKind]] = [(top, frozenset(), _EXPR, "value")]
    while stack:
        node, scope, mode, kind = stack.pop()
        kind_of = node.type
        if kind_of not in _SPECIAL:  # most nodes: only their children matter
            stack.extend([(c, scope, mode, "value") for c in node.named_children])
            continue
        if kind_of in _INERT:
            continue
        if kind_of == "argument" and mode == _EXPR:
            # `f(name:)` is short for `f(name: name)`: the label is also a name read.
            label = node.child_by_field_name("label")
            shorthand = node.child_by_field_name("value") is None
            if (
                label is not None
                and shorthand
                and (hit := _read(node_text(label, text), scope, names, "value"))
            ):
                yield label, hit[1], hit[0]
            stack.extend([(c, scope, mode, "value") for c in node.named_children])
            continue
        if kind_of == "identifier":
            if mode == _EXPR and (hit := _read(node_text(node, text), scope, names, kind)):
                yield node, hit[1], hit[0]
            continue
        if kind_of == "type_identifier":
            if target := names.type(node_text(node, text)):
                yield node, "type", target
            continue
        if kind_of == "constructor_name":
            if target := names.constructor(node_text(node, text)):
                yield node, "constructor", target
            continue
        if kind_of in ("remote_type_identifier", "remote_constructor_name"):
            if found := _qualified(node, names, text, frozenset()):
                ref_kind: RefKind = "type" if kind_of == "remote_type_identifier" else "constructor"
                yield found[0], ref_kind, found[1]
            continue
        if kind_of == "field_access" and mode == _EXPR:
            # A called `alias.name` is the module's even where a local has the alias's
            # spelling (see the module docstring); read as a value, the local's field.
            if found := _qualified(node, names, text, scope if kind == "value" else frozenset()):
                yield found[0], kind, found[1]
            elif (record := node.child_by_field_name("record")) is not None:
                stack.append((record, scope, _EXPR, "value"))
            continue
        stack.extend(_children(node, scope, mode, kind, text))


def _children(
    node: Node, scope: frozenset[str], mode: int, kind: RefKind, text: bytes
) -> list[tuple[Node, frozenset[str], int, RefKind]]:
    """What to visit under a node, each with the locals in scope there and how it is used."""
    kind_of = node.type
    if kind_of in ("function", "anonymous_function", "external_function"):
        params = node.child_by_field_name("parameters")
        inner = scope | _bindings(params, text) if params is not None else scope
        parts = [
            (params, scope, _PATTERN, "value"),
            (node.child_by_field_name("return_type"), scope, _EXPR, "value"),
            (node.child_by_field_name("body"), inner, _EXPR, "value"),
        ]
        return [p for p in parts if p[0] is not None]  # type: ignore[misc]
    if kind_of == "block":
        return list(_statements(node, scope, text))
    if kind_of == "function_call":
        args = node.child_by_field_name("arguments")
        how: RefKind = kind if kind in ("pipe", "use") else "call"
        if args is not None and any(_is_hole(a) for a in args.named_children):
            how = "capture"
        callee = node.child_by_field_name("function")
        out: list[tuple[Node, frozenset[str], int, RefKind]] = [
            (c, scope, _EXPR, "value") for c in node.named_children if c != callee
        ]
        if callee is not None:
            out.append((callee, scope, _EXPR, how))
        return out
    if kind_of == "binary_expression" and mode == _EXPR:
        if _operator(node) != "|>":
            return [(c, scope, _EXPR, "value") for c in node.named_children]
        return list(_piped(node, scope))
    if kind_of in _BINDS:
        bound = node.child_by_field_name(_BINDS[kind_of])
        value = node.child_by_field_name("value")
        bound_how: RefKind = "use" if kind_of == "use" else "value"
        return [
            (c, scope, _PATTERN if c == bound else _EXPR, bound_how if c == value else "value")
            for c in node.named_children
        ]
    if kind_of == "case_clause":
        patterns = node.child_by_field_name("patterns")
        inner = scope | _bindings(patterns, text) if patterns is not None else scope
        return [
            (c, scope, _PATTERN, "value") if c == patterns else (c, inner, _EXPR, "value")
            for c in node.named_children
        ]
    if kind_of == "constant":  # its name is a definition
        name = node.child_by_field_name("name")
        return [(c, scope, mode, "value") for c in node.named_children if c != name]
    if kind_of == "data_constructor":  # its name is a definition, its fields are types
        args = node.child_by_field_name("arguments")
        return [] if args is None else [(args, scope, mode, "value")]
    return [(c, scope, mode, "value") for c in node.named_children]


def _piped(
    pipe: Node, scope: frozenset[str]
) -> Iterator[tuple[Node, frozenset[str], int, RefKind]]:
    """The operands of `a |> f`, with `f` marked as piped into.

    The grammar binds `|>` looser than the compiler does: it reads `xs |> f <> "]"` as
    `xs |> (f <> "]")`, where Gleam means `(xs |> f) <> "]"`. The function piped into is
    then the leftmost operand under the looser operators, and the rest is plain values.
    """
    target = pipe.child_by_field_name("right")
    for child in pipe.named_children:
        if child != target:
            yield child, scope, _EXPR, "value"
    while target is not None and target.type == "binary_expression":
        if _operator(target) not in _LOOSER_THAN_PIPE:
            break
        for child in target.named_children:
            if child != target.child_by_field_name("left"):
                yield child, scope, _EXPR, "value"
        target = target.child_by_field_name("left")
    if target is not None:
        yield target, scope, _EXPR, "pipe"


def _operator(node: Node) -> str:
    operator = node.child_by_field_name("operator")
    return operator.type if operator is not None else ""


def _statements(
    block: Node, scope: frozenset[str], text: bytes
) -> Iterator[tuple[Node, frozenset[str], int, RefKind]]:
    """A block's statements, each seeing the bindings of the `let`s and `use`s before it."""
    for statement in block.named_children:
        yield statement, scope, _EXPR, "value"
        field = _BINDS.get(statement.type)
        bound = statement.child_by_field_name(field) if field else None
        if bound is not None:
            scope = scope | _bindings(bound, text)


def _bindings(pattern: Node, text: bytes) -> frozenset[str]:
    """The local names a pattern (or a parameter list) binds."""
    names: set[str] = set()
    stack = [pattern]
    while stack:
        node = stack.pop()
        if node.type == "identifier":
            names.add(node_text(node, text))
        elif node.type == "record_pattern_argument" and node.child_by_field_name("pattern") is None:
            label = node.child_by_field_name("label")  # `Square(side:)` binds `side`
            if label is not None:
                names.add(node_text(label, text))
        elif node.type not in _NOT_BINDING:
            stack.extend(node.named_children)
    return frozenset(names)


def _read(
    name: str, scope: frozenset[str], names: FileScope, kind: RefKind
) -> tuple[Target, RefKind] | None:
    """A bare lowercase name, unless a local binding shadows it."""
    return None if name in scope else names.value(name, kind)


def _qualified(
    node: Node, names: FileScope, text: bytes, scope: frozenset[str]
) -> tuple[Node, Target] | None:
    """`alias.name` through the file's imports, unless a local shadows the alias."""
    if node.type == "field_access":
        module, name = node.child_by_field_name("record"), node.child_by_field_name("field")
    else:
        module, name = node.child_by_field_name("module"), node.child_by_field_name("name")
    if module is None or name is None or module.type != "identifier":
        return None
    alias = node_text(module, text)
    target = names.aliases.get(alias)
    if target is None or alias in scope:
        return None
    return name, (target, node_text(name, text))


def _is_hole(argument: Node) -> bool:
    value = argument.child_by_field_name("value")
    return value is not None and value.type == "hole"


def node_text(node: Node, text: bytes) -> str:
    """The source of a node, as text (a stray invalid byte never raises)."""
    return text[node.start_byte : node.end_byte].decode("utf-8", "replace")
