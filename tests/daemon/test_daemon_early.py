"""A daemon's pass is searchable once its chunks are in, before its vectors (issue 14).

The daemon's app in this process (FastAPI's TestClient), real model and files. A crash
drill fails the embedder on the pass's first page of vectors and on its retry, so the pass
ends with every chunk written and none embedded: exactly the state a pass is in while it
still embeds, held still.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from gbr.actors.faults import FaultPlan
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.daemon.app import create_app
from gbr.daemon.service import Daemon, DaemonConfig


@pytest.fixture
def client(small_example: Path, model: OnnxEmbedder, tmp_path: Path) -> Iterator[TestClient]:
    faults = FaultPlan(crash_at={"embedder": {1, 2}})
    config = DaemonConfig(
        root=small_example, db=tmp_path / "index.duckdb", faults=faults, embed_cache=None
    )
    daemon = Daemon(config, model)
    daemon.open()
    try:
        yield TestClient(
            create_app(daemon), base_url="http://127.0.0.1", raise_server_exceptions=False
        )
    finally:
        daemon.close()


def test_chunks_without_vectors_answer_by_bm25_and_the_next_pass_embeds_them(
    client: TestClient,
) -> None:
    failed = client.post("/index", json={})
    assert failed.status_code == 503 and "EmbedMissing" in failed.json()["error"]

    found = client.post("/search", json={"query": "parse an isbn", "k": 3}).json()
    chunks = found["embedded"]["of"]
    assert found["embedded"] == {"chunks": 0, "of": chunks} and chunks > 0
    assert any(r["path"].endswith("isbn.gleam") for r in found["results"])
    assert client.get("/status").json()["embedded"] == {"chunks": 0, "of": chunks}

    summary = client.post("/index", json={}).json()
    assert (summary["files_indexed"], summary["chunks_embedded"]) == (0, chunks)
    found = client.post("/search", json={"query": "parse an isbn", "k": 3}).json()
    assert found["embedded"] == {"chunks": chunks, "of": chunks}
    assert client.get("/status").json()["embedded"] == {"chunks": chunks, "of": chunks}
