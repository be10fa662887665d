"""The floor plan holds: front doors -> access -> actors -> core, and no arrow back up;
inside core, each room imports only the ground floor, itself and the rooms below it; and no
two modules import each other, however indirectly.

Every import of every module under gbr/ is read with `ast` (module level, inside functions,
under TYPE_CHECKING, relative ones too), so a lazy import cannot hide an upward arrow.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import gbr

GBR = Path(gbr.__file__).parent
FRONT = 3  # cli.py, commands/, chat/, mcp/, daemon/
# gbr/__init__ (the version) and gbr/core are the ground floor; gbr/interrupts serves the CLI.
LAYERS = {"core": 0, "actors": 1, "access": 2}
OUTSIDE = {"__init__": 0, "interrupts": FRONT}


def layer_of(module: str) -> int:
    """The floor of a dotted module under gbr (`gbr.core.rank.search` -> 0)."""
    parts = module.split(".")
    if parts[0] != "gbr" or len(parts) == 1:
        return 0
    top = parts[1]
    return LAYERS.get(top, OUTSIDE.get(top, FRONT))


def module_name(path: Path) -> str:
    rel = path.relative_to(GBR.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, absolute module) of every import in the file."""
    package = module_name(path)
    if path.name != "__init__.py":
        package = package.rpartition(".")[0]
    return imports_in(path.read_text("utf-8"), package)


def imports_in(source: str, package: str) -> Iterator[tuple[int, str]]:
    """(line, absolute module) of every import in `source`, a module of `package`."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - (node.level - 1)]
                yield node.lineno, ".".join(base + ([node.module] if node.module else []))
            else:
                yield node.lineno, node.module or ""


# The rooms of gbr/core by floor. The ground floor is core's own top-level modules (records,
# errors, telemetry, paths, settings, ...). Rooms on one floor do not import each other.
ROOMS = {"parse": 1, "embed": 1, "llm": 1, "graph": 2, "store": 3, "rank": 4, "answer": 5}
CORE_FACE = 6  # gbr/core/__init__: the public face names (lazily) what the rooms hold


def room_of(module: str) -> tuple[str, int]:
    """(room, floor) of a module under gbr.core: ('', 0) for the ground floor."""
    parts = module.split(".")
    if parts[:2] != ["gbr", "core"]:
        raise ValueError(module)
    if len(parts) == 2:
        return "", CORE_FACE
    if parts[2] in ROOMS:
        return parts[2], ROOMS[parts[2]]
    return "", 0


def every_module() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(GBR.rglob("*.py"))}


def resolved(target: str, names: set[str], known: dict[str, Path]) -> set[str]:
    """The modules an import reaches: `from pkg import mod` names pkg.mod when it is one."""
    found = {f"{target}.{n}" for n in names if f"{target}.{n}" in known}
    return found or {target}


def edges() -> dict[str, set[str]]:
    """Every gbr module -> the gbr modules it imports (any kind of import)."""
    known = every_module()
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.ImportFrom):
                line_target = dict(imports_in(ast.unparse(node), package))[1]
                names = {a.name for a in node.names}
                out |= resolved(line_target, names, known)
            elif isinstance(node, ast.Import):
                out |= {a.name for a in node.names}
        graph[module] = {t for t in out if t in known and t != module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circles() -> None:
    assert circles(edges()) == []


def test_the_circle_finder_finds_one() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_core_rooms_import_only_lower_floors() -> None:
    offenders = []
    for module, targets in edges().items():
        if not module.startswith("gbr.core"):
            continue
        room, floor = room_of(module)
        for target in sorted(targets):
            if not target.startswith("gbr.core"):
                continue
            their_room, their_floor = room_of(target)
            if their_room == room or (their_floor == 0 and their_room == ""):
                continue
            if their_floor >= floor:
                offenders.append(f"{module} imports {target}")
    assert offenders == []


def test_every_room_says_what_it_is_for() -> None:
    for room in ROOMS:
        doc = ast.get_docstring(ast.parse((GBR / "core" / room / "__init__.py").read_text()))
        assert doc and "import" in doc and len(doc) > 200, room


def test_no_module_imports_a_higher_floor() -> None:
    offenders = []
    for path in sorted(GBR.rglob("*.py")):
        own = layer_of(module_name(path))
        for line, target in imports(path):
            if target.startswith("gbr") and layer_of(target) > own:
                offenders.append(f"{path.relative_to(GBR.parent)}:{line} imports {target}")
    assert offenders == []


def test_the_reader_sees_every_kind_of_import() -> None:
    """The check above is only as good as its reader: a function-level, a TYPE_CHECKING and
    a relative import of a higher floor are each found, and each is an upward arrow."""
    source = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from gbr.access.local import LocalIndex\n"
        "def later():\n"
        "    import gbr.daemon.service\n"
        "from ..actors import pipeline\n"
        "from . import store\n"
    )
    found = dict(imports_in(source, "gbr.core"))
    assert found == {
        1: "typing",
        3: "gbr.access.local",
        5: "gbr.daemon.service",
        6: "gbr.actors",
        7: "gbr.core",
    }
    upward = {t for t in found.values() if t.startswith("gbr") and layer_of(t) > 0}
    assert upward == {"gbr.access.local", "gbr.daemon.service", "gbr.actors"}
    assert layer_of("gbr.daemon.service") > layer_of("gbr.access") > layer_of("gbr.actors.x")
    assert layer_of("gbr") == 0 and layer_of("gbr.interrupts") == FRONT


def test_core_reads_no_process_environment() -> None:
    """Configuration is read once at the edge and passed down (gbr.core.environ says why)."""
    offenders = []
    for path in sorted((GBR / "core").rglob("*.py")):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and ast.unparse(node) in (
                "os.environ",
                "os.getenv",
                "Path.home",
            ):
                offenders.append(f"{path.relative_to(GBR.parent)}:{node.lineno}")
    # The package docstring's usage example is text, not code, so it is not counted.
    assert offenders == []
