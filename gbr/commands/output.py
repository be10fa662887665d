"""Output for scripts and editors: the `--json` stamp and the vimgrep lines of `search`.

Every `--json` object says which shape it has (`schema_version`, raised when a key changes
meaning or goes away; new keys do not raise it) and which package it is about, so a script
reading several indexes can tell them apart.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gbr.core.records import Hit

SCHEMA_VERSION = 1


def package_name(root: str | Path | None) -> str | None:
    """The `name` in the root's gleam.toml; None for a folder of packages (or no root)."""
    if root is None:
        return None
    try:
        manifest = tomllib.loads((Path(root) / "gleam.toml").read_text("utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    name = manifest.get("name")
    return str(name) if name else None


def stamped(data: dict[str, Any], root: str | Path | None) -> dict[str, Any]:
    """`data` with `schema_version` and `package` first; keys already there are kept."""
    return {"schema_version": SCHEMA_VERSION, "package": package_name(root), **data}


def vimgrep_lines(hits: Iterable[Hit], root: str | Path, cwd: Path | None = None) -> list[str]:
    """`path:line:col: name (kind) signature`, the shape `grep -n`, ripgrep's --vimgrep and
    editors' quickfix lists read. Paths are from the current folder, not the package root,
    so the editor opens them whichever folder it runs in."""
    here = cwd or Path.cwd()
    lines = []
    for hit in hits:
        path = os.path.relpath(Path(root) / hit.path, here)
        line, column = definition_at(hit)
        signature = " ".join(hit.signature.split()) if hit.signature else ""
        tail = f" {signature}" if signature else ""
        lines.append(f"{path}:{line}:{column}: {hit.name} ({hit.kind}){tail}")
    return lines


def definition_at(hit: Hit) -> tuple[int, int]:
    """Line and column (1-based) of the hit's name where it is defined: past the doc
    comments and attributes its chunk starts with, so the editor lands on the definition."""
    for offset, text in enumerate(hit.text.splitlines()):
        stripped = text.lstrip()
        if not stripped or stripped.startswith(("//", "@")):
            continue
        column = text.find(hit.name)
        return hit.start_line + offset, (column + 1 if column >= 0 else 1)
    return hit.start_line, 1
