"""DOT and Mermaid text of a graph, and the PNG path with and without Graphviz."""

from __future__ import annotations

import re
import resource
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from gbr.core.errors import ConfigError, GbrError
from gbr.core.graph.render import find_dot, render, to_dot, write_png

GRAPH = {
    "kind": "imports",
    "focus": "web/handler",
    "nodes": [
        {"id": "gleam/list", "internal": False},
        {"id": "web/cookie", "internal": True},
        {"id": 'web/"odd"', "internal": True},
        {"id": "web/handler", "internal": True},
    ],
    "edges": [
        {"source": "web/cookie", "target": "gleam/list"},
        {"source": "web/handler", "target": "web/cookie"},
        {"source": "web/handler", "target": 'web/"odd"'},
    ],
}


def test_dot_marks_external_nodes_dashed_and_the_focus_bold():
    text = render(GRAPH, "dot")
    assert text.startswith('digraph "imports" {')
    assert '"gleam/list" [style="dashed"];' in text
    assert '"web/handler" [style="bold"];' in text
    assert '"web/cookie" -> "gleam/list";' in text
    assert '"web/handler" -> "web/\\"odd\\"";' in text  # quotes escaped, not breaking out
    assert text.rstrip().endswith("}")


def test_mermaid_uses_plain_ids_with_the_names_as_labels():
    lines = render(GRAPH, "mermaid").splitlines()
    assert lines[0] == "flowchart LR"
    assert '  n0["gleam/list"]' in lines and '  n2["web/#quot;odd#quot;"]' in lines
    assert "  n1 --> n0" in lines and "  n3 --> n1" in lines
    assert "  class n0 external" in lines and "  class n3 focus" in lines


def test_an_unknown_format_is_bad_usage():
    with pytest.raises(ConfigError, match="use one of dot, mermaid"):
        render(GRAPH, "svg")


def test_png_without_graphviz_says_how_to_get_it(tmp_path: Path):
    empty = tmp_path / "no-programs-here"
    empty.mkdir()
    with pytest.raises(GbrError, match="install it"):
        write_png(GRAPH, tmp_path / "g.png", search_path=str(empty))
    with pytest.raises(GbrError, match="install it"):  # a named program that is not there
        write_png(GRAPH, tmp_path / "g.png", dot=str(empty / "dot"))
    assert not (tmp_path / "g.png").exists()


def test_png_with_graphviz_writes_a_picture(tmp_path: Path):
    """A real renderer: Graphviz's `dot` when installed, else graphviz-pure (a dev
    dependency), found beside this Python even when the venv is not activated."""
    assert find_dot() is not None
    out = tmp_path / "g.png"
    write_png(GRAPH, out)
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_label_fits_its_box_in_the_drawing(tmp_path: Path):
    """The renderer's own SVG of the graph: each node's name, at the font's real width
    (Courier advances 0.6 em a character), lies inside the box drawn around it."""
    long_names = {
        "kind": "callees",
        "focus": "bookshelf/loan.calculate_fine",
        "nodes": [
            {"id": "bookshelf/loan.calculate_fine", "internal": True},
            {"id": "gleam/int.max", "internal": False},
            {"id": "bookshelf/config.daily_fine_cents_for_premium_members", "internal": True},
        ],
        "edges": [
            {"source": "bookshelf/loan.calculate_fine", "target": "gleam/int.max"},
            {
                "source": "bookshelf/loan.calculate_fine",
                "target": "bookshelf/config.daily_fine_cents_for_premium_members",
            },
        ],
    }
    dot = find_dot()
    assert dot is not None
    drawn = subprocess.run(
        [dot, "-Tsvg"], input=to_dot(long_names), capture_output=True, text=True, timeout=60
    )
    assert drawn.returncode == 0, drawn.stderr
    svg = "{*}"  # any namespace: the SVG one
    nodes = [
        g
        for g in ElementTree.fromstring(drawn.stdout).findall(f".//{svg}g")
        if g.get("class") == "node"
    ]
    assert len(nodes) == 3
    for node in nodes:
        box = node.find(f"{svg}polygon")
        text = node.find(f"{svg}text")
        assert box is not None and text is not None and text.text
        xs = [float(x) for x in re.findall(r"(-?[\d.]+),-?[\d.]+", box.get("points", ""))]
        centre, size = float(text.get("x", "0")), float(text.get("font-size", "0"))
        half = 0.6 * size * len(text.text) / 2
        assert min(xs) <= centre - half and centre + half <= max(xs), text.text


def test_a_failed_drawing_says_why_in_one_line_and_leaves_no_file(tmp_path: Path):
    """Issue 32 item 14: graphviz-pure warns before it fails (here about the width of
    characters its font tables lack); main gave that warning as the cause."""
    accented = {
        "kind": "imports",
        "nodes": [{"id": "café/crème", "internal": True}, {"id": "gleam/io", "internal": False}],
        "edges": [{"source": "café/crème", "target": "gleam/io"}],
    }
    out = tmp_path / "no-such-folder" / "g.png"
    with pytest.raises(GbrError) as caught:
        write_png(accented, out)
    message = str(caught.value)
    assert "\n" not in message and "warning" not in message.lower()
    assert "No such file or directory" in message and str(out) in message
    assert not out.parent.exists()


def _no_file_writes() -> None:
    """A full disk, as the kernel shows it to one process: no file may grow."""
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


def test_a_picture_that_cannot_be_written_leaves_no_file_and_keeps_an_older_one(tmp_path: Path):
    """main: `dot -o` opened the file first, so a write that failed left a 0-byte PNG (over
    the older picture, when there was one)."""
    old, new = tmp_path / "old.png", tmp_path / "new.png"
    write_png(GRAPH, old)
    picture = old.read_bytes()
    script = (
        "import sys; from pathlib import Path; from gbr.core.errors import GbrError\n"
        "from gbr.core.graph.render import write_png\n"
        f"graph = {GRAPH!r}\n"
        "for out in sys.argv[1:]:\n"
        "    try:\n"
        "        write_png(graph, Path(out))\n"
        "    except GbrError as exc:\n"
        "        print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(old), str(new)],
        preexec_fn=_no_file_writes,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert old.read_bytes() == picture  # whole, as before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old.png"]
    lines = done.stdout.splitlines()
    assert len(lines) == 2 and all(line.startswith("cannot write ") for line in lines), lines
    assert all("File too large" in line for line in lines)
