"""`gleambrctl chat` scripted over piped stdin, against the example and the fake LLM server."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.chat.conftest import chat_env
from tests.conftest import CTL, copy_small
from tests.fake_llm import FakeLlm, Reply

ISBN_QUESTION = "how do I check that a book number is valid"
MEMBER_QUESTION = "how many books may a member borrow at once"


def chat(
    package: Path, *lines: str, env: dict[str, str] | None = None, args: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CTL, "chat", str(package), *args],
        input="".join(f"{line}\n" for line in lines),
        env=chat_env(package, env),
        capture_output=True,
        text=True,
        timeout=300,
    )


def user_turns(messages: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The messages between the system prompt and the new question: the history sent."""
    return messages[1:-1]


def test_a_newcomer_indexes_then_asks_and_follows_up(tmp_path: Path, fake_llm: FakeLlm) -> None:
    root = copy_small(tmp_path / "pkg")
    # No definition in it parses, so the file is dropped whole.
    (root / "src/bookshelf/broken.gleam").write_text("import gleam/list\n\npub fn half( {\n")
    fake_llm.script(
        Reply("Call isbn.is_valid (src/bookshelf/isbn.gleam:51).", chunks=5),
        Reply("It returns a Bool; see src/bookshelf/isbn.gleam:52 and src/gone.gleam:3.", chunks=3),
    )
    result = chat(
        root,
        "/search isbn",
        "/index",
        "/status",
        "/hyde off",
        ISBN_QUESTION,
        "and what does it return?",
        env=fake_llm.env("openai"),
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    # Before /index: a hint, not a failure.
    assert out.count("no index yet; type /index") == 2  # the greeting, then /search
    # /index: the pipeline's summary, the dropped file and its reason included.
    assert "6 files seen: 5 indexed, 0 unchanged, 1 dropped" in out
    assert re.search(r"dropped src/bookshelf/broken\.gleam: .*line \d+", out)
    assert "5 files, 1 dropped" in out  # /status reads the reopened index
    # The answers streamed, with their sources and the unknown citation flagged.
    # The chunk the answer cited leads its sources line; the rest follow in rank order.
    assert re.search(
        r"^Call isbn\.is_valid \(src/bookshelf/isbn\.gleam:51\)\.\n"
        r"sources: \[\d+\] src/bookshelf/isbn\.gleam:\d+ \(cited\), \[\d+\] ",
        out,
        re.M,
    )
    assert "It returns a Bool; see src/bookshelf/isbn.gleam:52 and src/gone.gleam:3.\n" in out
    assert re.search(r"^not in the context sent: .*src/gone\.gleam:3$", out, re.M)
    first, second = fake_llm.requests
    assert user_turns(second.messages) == [
        ("user", ISBN_QUESTION),
        ("assistant", "Call isbn.is_valid (src/bookshelf/isbn.gleam:51)."),
    ]
    assert second.messages[-1][1].endswith("Question: and what does it return?")
    assert user_turns(first.messages) == []


def test_each_question_retrieves_again(package: Path, fake_llm: FakeLlm) -> None:
    fake_llm.script("About ISBNs.", "About members.")
    result = chat(package, "/hyde off", ISBN_QUESTION, MEMBER_QUESTION, env=fake_llm.env("groq"))
    assert result.returncode == 0, result.stderr
    first, second = (r.messages[-1][1] for r in fake_llm.requests)
    assert "### [1] " in first and "### [1] " in second
    # The best chunk opens each context, and each question found its own.
    assert "isbn" in first.split("\n")[2] and "member" not in first.split("\n")[2]
    assert "src/bookshelf/member.gleam" in second.split("\n")[2]


def test_history_is_trimmed_oldest_first_by_the_budget(package: Path, fake_llm: FakeLlm) -> None:
    long_one, long_two = "A" * 1050, "B" * 1050  # 300 estimated tokens each
    fake_llm.script(long_one, long_two, "third", "fourth")
    result = chat(
        package,
        "/hyde off",
        "first question",
        "second question",
        "third question",
        "/context",
        "/clear",
        "fourth question",
        "/status",
        env=fake_llm.env("openai"),
        args=("--budget", "1000"),  # at most 500 tokens of history: room for one long turn
    )
    assert result.returncode == 0, result.stderr
    second, third, fourth = (r.messages for r in fake_llm.requests[1:])
    assert user_turns(second) == [("user", "first question"), ("assistant", long_one)]
    assert user_turns(third) == [("user", "second question"), ("assistant", long_two)]
    assert user_turns(fourth) == []
    # The context gave way to the history: the budget holds both (plus message framing).
    sent_chars = sum(len(text) for _, text in third[1:])
    assert sent_chars / 3.5 <= 1000 + 30
    assert "1 earlier turn sent, 1 older left out" in result.stdout
    assert "conversation cleared (3 turns forgotten)" in result.stdout
    assert "history  1 turn" in result.stdout


def test_ask_command_is_one_question_without_history(package: Path, fake_llm: FakeLlm) -> None:
    fake_llm.script("one", "two", "three")
    result = chat(
        package,
        "/hyde off",
        "first question",
        "/ask a question on its own",
        "a follow-up",
        env=fake_llm.env("openai"),
    )
    assert result.returncode == 0, result.stderr
    alone, follow_up = fake_llm.requests[1:]
    assert user_turns(alone.messages) == []
    # /ask neither used the conversation nor joined it.
    assert user_turns(follow_up.messages) == [("user", "first question"), ("assistant", "one")]


def test_context_shows_exactly_the_headers_sent(package: Path, fake_llm: FakeLlm) -> None:
    result = chat(
        package, "/context", "/hyde off", ISBN_QUESTION, "/context", env=fake_llm.env("openai")
    )
    assert result.returncode == 0, result.stderr
    assert "no answer yet; ask a question first" in result.stdout
    sent = [
        ln for ln in fake_llm.requests[0].messages[-1][1].splitlines() if ln.startswith("### [")
    ]
    shown = [ln for ln in result.stdout.splitlines() if ln.startswith("### [")]
    chunks = [ln for ln in sent if not ln.startswith("### [+] ")]  # the rest: graph outlines
    assert len(chunks) == 8 and shown == sent
    assert "```gleam" in result.stdout


def test_search_then_open_prints_the_hit_with_its_line_numbers(package: Path) -> None:
    result = chat(package, "/open 1", "/search is_valid", "/open 1", "/open 2")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "no hits yet; /search QUERY or ask a question first" in out
    assert re.search(r"^ 1 src/bookshelf/isbn\.gleam:51-54 .* is_valid", out, re.M)
    blocks = re.findall(r"^\[(\d)\] .* · (\S+):(\d+)-(\d+) · .*\n((?:\s*\d+ │ .*\n)+)", out, re.M)
    assert [b[0] for b in blocks] == ["1", "2"]
    for _, path, start, end, body in blocks:
        source = (package / path).read_text().splitlines()
        numbered = re.findall(r"^\s*(\d+) │ (.*)$", body, re.M)
        assert [int(n) for n, _ in numbered] == list(range(int(start), int(end) + 1))
        assert all(source[int(n) - 1] == text for n, text in numbered)


def test_mistakes_get_a_one_line_hint_and_the_session_goes_on(package: Path) -> None:
    result = chat(
        package,
        "/frobnicate",
        "/serch isbn",
        "/search",
        "/search isbn",
        "/open twelve",
        "/open 99",
        "/rerank maybe",
        "/hyde",
        "/help me",
        "/provider nope",
        "/index /no/such/folder",
        "/status",
        "/quit",
        "/status",
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    hints = [
        "unknown command /frobnicate (/help lists them)",
        "unknown command /serch; did you mean /search? (/help lists them)",
        "usage: /search QUERY (show the best hits, no LLM)",
        "usage: /open N, with N one of 1, 2, 3, 4, 5, 6, 7, 8, 9, 10",
        "usage: /rerank on|off (fetch more candidates and rerank them)",
        "usage: /hyde on|off (also search with a hypothetical snippet)",
        "/help takes no argument; usage: /help (this list)",
        "error: unknown LLM provider 'nope'; choose one of: groq, gemini, openai",
        "error: /no/such/folder is not a folder; pass the path of a Gleam package",
    ]
    for hint in hints:
        assert hint in out
    assert out.count("usage: /open N") == 2
    assert out.count("package  ") == 1  # /status ran once: /quit ended the session
    assert "Traceback" not in out + result.stderr


def test_help_lists_every_command(package: Path) -> None:
    result = chat(package, "/help")
    for name in (
        "index", "search", "ask", "context", "open", "status", "provider", "model",
        "rerank", "hyde", "clear", "help", "quit",
    ):  # fmt: skip
        assert re.search(rf"^  /{name}\b", result.stdout, re.M), name


def test_without_a_provider_a_question_prints_the_reason_and_the_hits(package: Path) -> None:
    result = chat(package, ISBN_QUESTION, "/provider", "/search isbn")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "error: no LLM provider is configured; set GROQ_API_KEY or GEMINI_API_KEY" in out
    assert re.search(r"retrieved:\n  \[1\] \w+ \(\w+\) · \S+isbn\S*\.gleam:\d+-\d+", out)
    assert "provider: none (no LLM provider is configured" in out
    assert "src/bookshelf/isbn.gleam:51-54" in out  # /search still works afterwards


def test_rate_limit_and_timeout_print_the_reason_and_the_hits(
    package: Path, fake_llm: FakeLlm
) -> None:
    home = package.parent / "home"
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text("[openai]\nmax_retries = 0\n")
    try:
        fake_llm.script(
            Reply.error(429, retry_after="7"),
            Reply("too late", first_byte_delay=5),
            Reply("Back again (src/bookshelf/isbn.gleam:51)."),
        )
        result = chat(
            package,
            "/hyde off",
            ISBN_QUESTION,
            ISBN_QUESTION,
            ISBN_QUESTION,
            env=fake_llm.env("openai"),
            args=("--timeout", "1"),
        )
    finally:
        (home / "config.toml").unlink()
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "error: openai is still rate-limiting requests (429)" in out
    assert "error: openai sent nothing for 1s" in out
    assert out.count("retrieved:\n  [1] ") == 2
    assert "Back again (src/bookshelf/isbn.gleam:51).\nsources: " in out


def test_provider_model_rerank_and_hyde_switches(package: Path, fake_llm: FakeLlm) -> None:
    env = {**fake_llm.env("groq"), **fake_llm.env("openai")}
    fake_llm.respond = lambda body: (
        "[2, 1]" if "rank" in body["messages"][0]["content"].lower() else "pub fn f() { 1 }"
    )
    result = chat(
        package,
        "/provider",
        "/provider ollama",
        "/model tiny-model",
        "/hyde off",
        "/rerank on",
        "/status",
        "isbn.is_valid",
        "/rerank off",
        "/hyde on",
        ISBN_QUESTION,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "provider: groq, model llama-3.3-70b-versatile (choose from groq, gemini, openai)" in out
    assert "provider openai, model llama3.2" in out
    assert "provider openai, model tiny-model" in out
    assert "options  rerank on, hyde off, 8 chunks, budget 3000 tokens" in out
    assert {r.model for r in fake_llm.requests} == {"tiny-model"}
    assert {r.path for r in fake_llm.requests} == {"/v1/chat/completions"}
    systems = [r.messages[0][1] for r in fake_llm.requests]
    # With rerank on: one rerank call, one answer. With HyDE on: one snippet, one answer.
    assert len(systems) == 4
    assert "rank" in systems[0].lower() and "hypothetical" not in systems[0]
    assert systems[2].startswith("You write Gleam code")


def test_the_sources_line_names_every_chunk_sent_by_the_number_open_takes(
    package: Path, fake_llm: FakeLlm
) -> None:
    fake_llm.script("Nothing cited here.")
    asked = chat(package, "/hyde off", ISBN_QUESTION, env=fake_llm.env("openai"))
    assert asked.returncode == 0, asked.stderr
    sent = fake_llm.requests[0].messages[-1][1]
    headers = [int(n) for n in re.findall(r"^### \[(\d+)\] ", sent, re.M)]
    [line] = [ln for ln in asked.stdout.splitlines() if ln.startswith("sources: ")]
    shown = [int(n) for n in re.findall(r"\[(\d+)\] ", line)]
    assert len(headers) == 8  # more than the five the line used to stop at
    assert sorted(shown) == sorted(headers) and shown == sorted(shown)  # all, in rank order
    fake_llm.script("Nothing cited here.")
    opened = chat(
        package,
        "/hyde off",
        ISBN_QUESTION,
        *(f"/open {n}" for n in shown),
        env=fake_llm.env("openai"),
    )
    assert opened.returncode == 0, opened.stderr
    assert [int(n) for n in re.findall(r"^\[(\d+)\] .* · ", opened.stdout, re.M)] == shown
