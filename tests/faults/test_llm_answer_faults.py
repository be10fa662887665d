"""An LLM's answer as an adversary writes it, through the real daemon and CLI (issue 32).

The daemon indexes a copy of the small example and takes the fake LLM server as its Groq;
`gleambrctl ask` runs in a subprocess and goes through it.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import copy_small
from tests.daemon.conftest import CTL, RunningDaemon, clean_env, small_daemon
from tests.daemon.conftest import fake as fake  # the fixture: the module daemon's LLM
from tests.fake_llm import FakeLlm, Reply
from tests.faults.test_mcp_faults import INITIALIZE

KEY = "sk-test-FAULTS-1234567890"
QUESTION = "how do I check that a book number is valid"
HEALTH_WAIT = 5.0  # seconds a /health may take while an answer is read: generous, not a target
ASK_BOUND = 180.0  # the test's bound on a hang of `ask`, far above what it needs


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, fake: FakeLlm) -> Iterator[RunningDaemon]:
    with small_daemon(tmp_path_factory.mktemp("answers"), fake, KEY) as running:
        yield running


def ask(daemon: RunningDaemon, home: Path, *args: str, **env: str) -> subprocess.Popen[str]:
    """`ask` in the background, its output to files under `home` (a pipe would fill up)."""
    home.mkdir(parents=True, exist_ok=True)
    with (home / "out").open("w") as out, (home / "err").open("w") as err:
        return subprocess.Popen(
            [CTL, "ask", "--no-hyde", *args, QUESTION],
            cwd=daemon.root,
            env=clean_env(home, **env),
            stdout=out,
            stderr=err,
            text=True,
        )


def finish(proc: subprocess.Popen[str], home: Path) -> tuple[str, str]:
    """`proc`'s stdout and stderr once it ended; fails when it runs past the test's bound."""
    try:
        proc.wait(timeout=ASK_BOUND)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail(f"ask did not finish within {ASK_BOUND} s")
    return (home / "out").read_text(), (home / "err").read_text()


def health_while(proc: subprocess.Popen[str], daemon: RunningDaemon) -> list[float]:
    """Seconds each /health took while `proc` ran; fails on the first that does not answer."""
    took: list[float] = []
    with httpx.Client(base_url=daemon.url, timeout=HEALTH_WAIT, trust_env=False) as client:
        deadline = time.monotonic() + ASK_BOUND
        while proc.poll() is None and time.monotonic() < deadline:
            began = time.monotonic()
            try:
                status = client.get("/health").status_code
            except httpx.TimeoutException:
                proc.kill()
                pytest.fail(f"/health did not answer within {HEALTH_WAIT} s while ask ran")
            assert status == 200
            took.append(time.monotonic() - began)
            time.sleep(0.2)
    return took


def test_a_one_megabyte_word_in_the_answer_leaves_the_daemon_responsive(
    daemon: RunningDaemon, fake: FakeLlm, tmp_path: Path
) -> None:
    blob = "QUJD" * 262_144  # 1 MiB of base64-like word characters, no space
    fake.script(Reply(f"The key is {blob}; see src/bookshelf/isbn.gleam:51.", chunks=64))
    # The answer cap (item 2) is raised above the blob: this test is about reading it.
    proc = ask(daemon, tmp_path / "home", "--json", GBR_ASK_MAX_ANSWER="4MB")
    took = health_while(proc, daemon)
    out, err = finish(proc, tmp_path / "home")
    assert proc.returncode == 0, err
    answer = json.loads(out)
    assert blob in answer["answer"]
    cited = [(c["path"], c["line"]) for c in answer["citations"]]
    assert cited == [("src/bookshelf/isbn.gleam", 51)]  # the citation after the blob is read
    assert took, "ask finished before /health was asked once"


# --- item 2: the answer as a whole is bounded in time and size ------------------------------

TRICKLE = Reply("tick ", chunks=1, chunk_delay=0.2, endless=True)  # a token every 0.2 s, for ever
DEADLINE_LINE = "the answer took longer than 3 s and was stopped; the text so far is partial"


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the small example, indexed once, with no daemon serving it."""
    base = tmp_path_factory.mktemp("local")
    root = copy_small(base / "small")
    done = subprocess.run(
        [CTL, "index", str(root)],
        env=clean_env(base / "home"),
        capture_output=True,
        text=True,
        timeout=ASK_BOUND * 2,
    )
    assert done.returncode == 0, done.stderr
    return root


def run_ask(
    root: Path, fake: FakeLlm, home: Path, *args: str, **env: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    began = time.monotonic()
    done = subprocess.run(
        [CTL, "ask", "--no-hyde", *args, QUESTION],
        cwd=root,
        env=clean_env(home, **fake.env("groq", KEY), **env),
        capture_output=True,
        text=True,
        timeout=ASK_BOUND,
    )
    return done, time.monotonic() - began


def test_an_endless_trickle_stops_at_the_deadline_with_one_line_and_exit_4(
    indexed: Path, fake: FakeLlm, tmp_path: Path
) -> None:
    fake.script(TRICKLE)
    done, seconds = run_ask(indexed, fake, tmp_path / "home", "--timeout", "5", "--deadline", "3")
    assert done.returncode == 4, done.stderr
    assert seconds < 60  # 3 s and the start-up; before, it ran until the server stopped
    assert f"error: {DEADLINE_LINE}" in " ".join(done.stderr.split())
    assert "--deadline or GBR_ASK_DEADLINE" in " ".join(done.stderr.split())
    assert done.stdout.startswith("tick tick")  # what came is kept, and shown


def test_the_deadline_comes_from_the_environment_and_counts_empty_events(
    indexed: Path, fake: FakeLlm, tmp_path: Path
) -> None:
    fake.script(Reply(chunks=[""], chunk_delay=0.2, endless=True))  # events with no text
    done, seconds = run_ask(indexed, fake, tmp_path / "home", "--json", GBR_ASK_DEADLINE="3")
    assert done.returncode == 4, done.stderr
    assert seconds < 60
    assert json.loads(done.stdout)["error"].startswith(DEADLINE_LINE)


def test_an_answer_past_the_cap_stops_with_one_line_and_exit_4(
    indexed: Path, fake: FakeLlm, tmp_path: Path
) -> None:
    fake.script(Reply("word " * 20_000, chunks=100))  # 100 kB, sent at once
    done, _ = run_ask(indexed, fake, tmp_path / "home", "--max-answer", "10k")
    assert done.returncode == 4, done.stderr
    line = "error: the answer passed 10000 bytes and was stopped; the text so far is partial"
    assert line in " ".join(done.stderr.split())
    assert 10_000 <= len(done.stdout.split("\n")[0]) < 12_000  # the cap, and a piece at most
    bad, _ = run_ask(indexed, fake, tmp_path / "home", "--max-answer", "lots")
    assert bad.returncode == 2 and "cannot read size 'lots'" in bad.stderr


def test_the_daemon_stops_an_endless_answer_at_the_requested_deadline(
    daemon: RunningDaemon, fake: FakeLlm
) -> None:
    fake.script(TRICKLE)
    began = time.monotonic()
    events = daemon.ask_events({"question": QUESTION, "hyde": False, "deadline": 3})
    assert time.monotonic() - began < 60
    kinds = [kind for kind, _ in events]
    assert kinds[-1] == "error" and "token" in kinds
    assert events[-1][1]["exit_code"] == 4
    assert events[-1][1]["error"].startswith(DEADLINE_LINE)
    assert daemon.get("/health").json()["status"] == "ok"


def test_the_daemon_caps_the_answer_it_returns(daemon: RunningDaemon, fake: FakeLlm) -> None:
    fake.script(Reply("word " * 20_000, chunks=100))
    body = {"question": QUESTION, "hyde": False, "stream": False, "max_answer_bytes": 10_000}
    data = daemon.post("/ask", body).json()
    assert data["exit_code"] == 4
    assert data["error"].startswith("the answer passed 10000 bytes and was stopped")
    assert 10_000 <= len(data["answer"]) < 12_000
    assert daemon.post("/ask", {**body, "deadline": 0}).status_code == 422


def test_mcp_ask_stops_at_the_deadline_from_the_environment(
    indexed: Path, fake: FakeLlm, tmp_path: Path
) -> None:
    fake.script(TRICKLE)
    env = clean_env(tmp_path / "home", **fake.env("groq", KEY), GBR_ASK_DEADLINE="3")
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "ask_codebase", "arguments": {"question": QUESTION, "hyde": False}},
    }
    lines = [INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}, call]
    proc = subprocess.Popen(
        [CTL, "mcp", str(indexed)],
        cwd=indexed,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("".join(json.dumps(line) + "\n" for line in lines))
    proc.stdin.flush()
    began = time.monotonic()
    lines_out: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines_out.put(x) for x in proc.stdout], daemon=True).start()
    try:
        answers = [json.loads(lines_out.get(timeout=ASK_BOUND)) for _ in range(2)]
    except queue.Empty:
        pytest.fail(f"the MCP server did not answer within {ASK_BOUND} s")
    finally:
        proc.kill()
        proc.wait(10)
    assert time.monotonic() - began < 60
    result = answers[1]["result"]
    text = result["content"][0]["text"]
    assert result["isError"] and text.startswith(f"error: {DEADLINE_LINE}")
