"""Derived files are checked, not trusted (issue 32, item 5): the shared embed cache, the
vector file beside an index and the kept ONNX graphs, each damaged in several ways, must
give the same hits as a fresh index, with one warning, and no numpy warning.

Before: rows of the cache holding another text's vector, or a NaN vector, were served (wrong
hits, scores of 0.0 and a `RuntimeWarning`); the vector file's rows reordered or flipped at
the same size changed rankings silently; a damaged kept graph made garbage vectors with
exit 0, and a random one gave `search` a traceback and failed every `index`.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import struct
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from gbr.core.embed.onnx_graphs import verify
from tests.conftest import CTL, copy_small
from tests.daemon.conftest import clean_env
from tests.faults.conftest import WIDE, ctl

QUERIES = ("check that an ISBN is valid", "a member borrows a book", "read the settings file")
Hits = list[list[tuple[str, int, float]]]


def index(root: Path, home: Path, **env: str) -> None:
    done = ctl("index", str(root), cwd=root, home=home, **env)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def dense_hits(root: Path, home: Path, **env: str) -> tuple[Hits, str]:
    """Every query's dense hits (path, line, score to 4 places), in one `search -`."""
    done = subprocess.run(
        [CTL, "search", "-", "--mode", "dense", "-k", "10"],
        cwd=root,
        env=clean_env(home, COLUMNS=WIDE, **env),
        input="\n".join(QUERIES),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "RuntimeWarning" not in done.stderr, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    hits = [
        [(h["path"], h["start_line"], round(h["score"], 4)) for h in line["results"]]
        for line in lines
    ]
    return hits, done.stderr


def events(root: Path, name: str) -> int:
    log = root / ".gbr" / "events.jsonl"
    lines = log.read_text().splitlines() if log.exists() else []
    return sum(json.loads(line).get("event") == name for line in lines)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Hits:
    """The dense hits of a fresh index of the package, in a home of its own."""
    base = tmp_path_factory.mktemp("fresh")
    root = copy_small(base / "pkg")
    index(root, base / "home")
    hits, _ = dense_hits(root, base / "home")
    assert all(hits) and all(score != 0.0 for line in hits for _, _, score in line)
    return hits


# -- the shared embed cache -----------------------------------------------------------------


@pytest.fixture(scope="module")
def cached_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home whose shared cache holds every vector of the package (indexed once there)."""
    base = tmp_path_factory.mktemp("cached")
    index(copy_small(base / "pkg"), base / "home")
    assert (base / "home" / "embed-cache.sqlite").is_file()
    return base / "home"


def _rows(con: sqlite3.Connection) -> list[tuple[int, bytes]]:
    return list(con.execute("SELECT id, vector FROM vectors ORDER BY id"))


def swap_vectors(con: sqlite3.Connection) -> None:
    """Each row takes the vector of the next one: every key holds another text's vector."""
    rows = _rows(con)
    for (row, _), (_, vector) in zip(rows, rows[1:] + rows[:1], strict=True):
        con.execute("UPDATE vectors SET vector = ? WHERE id = ?", (vector, row))


def swap_whole_rows(con: sqlite3.Connection) -> None:
    """The same, carrying every column but the key (a checksum too, when rows have one)."""
    columns = [c[1] for c in con.execute("PRAGMA table_info(vectors)") if c[1] not in ("id", "key")]
    rows = list(con.execute(f"SELECT id, {', '.join(columns)} FROM vectors ORDER BY id"))
    sets = ", ".join(f"{c} = ?" for c in columns)
    for row, other in zip(rows, rows[1:] + rows[:1], strict=True):
        con.execute(f"UPDATE vectors SET {sets} WHERE id = ?", (*other[1:], row[0]))


def flip_bytes(con: sqlite3.Connection) -> None:
    """A few bytes of every vector flipped, at the same length."""
    for row, vector in _rows(con):
        data = bytearray(vector)
        for at in (3, 403, 803):  # the high byte of three floats: sign and exponent
            data[at] ^= 0x41
        con.execute("UPDATE vectors SET vector = ? WHERE id = ?", (bytes(data), row))


def not_finite(con: sqlite3.Connection) -> None:
    """Every vector NaN, Inf or both."""
    for row, vector in _rows(con):
        data = np.frombuffer(vector, dtype=np.float32).copy()
        data[row % 3 :: 3] = (np.nan, np.inf, -np.inf)[row % 3]
        con.execute("UPDATE vectors SET vector = ? WHERE id = ?", (data.tobytes(), row))


@pytest.mark.parametrize("damage", [swap_vectors, swap_whole_rows, flip_bytes, not_finite])
def test_damaged_cache_rows_are_embedded_again(
    damage: Callable[[sqlite3.Connection], None], cached_home: Path, fresh: Hits, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    shutil.copytree(cached_home, home)
    con = sqlite3.connect(home / "embed-cache.sqlite", isolation_level=None)
    damage(con)
    con.close()
    root = copy_small(tmp_path / "pkg")
    done = ctl("index", str(root), cwd=root, home=home)
    assert done.returncode == 0, done.stderr
    hits, _ = dense_hits(root, home)
    assert hits == fresh
    assert events(root, "embed_cache_rows_refused") == 1
    assert done.stderr.count("embed cache") == 1, done.stderr
    # The refused rows were replaced: the next package is served from the cache, silently.
    again = copy_small(tmp_path / "again")
    done = ctl("index", str(again), cwd=again, home=home)
    assert done.returncode == 0 and "embed cache" not in done.stderr, done.stderr
    assert dense_hits(again, home)[0] == fresh


# -- the vector file beside the index -----------------------------------------------------


def _layout(path: Path) -> tuple[bytearray, int, int, int, int]:
    data = bytearray(path.read_bytes())
    _, length, _ = struct.unpack("<8sII", data[:16])
    header = json.loads(data[16 : 16 + length])
    count, dim = header["fingerprint"]["count"], header["fingerprint"]["dim"]
    return data, header["ids_offset"], header["rows_offset"], count, dim


def reverse_rows(path: Path) -> None:
    data, _, rows_at, count, dim = _layout(path)
    rows = np.frombuffer(bytes(data[rows_at:]), dtype="<f4").reshape(count, dim)
    data[rows_at:] = rows[::-1].tobytes()
    path.write_bytes(bytes(data))


def reverse_ids(path: Path) -> None:
    data, ids_at, _, count, _ = _layout(path)
    ids = np.frombuffer(bytes(data[ids_at : ids_at + count * 8]), dtype="<i8")
    data[ids_at : ids_at + count * 8] = ids[::-1].tobytes()
    path.write_bytes(bytes(data))


def flip_row_bytes(path: Path) -> None:
    """The high byte of one float in each of a few rows: same size, other magnitudes."""
    data, _, rows_at, count, dim = _layout(path)
    for row in range(0, count, max(1, count // 5)):
        data[rows_at + row * dim * 4 + 3] ^= 0x41
    path.write_bytes(bytes(data))


def nan_row(path: Path) -> None:
    data, _, rows_at, _, dim = _layout(path)
    data[rows_at : rows_at + dim * 4] = np.full(dim, np.nan, dtype="<f4").tobytes()
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [reverse_rows, reverse_ids, flip_row_bytes, nan_row])
def test_a_damaged_vector_file_is_rebuilt_from_the_index(
    damage: Callable[[Path], None], fresh: Hits, tmp_path: Path
) -> None:
    root, home = copy_small(tmp_path / "pkg"), tmp_path / "home"
    index(root, home)
    vectors = root / ".gbr" / "index.duckdb.vectors"
    size = vectors.stat().st_size
    damage(vectors)
    assert vectors.stat().st_size == size
    hits, stderr = dense_hits(root, home)
    assert hits == fresh
    assert "vector_file_damaged" in stderr
    assert events(root, "vector_file_damaged") == 1
    hits, stderr = dense_hits(root, home)  # rebuilt: mapped again, and silent
    assert hits == fresh and "vector_file_damaged" not in stderr


# -- kept ONNX graphs -------------------------------------------------------------------


def _graph_files(home: Path) -> tuple[Path, Path]:
    graphs = [p for p in (home / "onnx").iterdir() if not p.name.startswith(".")]
    assert len(graphs) == 1, graphs
    return graphs[0] / "graph.onnx", graphs[0] / "graph.onnx.data"


def flip_weights(home: Path) -> None:
    """One byte in every 64 KiB of the weights flipped, at the same size and mtime."""
    _, data_file = _graph_files(home)
    stat = data_file.stat()
    data = bytearray(data_file.read_bytes())
    for at in range(4096 + 3, len(data), 65536):
        data[at] ^= 0x41
    data_file.write_bytes(bytes(data))
    os.utime(data_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def random_graph(home: Path) -> None:
    graph, _ = _graph_files(home)
    graph.write_bytes(np.random.default_rng(1).bytes(graph.stat().st_size))


def random_weights(home: Path) -> None:
    _, data_file = _graph_files(home)
    data_file.write_bytes(np.random.default_rng(2).bytes(data_file.stat().st_size))


@pytest.fixture(scope="module")
def kept_graphs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of kept graphs, made once by indexing a one-function package (another
    package, so no home that gets a copy holds a vector of the package's texts)."""
    base = tmp_path_factory.mktemp("graphs")
    seed = base / "seed"
    (seed / "src").mkdir(parents=True)
    (seed / "gleam.toml").write_text('name = "seed"\nversion = "1.0.0"\n')
    (seed / "src" / "seed.gleam").write_text("pub fn seed() -> Int {\n  1\n}\n")
    index(seed, base / "home", GBR_ONNX_GRAPHS=str(base / "onnx"))
    return base / "onnx"


@pytest.mark.parametrize("damage", [flip_weights, random_graph, random_weights])
def test_a_damaged_kept_graph_is_made_again_before_it_embeds(
    damage: Callable[[Path], None], fresh: Hits, kept_graphs: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    kept = {"GBR_ONNX_GRAPHS": str(home / "onnx")}  # the suite shares one folder otherwise
    shutil.copytree(kept_graphs, home / "onnx")
    graph, _ = _graph_files(home)
    # The copy's stamps renewed, as a first load would, so that a write keeping the size and
    # modification time is what the next run has to notice.
    assert verify(graph.parent) is None
    damage(home)
    root = copy_small(tmp_path / "pkg")
    done = ctl("index", str(root), cwd=root, home=home, **kept)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert events(root, "onnx_graph_damaged") == 1  # `index` echoes no warning event
    assert done.stderr.count("onnx_graph_damaged") <= 1, done.stderr
    hits, stderr = dense_hits(root, home, **kept)
    assert hits == fresh
    assert "onnx_graph_damaged" not in stderr  # made again by the run: trusted from now on
    # What the run stored in the shared cache is what a sound graph makes.
    again = copy_small(tmp_path / "again")
    index(again, home, **kept)
    assert dense_hits(again, home, **kept)[0] == fresh


# -- a model that gives vectors that are not finite ---------------------------------------


def test_a_model_giving_nan_vectors_stops_with_one_line_and_stores_none(tmp_path: Path) -> None:
    """A damaged model file (here: a LayerNorm's weights set to NaN) must not fill the
    index or the shared cache with NaN vectors, scored 0.0 with a numpy warning."""
    import onnx  # a dependency of gbr (it rewrites the default model for int8 products)
    from onnx import numpy_helper

    from gbr.core.embed.model_files import default_model_files

    files = default_model_files()
    model = onnx.load(str(files.onnx))
    for weights in model.graph.initializer:
        if weights.name.endswith("embeddings.LayerNorm.weight"):
            poisoned = np.full_like(numpy_helper.to_array(weights), np.nan)
            weights.CopyFrom(numpy_helper.from_array(poisoned, weights.name))
            break
    else:
        pytest.fail("the model has no embeddings LayerNorm to damage")
    folder = tmp_path / "model"
    folder.mkdir()
    onnx.save(model, str(folder / "model.onnx"))
    shutil.copyfile(files.tokenizer, folder / "tokenizer.json")
    root, home = copy_small(tmp_path / "pkg"), tmp_path / "home"
    damaged = {"GBR_MODEL_DIR": str(folder)}
    done = ctl("index", str(root), cwd=root, home=home, **damaged)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr and "RuntimeWarning" not in done.stderr, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert "not finite" in last and str(folder / "model.onnx") in last, done.stderr
    cache = home / "embed-cache.sqlite"
    if cache.exists():
        con = sqlite3.connect(cache)
        assert con.execute("SELECT count(*) FROM vectors").fetchone()[0] == 0
        con.close()
    # The files written are kept for BM25, none with a vector.
    done = ctl("search", "isbn", cwd=root, home=home, **damaged)
    assert done.returncode == 0, done.stderr
    assert "RuntimeWarning" not in done.stderr and "dense: 0 % embedded" in done.stderr
