"""Whose provider settings an ask through the daemon uses: the asking shell's, when it sets
any provider variable; else the daemon's own, which `status` names (never the key).

One daemon, started with Groq pointed at the fake LLM server; the shells that ask set
nothing, or the OpenAI-compatible provider with a key of their own.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.daemon.conftest import RunningDaemon, clean_env, run_ctl, small_daemon
from tests.fake_llm import FakeLlm

DAEMON_KEY = "gsk-DAEMON-key-0123456789"
SHELL_KEY = "sk-SHELL-key-9876543210"
QUESTION = "how do I check that a book number is valid"


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, fake: FakeLlm) -> Iterator[RunningDaemon]:
    with small_daemon(tmp_path_factory.mktemp("settings"), fake, DAEMON_KEY) as running:
        yield running


def test_an_ask_from_a_shell_with_its_own_provider_uses_the_shells_settings(
    daemon: RunningDaemon, fake: FakeLlm, tmp_path: Path
) -> None:
    # The case: the shell sets GBR_OPENAI_BASE_URL (and a key); the daemon was
    # started without them, and answered with its own provider.
    shell = clean_env(tmp_path / "home", **fake.env("openai", SHELL_KEY))
    fake.script("Use isbn.is_valid (src/bookshelf/isbn.gleam:51).")
    before = len(fake.requests)

    result = run_ctl("ask", "--no-hyde", QUESTION, cwd=daemon.root, env=shell)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "Use isbn.is_valid (src/bookshelf/isbn.gleam:51)."
    [request] = fake.requests[before:]
    assert request.path == "/v1/chat/completions"  # the OpenAI-compatible route, not Groq's
    assert request.headers["authorization"] == f"Bearer {SHELL_KEY}"
    assert SHELL_KEY not in daemon.log_text()  # the key crossed, but was never written


def test_a_shell_that_sets_no_provider_is_answered_with_the_daemons(
    daemon: RunningDaemon, fake: FakeLlm, tmp_path: Path
) -> None:
    fake.script("Use isbn.is_valid (src/bookshelf/isbn.gleam:51).")
    before = len(fake.requests)

    result = run_ctl("ask", "--no-hyde", QUESTION, cwd=daemon.root, env=clean_env(tmp_path))

    assert result.returncode == 0, result.stderr
    [request] = fake.requests[before:]
    assert request.headers["authorization"] == f"Bearer {DAEMON_KEY}"
    assert request.path == "/openai/v1/chat/completions"  # Groq's route


def test_a_shell_key_for_another_provider_is_not_mixed_with_the_daemons(
    daemon: RunningDaemon, fake: FakeLlm, tmp_path: Path
) -> None:
    # The shell names only an OpenAI-compatible server without its key: Groq's key from the
    # daemon must not make `--provider groq` work, and the error names the shell's fix.
    shell = clean_env(tmp_path / "home", **fake.env("openai", None))
    result = run_ctl("ask", "--provider", "groq", QUESTION, cwd=daemon.root, env=shell)
    assert result.returncode == 3 and "GROQ_API_KEY" in result.stderr


def test_status_names_the_daemons_provider_and_base_url_never_its_key(
    daemon: RunningDaemon, fake: FakeLlm, tmp_path: Path
) -> None:
    env = clean_env(tmp_path)
    shown = run_ctl("status", cwd=daemon.root, env=env)
    data = json.loads(run_ctl("status", "--json", cwd=daemon.root, env=env).stdout)

    assert shown.returncode == 0, shown.stderr
    assert data["llm"]["provider"] == "groq" and data["llm"]["base_url"] == fake.groq_base_url
    assert f"daemon llm groq, model {data['llm']['model']}, at {fake.groq_base_url}" in (
        shown.stdout
    )
    assert "uses the shell's" in shown.stdout
    assert DAEMON_KEY not in shown.stdout + json.dumps(data)


@pytest.mark.parametrize(
    ("header", "said"),
    [
        ("not json", "must be a JSON object"),
        ('{"PATH": "/bin"}', "not a provider variable: PATH"),
        ('{"GROQ_API_KEY": 7}', "must be a JSON object"),
    ],
)
def test_a_bad_settings_header_is_a_400_in_one_line(
    daemon: RunningDaemon, header: str, said: str
) -> None:
    with daemon.http() as client:
        response = client.post(
            "/ask",
            json={"question": QUESTION, "stream": False},
            headers={"x-gbr-provider-env": header},
        )
        checked = client.get("/llm", headers={"x-gbr-provider-env": header})
    for answer in (response, checked):
        assert answer.status_code == 400, answer.text
        assert said in answer.json()["error"] and "\n" not in answer.json()["error"]
