"""The daemon's HTTP API and the CLI going through it, against one running daemon.

The daemon indexes a copy of the small example and talks to the fake LLM server as Groq.
Tests here only read, or add files no other test looks at, so they share it.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gbr.core.embed.model_files import DEFAULT_MODEL_ID
from tests.daemon.conftest import (
    CTL,
    HIT_KEYS,
    RunningDaemon,
    clean_env,
    run_ctl,
    small_daemon,
)
from tests.fake_llm import FakeLlm, Reply

KEY = "sk-test-DAEMON-1234567890"
QUESTION = "how do I check that a book number is valid"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, fake: FakeLlm) -> Iterator[RunningDaemon]:
    with small_daemon(tmp_path_factory.mktemp("api"), fake, KEY) as running:
        yield running


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str]:
    """The CLI's environment: no provider keys at all, since the daemon has its own."""
    return clean_env(tmp_path / "home")


# --- endpoints and schemas ---------------------------------------------------------------


def test_health_names_the_pid_of_the_discovery_file(daemon: RunningDaemon) -> None:
    body = daemon.get("/health").json()
    assert body["status"] == "ok" and body["pid"] == daemon.info.pid == daemon.proc.pid


def test_status_is_the_cli_status_plus_daemon_fields(daemon: RunningDaemon) -> None:
    status = daemon.status()
    assert status["files_ok"] == 5 and status["chunks"] > 50
    assert status["db"] == str(daemon.db) and status["root"] == str(daemon.root)
    assert status["model_id"] == DEFAULT_MODEL_ID
    assert status["pid"] == daemon.info.pid and status["port"] == daemon.info.port
    assert status["watcher"] == "watching" and status["ready"] is True
    assert status["restarts"] == 0 and status["queue_depth"] == 0
    assert status["uptime_seconds"] > 0 and status["last_run"]["files_seen"] == 5


def test_search_returns_the_search_json_object(daemon: RunningDaemon) -> None:
    data = daemon.search("check that an ISBN is valid", k=3)
    assert data["query"] == "check that an ISBN is valid" and data["mode"] == "hybrid"
    assert [r["rank"] for r in data["results"]] == [1, 2, 3]
    assert all(set(r) == HIT_KEYS for r in data["results"])
    assert "is_valid" in [r["name"] for r in data["results"]]


def test_search_filters_and_modes(daemon: RunningDaemon) -> None:
    bm25 = daemon.search("parse", mode="bm25", kinds=["function"], path="src/", k=5)
    assert bm25["mode"] == "bm25" and bm25["results"]
    assert all(r["kind"] == "function" and r["path"].startswith("src/") for r in bm25["results"])
    module = daemon.search("isbn", module="bookshelf/isbn", mode="dense")["results"]
    assert module and all(r["module"] == "bookshelf/isbn" for r in module)
    assert "hint" not in daemon.search("isbn", module="bookshelf/isbn")


def test_a_filter_that_matches_nothing_gets_a_hint_through_the_daemon(
    daemon: RunningDaemon, cli_env: dict
) -> None:
    data = daemon.search("isbn", module="bookshelf/isbnn")
    assert data["results"] == []
    assert data["hint"].startswith(
        "no chunk is in module bookshelf/isbnn; modules here: bookshelf/isbn"
    )
    human = run_ctl("search", "isbn", "--path", "lib/", cwd=daemon.root, env=cli_env)
    assert human.returncode == 0 and human.stdout.strip() == "no matches"
    assert human.stderr.startswith("note: no chunk is under path lib/"), human.stderr


def test_search_and_ask_take_the_tests_policy(daemon: RunningDaemon) -> None:
    query = "parse an isbn and check the round trip"
    everything = daemon.search(query, k=40, tests="include")["results"]
    assert any(r["path"].startswith("test/") for r in everything)
    library = daemon.search(query, k=40, tests="exclude")["results"]
    assert library and not [r for r in library if r["path"].startswith("test/")]
    asked = daemon.post(
        "/ask", {"question": query, "dry_run": True, "stream": False, "tests": "exclude"}
    )
    assert asked.status_code == 200, asked.text
    assert not [c for c in asked.json()["chunks"] if c["path"].startswith("test/")]
    bad = daemon.post("/ask", {"question": query, "dry_run": True, "tests": "hide"})
    assert bad.status_code == 422 and "tests" in bad.json()["error"]


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({}, 422, "query"),
        ({"query": "x", "k": 0}, 422, "k"),
        ({"query": "x", "k": 10_000}, 422, "k"),
        ({"query": "x", "mode": "fuzzy"}, 422, "mode"),
        ({"query": "x", "kinds": ["macro"]}, 422, "kinds"),
        ({"query": "x", "tests": "hide"}, 422, "tests"),
        ({"query": "x", "top_k": 3}, 422, "top_k"),
        ({"query": 42}, 422, "query"),
        (["query"], 422, "JSON object"),
        ({"query": "   "}, 400, "query is empty"),
    ],
)
def test_bad_search_bodies_get_a_4xx_with_a_one_line_json_error(
    daemon: RunningDaemon, body: Any, status: int, words: str
) -> None:
    response = daemon.post("/search", body)
    assert response.status_code == status
    error = response.json()
    assert set(error) == {"error", "type"}
    assert words in error["error"] and "\n" not in error["error"]


def test_a_body_that_is_not_json_is_a_4xx(daemon: RunningDaemon) -> None:
    response = daemon.post(
        "/search", content=b"query=x", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert "not valid JSON" in response.json()["error"]
    missing = daemon.post("/search", content=b"", headers={"content-type": "application/json"})
    assert missing.status_code == 422 and "missing" in missing.json()["error"]


def test_unknown_routes_and_methods_get_json_errors(daemon: RunningDaemon) -> None:
    assert daemon.get("/nope").json()["type"] == "HTTPException"
    assert daemon.get("/nope").status_code == 404
    assert daemon.get("/search").status_code == 405
    assert "error" in daemon.get("/search").json()


def test_bad_ask_bodies_get_a_4xx(daemon: RunningDaemon) -> None:
    assert daemon.post("/ask", {"question": "x", "k": 0}).status_code == 422
    assert daemon.post("/ask", {"question": "x", "budget": 10}).status_code == 422
    unknown = daemon.post("/ask", {"question": "x", "provider": "nope", "stream": False})
    assert unknown.status_code == 400 and "unknown LLM provider" in unknown.json()["error"]
    empty = daemon.post("/ask", {"question": "  "})
    assert empty.status_code == 400


def test_openapi_spec_lists_every_endpoint(daemon: RunningDaemon) -> None:
    spec = daemon.get("/openapi.json").json()
    assert {"/health", "/status", "/search", "/ask", "/index", "/llm", "/metrics"} <= set(
        spec["paths"]
    )
    search = spec["paths"]["/search"]["post"]
    assert {"200", "422"} <= set(search["responses"])


def test_metrics_are_prometheus_text(daemon: RunningDaemon) -> None:
    daemon.search("isbn")
    response = daemon.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    families = re.findall(r"^# TYPE (\S+) (counter|gauge|histogram)$", text, re.M)
    helps = re.findall(r"^# HELP (\S+) .+$", text, re.M)
    assert {name for name, _ in families} == set(helps)
    for line in text.splitlines():
        if not line.startswith("#"):
            assert re.fullmatch(r'[a-z_]+(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? \S+', line)
            float(line.rsplit(" ", 1)[1].replace("+Inf", "inf"))
    for name in (
        "gbr_files",
        "gbr_chunks",
        "gbr_parse_failures_total",
        "gbr_actor_restarts_total",
        "gbr_queue_depth",
        "gbr_http_request_seconds",
        "gbr_index_run_seconds",
    ):
        assert name in dict(families)
    assert 'gbr_files{status="ok"} 5' in text
    assert re.search(
        r'gbr_http_requests_total\{method="POST",route="/search",status="200"\} \d', text
    )
    assert 'gbr_queue_depth{actor="indexer"} 0' in text


def test_index_runs_a_full_pass_and_returns_the_index_summary(daemon: RunningDaemon) -> None:
    response = daemon.post("/index", {})
    assert response.status_code == 200, response.text
    summary = response.json()
    assert summary["files_seen"] == 5 and summary["files_unchanged"] == 5
    assert summary["root"] == str(daemon.root) and summary["db"] == str(daemon.db)


# --- ask ---------------------------------------------------------------------------------


def test_ask_streams_tokens_then_the_answer(daemon: RunningDaemon, fake: FakeLlm) -> None:
    fake.script(Reply("Use isbn.is_valid (src/bookshelf/isbn.gleam:51).", chunks=5))
    events = daemon.ask_events({"question": QUESTION, "hyde": False})
    kinds = [kind for kind, _ in events]
    assert kinds == ["context"] + ["token"] * 5 + ["answer"]
    answer = events[-1][1]
    assert events[0][1] == {"chunks": answer["chunks"]}  # the sources, before any token
    assert "".join(data for kind, data in events if kind == "token") == answer["answer"]
    assert answer["answer"] == "Use isbn.is_valid (src/bookshelf/isbn.gleam:51)."
    assert answer["provider"] == "groq" and answer["error"] is None
    assert answer["chunks"] and answer["citations"][0]["path"] == "src/bookshelf/isbn.gleam"
    assert fake.requests[-1].headers["authorization"] == f"Bearer {KEY}"


def test_ask_without_stream_returns_the_ask_json_object(
    daemon: RunningDaemon, fake: FakeLlm
) -> None:
    fake.script(Reply("Call parse.", chunks=2))
    response = daemon.post("/ask", {"question": QUESTION, "hyde": False, "stream": False})
    assert response.status_code == 200
    data = response.json()
    assert data["answer"] == "Call parse." and "exit_code" not in data


def test_a_missing_provider_key_sends_the_chunks_then_an_error_event(
    daemon: RunningDaemon,
) -> None:
    events = daemon.ask_events({"question": QUESTION, "provider": "gemini", "hyde": False})
    assert [kind for kind, _ in events] == ["context", "answer", "error"]
    answer, error = events[1][1], events[2][1]
    assert answer["chunks"] and "GEMINI_API_KEY" in answer["error"]
    assert error["exit_code"] == 3 and "GEMINI_API_KEY" in error["error"]


def test_a_failing_provider_is_an_error_event_with_exit_code_4(
    daemon: RunningDaemon, fake: FakeLlm
) -> None:
    fake.script(Reply.error(401))
    events = daemon.ask_events({"question": QUESTION, "hyde": False})
    assert [kind for kind, _ in events] == ["context", "answer", "error"]
    assert events[2][1]["exit_code"] == 4 and "groq" in events[2][1]["error"]
    assert events[1][1]["chunks"]


def test_dry_run_returns_the_prompt_and_calls_nothing(daemon: RunningDaemon, fake: FakeLlm) -> None:
    before = len(fake.requests)
    data = daemon.post("/ask", {"question": QUESTION, "dry_run": True, "stream": False}).json()
    assert len(fake.requests) == before
    assert [m["role"] for m in data["prompt"]] == ["system", "user"]
    assert "### [1] " in data["prompt"][1]["content"]


def test_the_graph_context_is_sent_unless_the_request_turns_it_off(daemon: RunningDaemon) -> None:
    body = {"question": QUESTION, "dry_run": True, "stream": False, "k": 1}
    data = daemon.post("/ask", body).json()
    assert data["graph_context"], "the top chunk uses definitions of the index"
    for outline in data["graph_context"]:
        assert f"### [+] {outline['name']} ({outline['kind']})" in data["prompt"][1]["content"]
    off = daemon.post("/ask", {**body, "graph_context": False}).json()
    assert off["graph_context"] == [] and "### [+] " not in off["prompt"][1]["content"]
    assert off["chunks"] == data["chunks"]


# --- the CLI through the daemon --------------------------------------------------------------


def test_cli_status_goes_through_the_daemon(daemon: RunningDaemon, cli_env: dict) -> None:
    result = run_ctl("status", "--json", cwd=daemon.root, env=cli_env)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["pid"] == daemon.info.pid and data["files_ok"] == 5
    human = run_ctl("status", cwd=daemon.root, env=cli_env)
    assert f"daemon pid {daemon.info.pid}" in human.stdout and "files  5 indexed" in human.stdout


def test_cli_search_goes_through_the_daemon_with_the_same_json(
    daemon: RunningDaemon, cli_env: dict
) -> None:
    result = run_ctl(
        "search", "check that an ISBN is valid", "-k", "3", "--json", cwd=daemon.root, env=cli_env
    )
    assert result.returncode == 0, result.stderr
    stamped = json.loads(result.stdout)
    assert (stamped.pop("schema_version"), stamped.pop("package")) == (1, "bookshelf")
    assert stamped == daemon.search("check that an ISBN is valid", k=3)
    human = run_ctl("search", "validate an ISBN-13", "-k", "2", cwd=daemon.root, env=cli_env)
    assert "src/bookshelf/isbn.gleam:" in human.stdout and "function" in human.stdout
    lines = run_ctl("search", "-", "-k", "1", cwd=daemon.root, env=cli_env, stdin="isbn\nmember\n")
    assert [json.loads(x)["query"] for x in lines.stdout.splitlines()] == ["isbn", "member"]
    bad = run_ctl("search", "x", "--mode", "fuzzy", cwd=daemon.root, env=cli_env)
    assert bad.returncode == 2


def test_cli_ask_streams_through_the_daemon_with_its_keys(
    daemon: RunningDaemon, fake: FakeLlm, cli_env: dict
) -> None:
    fake.script(Reply("Use isbn.is_valid (src/bookshelf/isbn.gleam:51).", chunks=4))
    result = run_ctl("ask", "--no-hyde", QUESTION, cwd=daemon.root, env=cli_env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Use isbn.is_valid (src/bookshelf/isbn.gleam:51)."
    assert "sources: " in result.stderr and "src/bookshelf/isbn.gleam:" in result.stderr
    missing = run_ctl("ask", "--provider", "gemini", QUESTION, cwd=daemon.root, env=cli_env)
    assert missing.returncode == 3 and "GEMINI_API_KEY" in missing.stderr
    assert "### [1] " in missing.stdout  # the retrieved context is still printed


def test_cli_index_goes_through_the_daemon(daemon: RunningDaemon, cli_env: dict) -> None:
    result = run_ctl("index", str(daemon.root), "--json", cwd=daemon.root, env=cli_env)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["files_unchanged"] == 5


def test_a_second_daemon_on_the_same_index_is_refused(daemon: RunningDaemon, cli_env: dict) -> None:
    second = subprocess.run(
        [CTL, "serve", str(daemon.root), "--port", "0"],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 1
    pid, port = daemon.info.pid, daemon.info.port
    message = f"a daemon is already serving {daemon.db} (pid {pid}, port {port}); stop it first"
    assert message in " ".join(second.stderr.split())
    assert daemon.get("/health").status_code == 200
