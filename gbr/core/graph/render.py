"""The graph as text to draw: DOT for Graphviz, Mermaid for Markdown; a PNG through `dot`.

Input is the object `GraphReader.imports` and `.neighbourhood` return (`gleambrctl graph
--json`): nodes with an `internal` flag, and edges. External nodes (outside the indexed
tree) are dashed, and the node asked about is bold, in both languages.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from gbr.core.errors import ConfigError, GbrError

FORMATS = ("dot", "mermaid")
DOT_TIMEOUT = 60.0  # seconds; a neighbourhood of a few hundred nodes draws in well under one
# Graphviz's own `dot`, else `graphviz-pure` (a port of it on PyPI, with the same command line).
DOT_PROGRAMS = ("dot", "graphviz-pure")
GET_DOT = (
    "the `dot` program (Graphviz) is not installed; install it (apt install graphviz, "
    "brew install graphviz, or pip install graphviz-pure) or save `--format dot` and draw "
    "it elsewhere"
)


def find_dot(search_path: str | None = None) -> str | None:
    """A program that draws DOT, on `search_path` (default PATH) or, when PATH is searched,
    beside this Python: a venv's scripts are there even when the venv is not activated."""
    folders = [search_path] if search_path is not None else [None, str(Path(sys.executable).parent)]
    for folder in folders:
        for name in DOT_PROGRAMS:
            found = shutil.which(name, path=folder)
            if found is not None:
                return found
    return None


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# Courier, not the generic "monospace": a renderer sizes each box from its own table of
# font metrics, and graphviz-pure (the pip route) has none for "monospace", so it sized the
# boxes for Times and drew the names in a wider fixed-pitch font, spilling out of them.
# Every renderer knows Courier's (0.6 em a character), and Graphviz maps it to the
# system's fixed-pitch font.
LABEL_FONT = "Courier"


def to_dot(graph: dict[str, Any]) -> str:
    lines = [
        f"digraph {_dot_quote(graph['kind'])} {{",
        "  rankdir=LR;",
        f"  node [shape=box, fontname={_dot_quote(LABEL_FONT)}];",
    ]
    for node in graph["nodes"]:
        style = [] if node["internal"] else ["dashed"]
        if node["id"] == graph.get("focus"):
            style.append("bold")
        attrs = f" [style={_dot_quote(','.join(style))}]" if style else ""
        lines.append(f"  {_dot_quote(node['id'])}{attrs};")
    for edge in graph["edges"]:
        lines.append(f"  {_dot_quote(edge['source'])} -> {_dot_quote(edge['target'])};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def to_mermaid(graph: dict[str, Any]) -> str:
    """Mermaid ids must be plain words, so nodes are `n0`, `n1`... with the name as label."""
    ids = {node["id"]: f"n{i}" for i, node in enumerate(graph["nodes"])}
    lines = ["flowchart LR"]
    for node in graph["nodes"]:
        label = node["id"].replace('"', "#quot;")
        lines.append(f'  {ids[node["id"]]}["{label}"]')
    for edge in graph["edges"]:
        lines.append(f"  {ids[edge['source']]} --> {ids[edge['target']]}")
    external = [ids[n["id"]] for n in graph["nodes"] if not n["internal"]]
    if external:
        lines.append("  classDef external stroke-dasharray: 5 5")
        lines.append(f"  class {','.join(external)} external")
    focus = graph.get("focus")
    if focus in ids:
        lines.append("  classDef focus stroke-width: 3px")
        lines.append(f"  class {ids[focus]} focus")
    return "\n".join(lines) + "\n"


def render(graph: dict[str, Any], fmt: str) -> str:
    if fmt not in FORMATS:
        raise ConfigError(f"unknown --format {fmt!r}; use one of {', '.join(FORMATS)}")
    return to_dot(graph) if fmt == "dot" else to_mermaid(graph)


def write_png(
    graph: dict[str, Any], out: Path, dot: str | None = None, search_path: str | None = None
) -> None:
    """Draw with a local `dot` program (see `find_dot`); without one, one line saying how to
    get it. The picture is read from the program's stdout and renamed into place, so a
    failure (a full disk, a missing folder, the program stopped) leaves no file behind,
    neither a new empty one nor a half-written one over an older picture."""
    binary = dot or find_dot(search_path)
    if binary is None:
        raise GbrError(GET_DOT)
    try:
        done = subprocess.run(
            [binary, "-Tpng"],
            input=to_dot(graph).encode(),
            capture_output=True,
            timeout=DOT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GbrError(f"`dot` could not draw {out} ({exc}); {GET_DOT.split('; ')[1]}") from exc
    if done.returncode != 0 or not done.stdout:
        raise GbrError(f"`dot` could not draw {out}: {_cause(done)}")
    _write_whole(out, done.stdout)


def _cause(done: subprocess.CompletedProcess[bytes]) -> str:
    """The line of a failed `dot`'s stderr that says why: renderers warn first (graphviz-pure
    about the width of a character its font tables lack), and a warning is not the cause."""
    lines = [" ".join(line.split()) for line in done.stderr.decode(errors="replace").splitlines()]
    causes = [line for line in lines if line and not line.lower().startswith("warning")]
    if causes:
        return causes[0]
    return f"exit {done.returncode}" if done.returncode else "it wrote no picture"


def _write_whole(out: Path, data: bytes) -> None:
    """`data` in `out`, whole or not at all: written beside it, then renamed over it."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
        os.replace(tmp, out)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise GbrError(
            f"cannot write {out}: {exc.strerror or exc}; check that the folder exists, "
            "is writable and has room"
        ) from exc
