"""A cold `gleambrctl search` imports what a search needs and no more: every module it loads
is paid for on each run (pyarrow alone was 0.2 s of a 1 s search on 2 cores)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.paths import default_db
from gbr.core.store import vector_file
from tests.conftest import PROVIDER_VARS, copy_small

# What only index, ask, chat or a daemon's client use.
NOT_FOR_A_SEARCH = (
    "pyarrow",
    "pykka",
    "structlog",
    "pathspec",
    "httpx",
    "gbr.actors",
    "gbr.core.answer.oracle",
    "gbr.core.rank.rerank",
    "gbr.core.llm.registry",
    "gbr.core.llm.gemini",
    "gbr.core.parse.chunker",
    "gbr.core.store.indexing",
    "gbr.core.graph.extract",
    "gbr.access.answering",
    "gbr.access.remote",
    # typer checks option values through pydantic, unless they are plain (65-70 ms).
    "pydantic",
    # The code graph's tables, and the prompt and LLM modules they bring: only writes and
    # graph questions (and a ranking by centrality) read them.
    "gbr.core.graph.store",
    "gbr.core.answer.context",
    "gbr.core.answer.prompt",
    "gbr.core.llm",
    "gbr.core.parse.walker",  # index's unchanged-tree check
)
# The shared embed cache: a hybrid search reads the second opinion's vectors there.
HYBRID_ONLY = ("sqlite3", "gbr.core.embed.cache")

# As the console script runs it; then the loaded modules' names, as JSON on stderr.
_CHILD = """
import json, sys
from gbr.cli import app
try:
    app(sys.argv[1:], prog_name="gleambrctl")
except SystemExit as exc:
    if exc.code:
        raise
sys.stderr.write(json.dumps(sorted(sys.modules)) + "\\n")
"""


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory, model: OnnxEmbedder) -> Path:
    """Indexed as `gleambrctl index` does it, vector file included: the search that would
    have to build that file reads the vectors through Arrow, once."""
    root = copy_small(tmp_path_factory.mktemp("cold") / "small")
    db = default_db(root)
    run_index(IndexOptions(root=root, db=db, staged=True), model)
    assert vector_file.file_for(db).is_file()
    return root


@pytest.mark.parametrize("mode", ["hybrid", "bm25"])
def test_a_search_loads_neither_the_writer_nor_the_actors_nor_the_llm(
    package: Path, mode: str
) -> None:
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    db = str(default_db(package))
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            "search",
            "check that an ISBN is valid",
            "--db",
            db,
            "--mode",
            mode,
        ],
        capture_output=True,
        text=True,
        env={**env, "NO_COLOR": "1"},
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "isbn" in result.stdout  # it did search, and found
    loaded = json.loads(result.stderr.strip().splitlines()[-1])
    assert "duckdb" in loaded
    unwanted = [m for m in loaded if any(m == n or m.startswith(n + ".") for n in NOT_FOR_A_SEARCH)]
    assert unwanted == []
    # BM25 embeds no query: the models, onnxruntime and the vector cache stay unloaded.
    for module in ("onnxruntime", *HYBRID_ONLY):
        assert (module in loaded) == (mode == "hybrid"), module


def test_one_query_ranks_as_a_stream_of_queries_does(package: Path) -> None:
    """A one-query search leaves the model's weights unpacked (other rounding, within
    1e-5); `search -` packs them as the indexer did. Same hits, same order."""
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    db = str(default_db(package))
    queries = ["parse an isbn", "validate the checksum digit", "format a date", "to_string"]
    base = [sys.executable, "-m", "gbr.cli", "search", "--db", db, "-k", "8", "--json"]
    stream = subprocess.run(
        [*base[:4], "-", *base[4:]],
        input="\n".join(queries) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert stream.returncode == 0, stream.stderr
    streamed = [json.loads(line)["results"] for line in stream.stdout.splitlines()]
    for query, want in zip(queries, streamed, strict=True):
        one = subprocess.run(
            [*base[:4], query, *base[4:]], capture_output=True, text=True, env=env, timeout=300
        )
        assert one.returncode == 0, one.stderr
        got = json.loads(one.stdout)["results"]
        assert [(h["path"], h["start_line"]) for h in got] == [
            (h["path"], h["start_line"]) for h in want
        ]
        assert [h["score"] for h in got] == pytest.approx([h["score"] for h in want], abs=1e-5)


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (["-k", "200", "--json"], 0, ""),
        (["-k", "0"], 2, "Invalid value for '-k' / '--top'"),
        (["--mode", "nope"], 2, "unknown --mode 'nope'"),
    ],
)
def test_the_console_script_ends_a_search_at_once_with_its_output_whole(
    package: Path, args: list[str], code: int, says: str
) -> None:
    """`app()` from the console script ends a search without the interpreter's teardown:
    everything printed arrives, and the exit code is the command's."""
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    db = str(default_db(package))
    done = subprocess.run(
        [sys.executable, "-m", "gbr.cli", "search", "isbn", "--db", db, *args],
        capture_output=True,
        text=True,
        env={**env, "NO_COLOR": "1"},
        timeout=300,
    )
    assert done.returncode == code, done.stderr
    assert says in done.stderr
    if code == 0:
        found = json.loads(done.stdout)  # the whole document, flushed before the exit
        assert 0 < len(found["results"]) <= 200
