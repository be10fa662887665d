"""DOT and Mermaid text of a graph, and the PNG path with and without Graphviz."""

from __future__ import annotations

from pathlib import Path

import pytest

from gbr.core.errors import ConfigError, GbrError
from gbr.core.graph.render import find_dot, render, write_png

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
