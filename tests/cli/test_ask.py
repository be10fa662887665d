"""`gleambrctl ask` end to end, against the fake LLM server on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import CTL, PROVIDER_VARS, Indexed, invoke
from tests.fake_llm import FakeLlm, Reply
from tests.tiny_models import build_tiny_cross_encoder

QUESTION = "how do I check that a book number is valid"
KEY = "sk-test-SECRET-1234567890"


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory, indexed_small_template: Indexed) -> Path:
    return indexed_small_template.copy(tmp_path_factory.mktemp("ask") / "small")


def ask(
    package: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """`gleambrctl ask ARGS` with no provider but those in `env`: in this process through
    typer's runner, except with `-v`, whose echo of events to stderr is set up once per
    process (gbr.core.telemetry), so it gets a process of its own."""
    if "-v" not in args:
        unset: dict[str, str | None] = dict.fromkeys(PROVIDER_VARS)
        home = {"GBR_HOME": str(package / ".home")}
        return invoke("ask", *args, cwd=package, env={**unset, **home, **(env or {})})
    base = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    base.update({"COLUMNS": "200", "NO_COLOR": "1", "GBR_HOME": str(package / ".home")})
    return subprocess.run(
        [CTL, "ask", *args],
        cwd=package,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_dry_run_prints_the_prompt_with_headers_and_calls_nothing(
    package: Path, fake_llm: FakeLlm
) -> None:
    result = ask(package, "--dry-run", QUESTION, env=fake_llm.env("groq", KEY))
    assert result.returncode == 0, result.stderr
    assert fake_llm.requests == []
    assert "----- system -----" in result.stdout and "----- user -----" in result.stdout
    assert "### [1] " in result.stdout
    assert "(function) · src/bookshelf/isbn.gleam:" in result.stdout


def test_dry_run_shows_the_outlines_of_what_the_chunks_use_unless_switched_off(
    package: Path,
) -> None:
    shown = ask(package, "--dry-run", "-k", "1", QUESTION)
    assert shown.returncode == 0, shown.stderr
    assert "### [1] " in shown.stdout
    outlined = [ln for ln in shown.stdout.splitlines() if ln.startswith("### [+] ")]
    assert outlined and all(" · module bookshelf/" in ln for ln in outlined)
    hidden = ask(package, "--dry-run", "-k", "1", "--no-graph-context", QUESTION)
    assert hidden.returncode == 0, hidden.stderr
    assert "### [+] " not in hidden.stdout
    chunk = hidden.stdout.split("### [1] ")[1].split("\n\nQuestion:")[0]
    assert f"### [1] {chunk}" in shown.stdout  # the chunk itself is the same
    data = json.loads(ask(package, "--json", "--dry-run", "-k", "1", QUESTION).stdout)
    assert [g["name"] for g in data["graph_context"]] == [
        ln.split("] ")[1].split(" (")[0] for ln in outlined
    ]


def test_without_a_key_it_explains_and_shows_the_context(package: Path) -> None:
    result = ask(package, QUESTION)
    assert result.returncode == 3
    assert "GROQ_API_KEY" in result.stderr and "GEMINI_API_KEY" in result.stderr
    assert "### [1] " in result.stdout  # the retrieved context is still printed


def test_groq_answer_streams_with_sources(package: Path, fake_llm: FakeLlm) -> None:
    fake_llm.script(Reply("Use isbn.is_valid (src/bookshelf/isbn.gleam:51).", chunks=6))
    result = ask(package, "--no-hyde", QUESTION, env=fake_llm.env("groq", KEY))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Use isbn.is_valid (src/bookshelf/isbn.gleam:51)."
    assert "sources:" in result.stderr
    [request] = fake_llm.requests
    assert request.path == "/openai/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert "### [1] " in request.prompt


def test_sources_put_the_cited_chunk_first_then_the_rest_in_rank_order(
    package: Path, fake_llm: FakeLlm
) -> None:
    sent = json.loads(ask(package, "--json", "--dry-run", QUESTION).stdout)["chunks"]
    last = max(sent, key=lambda c: c["rank"])  # the least relevant chunk sent
    assert last["rank"] > 5  # so the old "first five in prompt order" line could miss it
    cite = f"{last['path']}:{last['start_line']}"
    fake_llm.script(f"The answer is in {cite}.")
    result = ask(package, "--no-hyde", QUESTION, env=fake_llm.env("groq", KEY))
    assert result.returncode == 0, result.stderr
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("sources: ")]
    assert line.startswith(f"sources: [{last['rank']}] {cite} (cited), [1] ")
    fake_llm.script(f"The answer is in {cite}.")
    data = json.loads(
        ask(package, "--json", "--no-hyde", QUESTION, env=fake_llm.env("groq", KEY)).stdout
    )
    ranks = [(s["rank"], s["cited"]) for s in data["sources"]]
    assert ranks[0] == (last["rank"], True)
    assert ranks[1:] == sorted((r, False) for r, _ in ranks[1:])
    assert len(ranks) == len(data["chunks"])


def test_json_output_has_answer_citations_chunks_and_timings(
    package: Path, fake_llm: FakeLlm
) -> None:
    fake_llm.script(Reply("See src/bookshelf/isbn.gleam:51 and src/nowhere.gleam:1."))
    result = ask(package, "--json", "--no-hyde", QUESTION, env=fake_llm.env("gemini", KEY))
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["provider"] == "gemini" and data["answer"].startswith("See")
    assert {c["path"] for c in data["unknown_citations"]} == {"src/nowhere.gleam"}
    assert data["chunks"] and {"path", "name", "start_line", "text"} <= set(data["chunks"][0])
    assert {"retrieve", "total"} <= set(data["timings"])
    assert fake_llm.requests[0].headers["x-goog-api-key"] == KEY


def test_provider_failure_names_the_provider_and_keeps_the_context(
    package: Path, fake_llm: FakeLlm
) -> None:
    fake_llm.script(Reply.error(401))
    result = ask(package, "--no-hyde", QUESTION, env=fake_llm.env("groq", KEY))
    assert result.returncode == 4
    assert "groq" in result.stderr and "GROQ_API_KEY" in result.stderr
    assert "### [1] " in result.stdout


def test_the_key_appears_in_no_output_and_no_log(package: Path, fake_llm: FakeLlm) -> None:
    fake_llm.script(Reply.error(500), Reply.error(401))
    result = ask(package, "-v", "--json", QUESTION, env=fake_llm.env("groq", KEY))
    events = (package / ".gbr" / "events.jsonl").read_text()
    assert KEY not in result.stdout + result.stderr + events
    assert "sk-test" not in events


def test_hyde_runs_for_open_questions(package: Path, fake_llm: FakeLlm) -> None:
    fake_llm.respond = lambda body: "answer"
    result = ask(package, "--json", QUESTION, env=fake_llm.env("openai"))
    data = json.loads(result.stdout)
    assert data["hyde"] == "used"
    assert len(fake_llm.requests) == 2


def test_rerank_with_a_local_cross_encoder(
    package: Path, fake_llm: FakeLlm, tmp_path: Path
) -> None:
    model_dir = build_tiny_cross_encoder(tmp_path / "ce")
    result = ask(
        package,
        "--dry-run",
        "--json",
        "--rerank",
        "--reranker",
        f"cross-encoder:{model_dir}",
        QUESTION,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["reranker"].startswith("cross-encoder:")
    assert len(data["chunks"]) == 8


def test_rerank_with_a_hub_layout_folder_given_as_is(package: Path, tmp_path: Path) -> None:
    """`--reranker DIR` takes a folder as the hub lays it out (onnx/model.onnx)."""
    built = build_tiny_cross_encoder(tmp_path / "built")
    hub = tmp_path / "ms-marco-export"
    (hub / "onnx").mkdir(parents=True)
    (built / "model.onnx").rename(hub / "onnx" / "model.onnx")
    (built / "tokenizer.json").rename(hub / "tokenizer.json")
    result = ask(package, "--dry-run", "--json", "--rerank", "--reranker", str(hub), QUESTION)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["reranker"] == "cross-encoder:ms-marco-export"


@pytest.mark.parametrize("keep", ["model.onnx", "tokenizer.json"])
def test_a_reranker_folder_missing_a_file_is_one_line_naming_it(
    package: Path, tmp_path: Path, keep: str
) -> None:
    built = build_tiny_cross_encoder(tmp_path / "built")
    bad = tmp_path / "bad"
    bad.mkdir()
    (built / keep).rename(bad / keep)
    missing = "tokenizer.json" if keep == "model.onnx" else "model.onnx"
    result = ask(package, "--dry-run", "--rerank", "--reranker", str(bad), QUESTION)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert f"cross-encoder folder {bad} has no {missing};" in line, line
    assert "GBR_RERANK_MODEL_DIR" in line and not result.stdout


def test_index_can_run_while_an_answer_streams(package: Path, fake_llm: FakeLlm) -> None:
    """`ask` reads the index only to retrieve; the answer's seconds belong to the LLM."""
    fake_llm.script(Reply("one two three four five six", chunks=6, chunk_delay=0.5))
    base = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    env = {**base, "GBR_HOME": str(package / ".home"), **fake_llm.env("groq", KEY)}
    asking = subprocess.Popen(
        [CTL, "ask", "--no-hyde", QUESTION],
        cwd=package,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not fake_llm.requests:
            assert asking.poll() is None, asking.communicate()
            assert time.monotonic() < deadline, "the question never reached the LLM"
            time.sleep(0.02)
        indexed = subprocess.run(
            [CTL, "index", str(package)], env=env, capture_output=True, text=True, timeout=120
        )
        assert indexed.returncode == 0, indexed.stderr
        out, err = asking.communicate(timeout=60)
    finally:
        if asking.poll() is None:
            asking.kill()
    assert asking.returncode == 0, err
    assert "one two three four five six" in out
