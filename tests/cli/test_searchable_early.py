"""What a user sees of an index whose vectors are not all in (issue 14): `search` answers
from BM25 for the chunks without one and says how much is embedded, `status` too, and the
next `index` embeds exactly the rest though no file changed. Real processes and files."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.store.snapshot import WriterLock
from tests.actors.test_embed_after_write import cut_short
from tests.conftest import CTL


def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [CTL, *args], cwd=cwd, capture_output=True, text=True, env=env, timeout=300
    )


def ok(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    result = run(*args, cwd=cwd)
    assert result.returncode == 0, result.stderr
    return result


def test_a_part_embedded_index_searches_says_so_and_the_next_index_embeds_the_rest(
    small_example: Path, model: OnnxEmbedder
) -> None:
    db = small_example / ".gbr" / "index.duckdb"
    embedded, chunks = cut_short(small_example, db, model)
    assert 0 < embedded < chunks
    share = 100 * embedded // chunks

    found = json.loads(ok("search", "parse an isbn", "--json", cwd=small_example).stdout)
    assert found["embedded"] == {"chunks": embedded, "of": chunks}
    assert found["results"]  # hybrid answers: dense over the embedded, BM25 over all
    text = ok("search", "parse an isbn", cwd=small_example)
    assert f"dense: {share} % embedded (run `gleambrctl index` to embed the rest)" in text.stderr
    assert "isbn.gleam" in text.stdout
    assert "embedded" not in ok("search", "isbn", "--mode", "bm25", cwd=small_example).stderr
    with WriterLock(db):  # as an `index` run holds it while it embeds
        busy = ok("search", "parse an isbn", cwd=small_example)
    assert f"dense: {share} % embedded (index still embedding)" in busy.stderr

    status = json.loads(ok("status", "--json", cwd=small_example).stdout)
    assert status["embedded"] == {"chunks": embedded, "of": chunks}
    assert f"dense: {share} % embedded" in ok("status", cwd=small_example).stdout

    again = json.loads(ok("index", "--json", "--strict", cwd=small_example).stdout)
    assert (again["files_indexed"], again["chunks_embedded"]) == (0, chunks - embedded)
    assert again["seconds_searchable"] is not None

    done = ok("search", "parse an isbn", "--json", cwd=small_example)
    assert json.loads(done.stdout)["embedded"] == {"chunks": chunks, "of": chunks}
    assert "embedded" not in ok("search", "parse an isbn", cwd=small_example).stderr
    # Nothing is left to do: the next run changes nothing.
    last = json.loads(ok("index", "--json", cwd=small_example).stdout)
    assert (last["files_unchanged"], last["chunks_embedded"]) == (5, 0)
