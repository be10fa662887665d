"""Records of the code graph, resolved within one file so that a changed file replaces only
its own rows: names are turned into `module.name` through the file's own imports and
definitions, and whether a target lies inside the indexed tree is decided when the graph is
read (a join with the definitions), never stored. That keeps the graph incremental per file
and lets a dependency brought in later with `--include-deps` resolve old references.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

# How many calls away `callers --depth` and `callees --depth` may follow; declared here, in
# the light module, so the CLI's option can name it without loading DuckDB.
MAX_DEPTH = 10

Node = tuple[str, str]  # (module, name) of a definition

SymbolKind = Literal["function", "type", "type_alias", "constructor", "constant", "external_type"]
RefKind = Literal[
    "call",  # fn(…) or module.fn(…)
    "pipe",  # |> fn or |> module.fn(a)
    "capture",  # fn(_, x)
    "value",  # a function passed or bound as a value
    "use",  # use x <- fn(…)
    "type",  # a type in a signature, annotation or another type
    "constructor",  # a record constructor, built or matched in a pattern
    "constant",  # a module constant read
]


@dataclass(frozen=True, slots=True)
class Symbol:
    """A definition: a function, a type, a constructor, a constant."""

    path: str  # as stored in chunks.path (relative, forward slashes)
    module: str  # `wisp/internal/cookie`
    name: str
    kind: SymbolKind
    line: int  # 1-based position of the name
    col: int  # 1-based
    public: bool
    parent: str = ""  # for a constructor: the name of its custom type


@dataclass(frozen=True, slots=True)
class Import:
    """One `import` line, with what it brings into scope."""

    path: str
    line: int
    col: int
    module: str  # `gleam/list`
    alias: str  # the name the module is used by: `list`, or `y` for `import x as y`
    # Unqualified names: (name as imported, local name, is_type), so `filter as keep` is
    # ("filter", "keep", False) and `type Option` is ("Option", "Option", True).
    names: tuple[tuple[str, str, bool], ...] = ()


@dataclass(frozen=True, slots=True)
class Reference:
    """A use of a name, resolved through the file's imports and own definitions.

    `target_module` is empty when the name could not be resolved (a local variable that
    shadows nothing we know, or a name from a module we do not see); such references are
    kept out of the graph rather than guessed.
    """

    path: str
    line: int  # 1-based position of the referenced name
    col: int
    kind: RefKind
    target_module: str
    target_name: str
    # The top-level definition the reference sits in (empty at module level).
    source_name: str = ""


@dataclass(frozen=True, slots=True)
class FileGraph:
    """Everything one file contributes to the graph."""

    path: str
    module: str
    imports: tuple[Import, ...] = ()
    symbols: tuple[Symbol, ...] = ()
    references: tuple[Reference, ...] = ()


@dataclass(frozen=True, slots=True)
class Definition:
    """Where an internal definition is and how it reads in brief: what `ask` outlines.

    Plain data, so the graph's reader need not know how the answer room renders it."""

    module: str
    name: str
    kind: str
    path: str
    start_line: int
    end_line: int
    signature: str
    doc: str = ""


def in_degrees(edges: Sequence[tuple[Node, Node]]) -> dict[Node, int]:
    """How many references each definition receives."""
    counts: dict[Node, int] = {}
    for _, target in edges:
        counts[target] = counts.get(target, 0) + 1
    return counts
