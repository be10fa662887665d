"""Output for scripts and editors: the `--json` stamp and the vimgrep lines of `search`.

Every `--json` object says which shape it has (`schema_version`, raised when a key changes
meaning or goes away; new keys do not raise it) and which package it is about, so a script
reading several indexes can tell them apart.
"""

from __future__ import annotations

import os
import re
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


# C0 controls but tab and newline, DEL and the C1 controls: ESC opens the sequences that
# retitle a terminal (OSC 0), clear it (CSI 2J) or rewrite what it shows; CSI is also 0x9b.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_CONTROL_OR_BREAK = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def _escaped(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def shown(text: str) -> str:
    """`text` safe to print: every control character but tab and newline written as `\\xNN`.

    File names, code, doc comments and an LLM's answer are anyone's text; printed raw, they
    could retitle or clear the terminal of whoever reads them. `--json` keeps them exact."""
    return _CONTROL.sub(_escaped, text)


def one_line(text: str) -> str:
    """`shown`, with tab, newline and carriage return escaped too: a field of a line format
    (`--vimgrep`, `refs`) that must not split its record."""
    return _CONTROL_OR_BREAK.sub(_escaped, text)


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
        record = f"{path}:{line}:{column}: {hit.name} ({hit.kind}){tail}"
        lines.append(one_line(record))
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
