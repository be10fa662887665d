"""An LLM's answer as an adversary writes it, through the real daemon and CLI (issue 32).

The daemon indexes a copy of the small example and takes the fake LLM server as its Groq;
`gleambrctl ask` runs in a subprocess and goes through it.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.daemon.conftest import CTL, RunningDaemon, clean_env, start_small
from tests.daemon.conftest import fake as fake  # the fixture: the module daemon's LLM
from tests.fake_llm import FakeLlm, Reply

KEY = "sk-test-FAULTS-1234567890"
QUESTION = "how do I check that a book number is valid"
HEALTH_WAIT = 5.0  # seconds a /health may take while an answer is read: generous, not a target
ASK_BOUND = 180.0  # the test's bound on a hang of `ask`, far above what it needs


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, fake: FakeLlm) -> Iterator[RunningDaemon]:
    running = start_small(tmp_path_factory.mktemp("answers"), fake, KEY)
    try:
        running.wait_idle()
        yield running
    finally:
        running.stop()


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
