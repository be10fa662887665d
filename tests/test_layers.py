"""The floor plan holds: front doors -> access -> actors -> core, and no arrow back up.

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
    """The floor of a dotted module under gbr (`gbr.core.search` -> 0)."""
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
