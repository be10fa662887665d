"""No module of gbr reaches into another object's private fields, and only
gbr/actors/pykka_gaps.py reaches into pykka's internals (it says why)."""

from __future__ import annotations

import ast
from pathlib import Path

import gbr

GBR = Path(gbr.__file__).parent
PYKKA_INTERNALS = ("actor_stopped.set", "envelope.message", "ActorRegistry.unregister")


def _foreign_private(tree: ast.AST) -> list[str]:
    """`x._name` where x is not `self` or `cls` (dunders and `_` alone are fine)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        name = node.attr
        if not name.startswith("_") or name.startswith("__") or name == "_":
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        found.append(f"{ast.unparse(node)} (line {node.lineno})")
    return found


def test_the_actors_touch_no_private_field_of_another_object() -> None:
    offenders = {
        str(path.relative_to(GBR)): found
        for path in sorted((GBR / "actors").glob("*.py"))
        if (found := _foreign_private(ast.parse(path.read_text())))
    }
    assert offenders == {}


def test_pykka_internals_are_touched_in_one_place() -> None:
    touching = sorted(
        str(path.relative_to(GBR))
        for path in GBR.rglob("*.py")
        if any(word in path.read_text() for word in PYKKA_INTERNALS)
    )
    assert touching == ["actors/pykka_gaps.py"]
