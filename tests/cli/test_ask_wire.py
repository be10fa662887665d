"""`gleambrctl ask` against replies shaped like the real services': a stream cut inside a CRLF,
a safety refusal, and Gemini's real answer to a bad key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_ask import QUESTION, ask, package  # noqa: F401  (`package` is a fixture)
from tests.fake_llm import FakeLlm, Reply

KEY = "sk-test-SECRET-1234567890"


def test_a_crlf_split_across_three_writes_still_gives_two_events(
    package: Path,  # noqa: F811
    fake_llm: FakeLlm,
) -> None:
    alpha = {"choices": [{"index": 0, "delta": {"content": "alpha"}, "finish_reason": None}]}
    beta = {"choices": [{"index": 0, "delta": {"content": " beta"}, "finish_reason": "stop"}]}
    # Each piece is its own flushed write, with a pause before the next, so the client reads
    # the CR, the LF that completes it, and the blank line that ends the event separately.
    writes = [f"data: {json.dumps(alpha)}\r", "\n", f"\ndata: {json.dumps(beta)}\n\n"]
    fake_llm.script(Reply(writes=writes, chunk_delay=[0, 0.2, 0.2]))
    result = ask(package, "--no-hyde", "--provider", "groq", QUESTION, env=fake_llm.env("groq"))
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "alpha beta"
    assert len(fake_llm.requests) == 1


@pytest.mark.parametrize(
    ("refusal", "reason"),
    [("safety", "finishReason SAFETY"), ("prompt", "the question was blocked: SAFETY")],
)
def test_a_gemini_refusal_is_one_line_and_a_failure(
    package: Path,  # noqa: F811
    fake_llm: FakeLlm,
    refusal: str,
    reason: str,
) -> None:
    fake_llm.script(Reply(refusal=refusal))  # type: ignore[arg-type]
    result = ask(package, "--no-hyde", "--provider", "gemini", QUESTION, env=fake_llm.env("gemini"))
    assert result.returncode == 4
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: gemini refused to answer ({reason}); rephrase the question and ask again"
    ]
    assert "### [1] " in result.stdout  # the retrieved context is still shown


def test_gemini_bad_key_names_the_variable_like_any_rejected_key(
    package: Path,  # noqa: F811
    fake_llm: FakeLlm,
) -> None:
    fake_llm.keys = {"the-one-good-key-000"}
    gemini = ask(
        package, "--no-hyde", "--provider", "gemini", QUESTION, env=fake_llm.env("gemini", KEY)
    )
    groq = ask(package, "--no-hyde", "--provider", "groq", QUESTION, env=fake_llm.env("groq", KEY))
    assert len(fake_llm.requests) == 2  # a rejected key is never retried
    errors = [line for line in gemini.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        "error: gemini rejected the API key (400 API_KEY_INVALID); set a valid one in "
        "GEMINI_API_KEY (or api_key under [gemini] in the gbr config.toml)"
    ]
    assert gemini.returncode == groq.returncode == 4
    assert "GROQ_API_KEY" in groq.stderr
    assert KEY not in gemini.stdout + gemini.stderr
