"""The embedder's optimised graph, kept between processes: same vectors, and a kept file
that is damaged or cannot be written costs only the time it was meant to save."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from gbr.core.embed import onnx_graphs
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.embed.model_files import resolve_model_files

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
    kept = onnx_graphs.graph_path(folder, files.onnx, files.int8_matmul)
    assert (kept / onnx_graphs.GRAPH).is_file()
    # The weights sit in the data file, which is mapped, not parsed from the graph.
    assert (kept / onnx_graphs.DATA).stat().st_size > 10 * (kept / onnx_graphs.GRAPH).stat().st_size
    made_at = (kept / onnx_graphs.GRAPH).stat().st_mtime_ns
    second = OnnxEmbedder(files, graphs=folder)  # loads it, optimisation off
    assert (kept / onnx_graphs.GRAPH).stat().st_mtime_ns == made_at
    assert [p.name for p in folder.iterdir()] == [kept.name]  # no temporary folder left
    assert sorted(p.name for p in kept.iterdir()) == sorted(
        [onnx_graphs.GRAPH, onnx_graphs.DATA, onnx_graphs.SUMS]
    )
    np.testing.assert_array_equal(first.embed_batch(TEXTS), want)
    np.testing.assert_array_equal(second.embed_batch(TEXTS), want)


def test_a_session_that_does_not_prepack_gives_the_same_vectors_within_1e_5(
    tmp_path: Path, model: OnnxEmbedder
) -> None:
    """A one-query process leaves the weights unpacked: other kernels, other rounding."""
    files = resolve_model_files()
    want = model.embed_batch(TEXTS)
    for graphs in (None, tmp_path / "onnx", tmp_path / "onnx"):  # plain, saving, kept
        one_shot = OnnxEmbedder(files, graphs=graphs, prepack=False)
        np.testing.assert_allclose(one_shot.embed_batch(TEXTS), want, rtol=0, atol=1e-5)


def test_a_damaged_kept_graph_is_made_again(tmp_path: Path, model: OnnxEmbedder) -> None:
    files = resolve_model_files()
    folder = tmp_path / "onnx"
    folder.mkdir()
    kept = onnx_graphs.graph_path(folder, files.onnx, files.int8_matmul)
    kept.mkdir()
    (kept / onnx_graphs.GRAPH).write_bytes(b"not a graph")
    embedder = OnnxEmbedder(files, graphs=folder)
    np.testing.assert_array_equal(embedder.embed_batch(TEXTS), model.embed_batch(TEXTS))
    assert (kept / onnx_graphs.DATA).stat().st_size > 1_000_000
    again = OnnxEmbedder(files, graphs=folder)  # from the graph made again
    np.testing.assert_array_equal(again.embed_batch(TEXTS), model.embed_batch(TEXTS))


@pytest.mark.parametrize("damage", ["truncated data", "no data", "a file for the folder"])
def test_a_kept_graph_missing_its_weights_is_made_again(
    tmp_path: Path, model: OnnxEmbedder, damage: str
) -> None:
    files = resolve_model_files()
    folder = tmp_path / "onnx"
    OnnxEmbedder(files, graphs=folder)
    kept = onnx_graphs.graph_path(folder, files.onnx, files.int8_matmul)
    data = kept / onnx_graphs.DATA
    if damage == "truncated data":
        with data.open("r+b") as f:
            f.truncate(data.stat().st_size // 2)
    elif damage == "no data":
        data.unlink()
    else:
        shutil.rmtree(kept)
        kept.write_bytes(b"an old single-file graph, or anything else")
    embedder = OnnxEmbedder(files, graphs=folder)
    np.testing.assert_array_equal(embedder.embed_batch(TEXTS), model.embed_batch(TEXTS))
    assert (kept / onnx_graphs.DATA).stat().st_size > 1_000_000


def test_two_processes_saving_at_once_both_search_and_one_graph_stays(
    tmp_path: Path, model: OnnxEmbedder
) -> None:
    """Each makes its graph under a temporary name; the second rename finds the first
    graph in place and that process keeps its own session."""
    files = resolve_model_files()
    folder = tmp_path / "onnx"
    script = (
        "import sys, numpy as np\n"
        "from gbr.core.embed.embedder import OnnxEmbedder\n"
        "from gbr.core.embed.model_files import resolve_model_files\n"
        "from pathlib import Path\n"
        "e = OnnxEmbedder(resolve_model_files(), graphs=Path(sys.argv[1]))\n"
        f"np.save(sys.argv[2], e.embed_batch({TEXTS!r}))\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", script, str(folder), str(tmp_path / f"{i}.npy")])
        for i in range(2)
    ]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    want = model.embed_batch(TEXTS)
    for i in range(2):
        np.testing.assert_array_equal(np.load(tmp_path / f"{i}.npy"), want)
    kept = onnx_graphs.graph_path(folder, files.onnx, files.int8_matmul)
    assert [p.name for p in folder.iterdir()] == [kept.name]
    loaded = OnnxEmbedder(files, graphs=folder)
    np.testing.assert_array_equal(loaded.embed_batch(TEXTS), want)


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
    kept = onnx_graphs.graph_path(folder, files.onnx, files.int8_matmul)
    family = kept.name.rsplit("-", 1)[0]
    single_file = folder / f"{family}-000000000000.onnx"  # as graphs were kept before
    older = folder / f"{family}-111111111111"
    other_model = folder / "other-12345678-000000000000"
    stale = folder / f".{family}-abandoned.tmp"  # a process died while saving
    fresh = folder / f".{family}-filling.tmp"  # another process is saving now
    single_file.write_bytes(b"old")
    for made in (older, other_model, stale, fresh):
        made.mkdir()
        (made / onnx_graphs.GRAPH).write_bytes(b"old")
    hours_ago = time.time() - 2 * onnx_graphs.STALE_SECONDS
    os.utime(stale, (hours_ago, hours_ago))
    OnnxEmbedder(files, graphs=folder)
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [kept.name, other_model.name, fresh.name]
    )


def test_the_command_line_keeps_graphs_in_gbr_home_unless_told_otherwise(
    tmp_path: Path,
) -> None:
    """What gbr.access.opening.load_model hands the embedder, for the environment given."""
    from gbr.core.embed.onnx_graphs import GRAPHS_ENV, kept_folder

    home = {"GBR_HOME": str(tmp_path / "home")}
    assert kept_folder(home) == tmp_path / "home" / "onnx"
    assert kept_folder({**home, GRAPHS_ENV: str(tmp_path / "elsewhere")}) == tmp_path / "elsewhere"
    assert kept_folder({**home, GRAPHS_ENV: "off"}) is None


def test_a_damaged_tokenizer_read_beside_the_session_is_one_config_error(tmp_path: Path) -> None:
    """The tokenizer is read on another thread while the session starts; its failure still
    reaches the caller as the one error that names the file."""
    from gbr.core.embed.model_files import ModelFiles
    from gbr.core.errors import ConfigError

    files = resolve_model_files()
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot load tokenizer"):
        OnnxEmbedder(ModelFiles(onnx=files.onnx, tokenizer=bad, model_id="x"))
