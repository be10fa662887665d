"""The embedder's optimised graph, kept between processes: same vectors, and a kept file
that is damaged or cannot be written costs only the time it was meant to save."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gbr.core import onnx_graphs
from gbr.core.embedder import OnnxEmbedder
from gbr.core.model_files import resolve_model_files

TEXTS = [
    "check that an ISBN is valid",
    "pub fn map(list: List(a), with fun: fn(a) -> b) -> List(b) { do_map(list, fun, []) }",
    "x",
]


def test_a_kept_graph_gives_the_same_vectors_bit_for_bit(
    tmp_path: Path, model: OnnxEmbedder
) -> None:
    files = resolve_model_files()
    folder = tmp_path / "onnx"
    want = model.embed_batch(TEXTS)
    first = OnnxEmbedder(files, graphs=folder)  # optimises, and keeps the graph
    kept = onnx_graphs.graph_path(folder, files.onnx)
    assert kept.is_file()
    made_at = kept.stat().st_mtime_ns
    second = OnnxEmbedder(files, graphs=folder)  # loads it, optimisation off
    assert kept.stat().st_mtime_ns == made_at
    assert [p.name for p in folder.iterdir()] == [kept.name]  # no temporary file left
    np.testing.assert_array_equal(first.embed_batch(TEXTS), want)
    np.testing.assert_array_equal(second.embed_batch(TEXTS), want)


def test_a_damaged_kept_graph_is_made_again(tmp_path: Path, model: OnnxEmbedder) -> None:
    files = resolve_model_files()
    folder = tmp_path / "onnx"
    folder.mkdir()
    kept = onnx_graphs.graph_path(folder, files.onnx)
    kept.write_bytes(b"not a graph")
    embedder = OnnxEmbedder(files, graphs=folder)
    np.testing.assert_array_equal(embedder.embed_batch(TEXTS), model.embed_batch(TEXTS))
    assert kept.stat().st_size > 1_000_000


def test_a_folder_that_cannot_be_made_costs_nothing_but_time(
    tmp_path: Path, model: OnnxEmbedder
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder would be")
    embedder = OnnxEmbedder(resolve_model_files(), graphs=blocker / "onnx")
    np.testing.assert_array_equal(embedder.embed_batch(TEXTS), model.embed_batch(TEXTS))


def test_an_older_graph_of_the_same_model_is_removed(tmp_path: Path) -> None:
    files = resolve_model_files()
    folder = tmp_path / "onnx"
    folder.mkdir()
    kept = onnx_graphs.graph_path(folder, files.onnx)
    older = kept.with_name(kept.name.rsplit("-", 1)[0] + "-000000000000.onnx")
    other_model = folder / "other-12345678-000000000000.onnx"
    older.write_bytes(b"old")
    other_model.write_bytes(b"another model's")
    OnnxEmbedder(files, graphs=folder)
    assert sorted(p.name for p in folder.iterdir()) == sorted([kept.name, other_model.name])


def test_the_command_line_keeps_graphs_in_gbr_home_unless_told_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gbr.commands.common import GRAPHS_ENV, onnx_graphs

    monkeypatch.setenv("GBR_HOME", str(tmp_path / "home"))
    monkeypatch.delenv(GRAPHS_ENV, raising=False)
    assert onnx_graphs() == tmp_path / "home" / "onnx"
    monkeypatch.setenv(GRAPHS_ENV, str(tmp_path / "elsewhere"))
    assert onnx_graphs() == tmp_path / "elsewhere"
    monkeypatch.setenv(GRAPHS_ENV, "off")
    assert onnx_graphs() is None
