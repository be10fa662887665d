"""One file's part of the code graph: its imports, its definitions, the names it uses.

Everything is read from the tree-sitter tree the chunker already parses; names are resolved
within the file (gbr.core.graph.scope), scope-aware (gbr.core.graph.walk), and positions are
1-based lines and columns in characters, as an editor counts them (tree-sitter counts columns
in bytes). A reference sits at the referenced name itself: `map` in `list.map(xs, f)`.

What is not an edge: locals, prelude names (`Int`, `Ok`, ... unless the file defines or
imports its own), and bare names the file neither defines nor imports. An imported lowercase
name read without a call is of kind "value": the file cannot tell a constant from a function.

Never raises: a file that is not UTF-8 gives an empty graph (the chunker drops it whole), and
a damaged file gives what parsed intact, the same definitions the chunker keeps when a parser
is at hand to parse the damaged ranges again (see gbr.core.parse.parse_damage).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from tree_sitter import Node, Parser

from gbr.core.graph.model import FileGraph, Import, Reference, Symbol, SymbolKind
from gbr.core.graph.scope import FileScope
from gbr.core.graph.walk import node_text as _text
from gbr.core.graph.walk import walk
from gbr.core.parse.oversize import parse_yielding
from gbr.core.parse.parse_damage import (
    Lost,
    dropped_nodes,
    is_damaged,
    is_type_variable_gap,
    parsed_alone,
    salvage,
    top_level,
)
from gbr.core.records import SourceFile
from gbr.core.telemetry import log

_BOM = b"\xef\xbb\xbf"
_DEFINITIONS: dict[str, SymbolKind] = {
    "function": "function",
    "external_function": "function",
    "type_definition": "type",
    "type_alias": "type_alias",
    "constant": "constant",
    "external_type": "external_type",
}
# What may stand at the top level; anything else is a stray the compiler would reject.
_TOP_LEVEL = {*_DEFINITIONS, "import", "statement_comment", "comment", "attribute"} | {
    "module_comment"
}


def file_graph(source: SourceFile, parser: Parser) -> FileGraph:
    """Parse the file and extract its graph (never an exception)."""
    content = source.content.removeprefix(_BOM)
    try:
        root = parse_yielding(parser, content).root_node
    except Exception as exc:  # a parser failure costs this file its graph
        log().warning("graph_parse_failed", path=source.path, error=str(exc))
        return FileGraph(source.path, source.module)
    return extract_file_graph(source, root, parser)


def extract_file_graph(source: SourceFile, root: Node, parser: Parser | None = None) -> FileGraph:
    """The imports, definitions and resolved references of one parsed file.

    `root` is the tree of the content without a byte order mark, as chunk_file parses it.
    With `parser`, definitions damaged only by tree-sitter's recovery from an error elsewhere
    are parsed again on their own and kept; without, every damaged definition is left out.
    """
    content = source.content.removeprefix(_BOM)
    try:
        content.decode("utf-8")
    except UnicodeDecodeError:
        return FileGraph(source.path, source.module)
    try:
        return _graph(source, content, _intact_nodes(root, content, parser))
    except Exception as exc:  # never lose the index run over the graph
        log().warning("graph_extract_failed", path=source.path, error=str(exc))
        return FileGraph(source.path, source.module)


def _intact_nodes(root: Node, content: bytes, parser: Parser | None) -> list[Node]:
    """The top-level nodes the chunker keeps, by the same rules (gbr.core.parse.parse_damage).

    Damaged or stray nodes go, with everything sharing a line with them and the comments
    glued above them; when no definition survives, the chunker drops the file, and so do we.
    """
    nodes: list[Any] = top_level(root)
    bad = [n for n in nodes if _is_bad(n)]
    if bad and parser is not None:  # damaged only by recovery from an error elsewhere
        nodes = [(parsed_alone(parser, content, n) or n) if _is_bad(n) else n for n in nodes]
        bad = [n for n in nodes if _is_bad(n)]
    if root.has_error and not bad and not any(is_type_variable_gap(n) for n in nodes):
        return []  # an error outside every top-level node: nothing can be trusted
    if not bad:
        return nodes
    if parser is not None:  # definitions swallowed by a damaged node are given back
        lines = [row.removesuffix(b"\r").decode("utf-8") for row in content.split(b"\n")]
        nodes = salvage(parser, content, lines, nodes, _is_bad)
        bad = [n for n in nodes if isinstance(n, Lost) or _is_bad(n)]
    dropped = dropped_nodes(nodes, bad)
    kept = [n for n in nodes if n.id not in dropped]
    return kept if any(n.type in _DEFINITIONS for n in kept) else []


def _is_bad(node: Node) -> bool:
    """Damaged, or something that may not stand at the top level."""
    return node.type not in _TOP_LEVEL or is_damaged(node)


def _graph(source: SourceFile, content: bytes, nodes: Sequence[Node]) -> FileGraph:
    scope = FileScope(source.module)
    imports = []
    for node in nodes:
        if node.type == "import" and (imp := _import(source.path, node, content)):
            imports.append(imp)
            scope.add_import(imp)
    symbols = [s for node in nodes for s in _symbols(source, node, content)]
    for symbol in symbols:
        _define(scope, symbol)
    references: list[Reference] = []
    for node in nodes:
        if node.type in _DEFINITIONS:
            try:
                references.extend(_references(source.path, node, scope, content))
            except Exception as exc:  # one odd definition loses only its own edges
                log().warning("graph_extract_failed", path=source.path, error=str(exc))
    references.sort(key=lambda r: (r.line, r.col))
    return FileGraph(
        path=source.path,
        module=source.module,
        imports=tuple(imports),
        symbols=tuple(symbols),
        references=tuple(references),
    )


def _define(scope: FileScope, symbol: Symbol) -> None:
    target = (scope.module, symbol.name)
    if symbol.kind == "function":
        scope.functions.add(symbol.name)
    elif symbol.kind == "constant":
        scope.constants.add(symbol.name)
    elif symbol.kind == "constructor":
        scope.constructors[symbol.name] = target
    else:
        scope.types[symbol.name] = target


def _import(path: str, node: Node, content: bytes) -> Import | None:
    module_node = node.child_by_field_name("module")
    if module_node is None:
        return None
    module = _text(module_node, content)
    alias_node = node.child_by_field_name("alias")
    alias = _text(alias_node, content) if alias_node is not None else module.rsplit("/", 1)[-1]
    names: list[tuple[str, str, bool]] = []
    unqualified = node.child_by_field_name("imports")
    for item in unqualified.named_children if unqualified is not None else ():
        name = item.child_by_field_name("name")
        if item.type != "unqualified_import" or name is None:
            continue
        local = item.child_by_field_name("alias")
        is_type = any(c.type == "type" for c in item.children)
        spelled = _text(name, content)
        names.append((spelled, _text(local, content) if local is not None else spelled, is_type))
    line, col = _position(node, content)
    return Import(path, line, col, module, alias, tuple(names))


def _symbols(source: SourceFile, node: Node, content: bytes) -> Iterable[Symbol]:
    kind = _DEFINITIONS.get(node.type)
    name = _name_node(node)
    if kind is None or name is None:
        return
    public = any(c.type == "visibility_modifier" for c in node.children)
    type_name = _text(name, content)
    yield _symbol(source, name, content, kind, public)
    if node.type != "type_definition":
        return
    opaque = any(c.type == "opacity_modifier" for c in node.children)
    for constructors in (c for c in node.named_children if c.type == "data_constructors"):
        for constructor in constructors.named_children:
            cname = constructor.child_by_field_name("name")
            if constructor.type == "data_constructor" and cname is not None:
                exported = public and not opaque
                yield _symbol(source, cname, content, "constructor", exported, type_name)


def _symbol(
    source: SourceFile, name: Node, content: bytes, kind: SymbolKind, public: bool, parent: str = ""
) -> Symbol:
    line, col = _position(name, content)
    return Symbol(source.path, source.module, _text(name, content), kind, line, col, public, parent)


def _name_node(node: Node) -> Node | None:
    """The node spelling a definition's name (types keep it inside `type_name`)."""
    name = node.child_by_field_name("name")
    if name is not None:
        return name
    type_name = next((c for c in node.named_children if c.type == "type_name"), None)
    return type_name.child_by_field_name("name") if type_name is not None else None


def _references(path: str, node: Node, scope: FileScope, content: bytes) -> Iterable[Reference]:
    name = _name_node(node)
    owner = _text(name, content) if name is not None else ""
    for at, kind, (module, target) in walk(node, scope, content):
        line, col = _position(at, content)
        yield Reference(path, line, col, kind, module, target, owner)


def _position(node: Node, content: bytes) -> tuple[int, int]:
    """1-based line and column in characters (tree-sitter gives the column in bytes)."""
    row, byte_col = node.start_point
    line_start = node.start_byte - byte_col
    return row + 1, len(content[line_start : node.start_byte].decode("utf-8", "replace")) + 1
