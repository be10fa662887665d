"""`gleambrctl chat` in a real pseudo-terminal: prompt_toolkit, Ctrl-C mid-stream, Ctrl-D."""

from __future__ import annotations

import io
from pathlib import Path

import pexpect

from tests.chat.conftest import chat_env
from tests.conftest import CTL
from tests.fake_llm import FakeLlm, Reply

PROMPT = "gbr>"  # prompt_toolkit draws the trailing space apart, between escape codes
PIECES = [f"word{i} " for i in range(100)]


def spawn(package: Path, env: dict[str, str]) -> pexpect.spawn:
    child = pexpect.spawn(
        CTL,
        ["chat", str(package)],
        env=chat_env(package, {**env, "TERM": "xterm", "PROMPT_TOOLKIT_NO_CPR": "1"}),
        encoding="utf-8",
        timeout=60,
        dimensions=(40, 200),
    )
    child.logfile_read = io.StringIO()  # the whole transcript, for assertions at the end
    child.expect_exact(PROMPT)
    return child


def test_ctrl_c_cancels_the_stream_not_the_session(package: Path, fake_llm: FakeLlm) -> None:
    # A slow stream: 100 pieces, one every 0.2 s, so Ctrl-C lands long before its end.
    fake_llm.script(
        Reply(chunks=PIECES, chunk_delay=0.2),
        Reply("Use isbn.is_valid (src/bookshelf/isbn.gleam:51).", chunks=3),
    )
    child = spawn(package, fake_llm.env("openai"))
    try:
        child.sendline("/hyde off")
        child.expect_exact("hyde off")
        child.expect_exact(PROMPT)

        child.sendline("how do I check that a book number is valid")
        child.expect_exact("word1 ")
        child.sendintr()
        child.expect_exact("(cancelled)")
        child.expect_exact(PROMPT)

        child.sendintr()  # Ctrl-C at an empty prompt: just a new prompt
        child.expect_exact(PROMPT)

        child.sendline("/search is_valid")
        child.expect_exact("src/bookshelf/isbn.gleam:51-54")
        child.expect_exact(PROMPT)

        child.sendline("and how do I use it")
        child.expect_exact("Use isbn.is_valid (src/bookshelf/isbn.gleam:51).")
        child.expect_exact("sources: [")
        child.expect_exact(PROMPT)

        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0, child.before
    transcript = child.logfile_read.getvalue()
    assert transcript.count("(cancelled)") == 1
    assert PIECES[-1] not in transcript  # the stream stopped, far from its end
    # The cancelled answer never joined the conversation.
    follow_up = fake_llm.requests[-1].messages
    assert [role for role, _ in follow_up] == ["system", "user"]
    history = (package / ".gbr" / "chat_history").read_text()
    assert "/search is_valid" in history and "and how do I use it" in history


def test_slash_commands_complete_with_tab(package: Path) -> None:
    child = spawn(package, {})
    try:
        child.send("/sta")
        child.expect_exact("index, provider and options")  # the menu, as you type
        child.send("\t")  # picks /status
        child.send("\r")
        child.expect_exact("options  rerank off, hyde auto")  # the /status report
        child.expect_exact(PROMPT)
        child.sendline("/quit")
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    assert child.exitstatus == 0
