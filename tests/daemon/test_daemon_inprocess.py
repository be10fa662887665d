"""The daemon's app in this process (FastAPI's TestClient): states a subprocess rarely shows.

Before the first pass the index is empty; a handler that blows up must still answer JSON;
a request whose work is dead-lettered must get an answer, not hang.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from gbr.actors.faults import FaultPlan, parse_faults
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.daemon.app import create_app
from gbr.daemon.service import Daemon, DaemonConfig
from tests.fake_llm import FakeLlm, Reply


@pytest.fixture
def make_daemon(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> Iterator[type[Daemon] | object]:
    made: list[Daemon] = []

    def make(faults: FaultPlan | None = None) -> tuple[Daemon, TestClient]:
        config = DaemonConfig(
            root=small_example, db=tmp_path / "index.duckdb", faults=faults, env=os.environ
        )
        daemon = Daemon(config, model)
        daemon.open()
        made.append(daemon)
        client = TestClient(
            create_app(daemon), base_url="http://127.0.0.1", raise_server_exceptions=False
        )
        return daemon, client

    yield make
    for daemon in made:
        daemon.close()


def test_search_before_the_first_pass_is_a_409_then_index_fills_it(make_daemon) -> None:
    daemon, client = make_daemon()
    early = client.post("/search", json={"query": "isbn"})
    assert early.status_code == 409
    assert early.json()["type"] == "IndexEmptyError" and "indexing" in early.json()["error"]
    summary = client.post("/index", json={}).json()
    assert summary["files_indexed"] == 5
    assert client.post("/search", json={"query": "isbn"}).json()["results"]
    assert daemon.status()["ready"] is True


def test_an_unexpected_error_is_a_503_with_a_json_body_never_a_500(make_daemon) -> None:
    daemon, client = make_daemon()

    def broken(*args: object) -> dict:
        raise RuntimeError("a bug")

    daemon.search = broken  # type: ignore[method-assign]
    response = client.post("/search", json={"query": "isbn"})
    assert response.status_code == 503
    assert response.json() == {
        "error": response.json()["error"],
        "type": "InternalError",
    }
    assert "RuntimeError" in response.json()["error"]
    metrics = client.get("/metrics").text
    assert 'route="/search",status="503"' in metrics


def test_a_full_pass_that_crashes_twice_answers_with_the_error(make_daemon) -> None:
    daemon, client = make_daemon(parse_faults("indexer@always"))
    response = client.post("/index", json={})
    assert response.status_code == 503
    assert response.json()["type"] == "SupervisionError"
    assert "crashed twice" in response.json()["error"]
    assert daemon.supervisor.restarts >= 1 and daemon.supervisor.dead_letters == 1
    assert client.get("/health").status_code == 200


def test_parse_faults_reads_the_drill_spec() -> None:
    plan = parse_faults("indexer@2, writer@1,oracle@always")
    assert plan is not None
    assert plan.crash_at == {"indexer": {2}, "writer": {1}} and plan.always == {"oracle"}
    assert parse_faults("") is None
    with pytest.raises(ValueError):
        parse_faults("writer")
    with pytest.raises(ValueError):
        parse_faults("writer@0")


def test_oracle_actors_per_model_are_kept_in_a_small_lru(
    make_daemon, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gbr.core.answer.oracle import AskOptions
    from gbr.daemon.oracles import MAX_ORACLES

    monkeypatch.setenv("GBR_OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # never called here
    daemon, _ = make_daemon()
    plans = [
        daemon.plan_ask("q", AskOptions(), "openai", f"model-{i}") for i in range(MAX_ORACLES + 3)
    ]
    assert len(daemon.oracles) == MAX_ORACLES
    assert len(daemon.supervisor.children()) == MAX_ORACLES + 1  # and the indexer
    assert plans[-1].oracle is daemon.plan_ask("q", AskOptions(), "openai", "model-10").oracle
    assert plans[0].oracle.actor_ref is None  # the oldest was stopped


def test_an_oracle_evicted_while_it_answers_finishes_its_answer(
    make_daemon, monkeypatch: pytest.MonkeyPatch, fake_llm: FakeLlm
) -> None:
    from gbr.core.answer.oracle import AskOptions
    from gbr.daemon.oracles import MAX_ORACLES

    for name, value in fake_llm.env("openai").items():
        monkeypatch.setenv(name, value)
    daemon, _ = make_daemon()
    daemon.index_all()
    fake_llm.script(Reply("one two three four five", chunks=5, chunk_delay=0.3))
    first = daemon.plan_ask("how is an isbn parsed?", AskOptions(hyde=False), "openai", "m-0")
    results: list[Any] = []
    answering = threading.Thread(target=lambda: results.append(daemon.run_ask(first)))
    answering.start()
    deadline = time.monotonic() + 30
    while not fake_llm.requests:
        assert time.monotonic() < deadline, "the question never reached the LLM"
        time.sleep(0.02)
    for i in range(1, MAX_ORACLES + 1):  # evicts m-0's actor while it streams
        daemon.plan_ask("q", AskOptions(hyde=False), "openai", f"m-{i}")
    answering.join(30)
    (outcome,) = results
    assert outcome.error is None, outcome.error
    assert outcome.answer["answer"] == "one two three four five"
