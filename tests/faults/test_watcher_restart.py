"""Issue 15, item 3 (daemon): a watcher that dies is restarted, and `/health` says so.

On main, a file named `bad\\xffname.gleam` ended watchfiles' iterator ("Unable to decode
path") and the watcher thread for good: later saves were never indexed, and `/health`
still said ok.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from gbr.actors.faults import parse_faults
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.daemon.app import create_app
from gbr.daemon.service import Daemon, DaemonConfig
from tests.daemon.conftest import append_function, wait_until

BAD_NAME = os.fsdecode(b"src/bad\xffname.gleam")
BOUND = 120.0  # seconds; the daemon should act within a few


@pytest.fixture
def watching(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> Iterator[Callable[..., tuple[Daemon, TestClient]]]:
    """A daemon in this process, watching `small_example`, its first pass done."""
    made: list[Daemon] = []

    def start(faults: str | None = None, first_pass: bool = True) -> tuple[Daemon, TestClient]:
        config = DaemonConfig(
            root=small_example,
            db=tmp_path / "index.duckdb",
            debounce_ms=100,
            faults=parse_faults(faults),
            env=os.environ,
        )
        daemon = Daemon(config, model)
        made.append(daemon)
        daemon.open()
        daemon.start_watching()
        if first_pass:
            wait_until(
                lambda: daemon.first_pass.is_set() and daemon.indexing is None, "first pass", BOUND
            )
        # A loopback Host, as the daemon's gate requires of every request.
        return daemon, TestClient(create_app(daemon), base_url="http://127.0.0.1")

    yield start
    for daemon in made:
        daemon.close()


def names(client: TestClient, query: str) -> list[str]:
    body = client.post("/search", json={"query": query, "mode": "bm25", "k": 5}).json()
    return [hit["name"] for hit in body.get("results", [])]


def test_a_watcher_killed_by_an_undecodable_name_restarts_and_later_saves_are_indexed(
    watching: Callable[..., tuple[Daemon, TestClient]], small_example: Path
) -> None:
    daemon, client = watching()
    (small_example / BAD_NAME).write_bytes(b"pub fn bad_name() -> Int {\n  1\n}\n")
    wait_until(lambda: daemon.watcher.restarts >= 1, "the watcher to restart", BOUND)
    assert "Unable to decode path" in (daemon.watcher.error or "")
    wait_until(lambda: daemon.watcher.state == "watching", "the watcher to watch again", BOUND)
    append_function(small_example, "src/bookshelf/config.gleam", "saved_after_the_restart")
    wait_until(
        lambda: "saved_after_the_restart" in names(client, "saved_after_the_restart"),
        "a save after the restart to be searchable",
        BOUND,
    )
    # Back: not degraded. (A full pass reads the bad file, and watchfiles dies on the
    # event that read makes too, so more restarts may come until the walker skips it.)
    wait_until(lambda: client.get("/health").json()["status"] == "ok", "health ok", BOUND)
    assert client.get("/status").json()["watcher_restarts"] >= 1


def test_health_is_degraded_while_the_watcher_is_down_and_after_it_gave_up(
    watching: Callable[..., tuple[Daemon, TestClient]],
) -> None:
    # Every start of the watcher fails; it backs off 0.2 s, 0.4 s... (about 6 s in all)
    # before it gives up, so the test looks at once, not after the first pass.
    daemon, client = watching("watcher@always", first_pass=False)

    def watcher_part(state: str) -> dict | None:
        response = client.get("/health")
        assert response.status_code == 200  # still alive: liveness is not health
        body = response.json()
        parts = [p for p in body["degraded"] if p["component"] == "watcher"]
        return (
            body if parts and parts[0]["state"] == state and body["status"] == "degraded" else None
        )

    restarting = wait_until(lambda: watcher_part("restarting"), "degraded, restarting", BOUND)
    assert "injected crash in watcher" in restarting["degraded"][0]["reason"]
    failed = wait_until(lambda: watcher_part("failed"), "degraded, given up", BOUND)
    assert "restart the daemon" in failed["degraded"][0]["reason"]
    assert daemon.status()["problems"] == failed["degraded"]
