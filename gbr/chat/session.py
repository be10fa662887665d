"""A chat session: its state, and one `handle(line)` that does what a line says.

The session knows nothing of terminals (see `terminal.py`) nor of where the work runs (a
`gbr.access.CodeIndex`: this process or the daemon), so a scripted session over a pipe and a
person at a prompt take one path.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from gbr.access import CodeIndex, LlmChoice
from gbr.access.requests import AskRequest, SearchRequest
from gbr.chat import commands, render
from gbr.chat.commands import Command, Question, UsageError
from gbr.chat.render import Views
from gbr.core.answer.limits import answer_cap, answer_deadline
from gbr.core.answer.oracle import Answer, AskOptions
from gbr.core.errors import GbrError, IndexEmptyError, StoreError
from gbr.core.llm import Message
from gbr.core.llm.registry import available
from gbr.core.records import Hit

NO_INDEX = "no index yet; type /index"


@dataclass
class ChatSettings:
    """What the slash commands change; the rest comes from the `chat` command's options."""

    provider: str | None = None  # None: the first configured
    model: str | None = None  # None: the provider's default
    timeout: float | None = None
    max_chunks: int = 8
    budget: int = 3000
    rerank: bool = False
    hyde: bool | None = None  # None: on for open questions when a provider is configured
    search_k: int = 10
    max_turns: int = 20  # kept in memory; the token budget decides how many are sent

    @property
    def llm(self) -> LlmChoice:
        return LlmChoice(self.provider, self.model, self.timeout)

    def ask_options(self) -> AskOptions:
        return AskOptions(
            max_chunks=self.max_chunks,
            budget=self.budget,
            rerank=self.rerank,
            hyde=self.hyde,
            deadline=answer_deadline(os.environ, timeout=self.timeout),
            max_answer_bytes=answer_cap(os.environ),
        )


@dataclass
class ChatSession:
    backend: CodeIndex
    console: Console
    views: Views
    settings: ChatSettings = field(default_factory=ChatSettings)
    write: Callable[[str], None] = field(default_factory=lambda: _stdout)
    debug: bool = False
    history: list[Message] = field(default_factory=list)
    last_hits: list[Hit] = field(default_factory=list)
    last_answer: Answer | None = None
    _streamed: bool = False

    # -- entry points -----------------------------------------------------------------------

    def greet(self) -> None:
        via = f" via {self.backend.via}" if self.backend.via else ""
        self.console.print(f"[bold]gbr chat[/bold] on {escape(str(self.backend.root))}{via}")
        try:
            report = self._status()
        except StoreError as exc:  # the file is locked or damaged: said, and the chat goes on
            render.hint(self.console, str(exc))
        else:
            if report["indexed"]:
                self.console.print(
                    f"index: {report['chunks']} chunks from {report['files_ok']} files; "
                    f"{self._provider_line()}"
                )
            else:
                render.hint(self.console, NO_INDEX)
        self.console.print("[dim]Type a question, or /help for the commands.[/dim]")

    def handle(self, line: str) -> bool:
        """Do what `line` says; False when the session should end. Nothing here ends it early."""
        try:
            return self._dispatch(line)
        except (UsageError, IndexEmptyError) as exc:  # what to type next, not a failure
            render.hint(self.console, str(exc))
        except GbrError as exc:
            render.error(self.console, str(exc))
        except KeyboardInterrupt:
            self._end_stream()
            self.console.print("[yellow](cancelled)[/yellow]")
        except Exception as exc:  # a bug must not end the session, nor hide
            if self.debug:
                self.console.print(traceback.format_exc(), markup=False)
            render.error(
                self.console, f"{type(exc).__name__}: {exc} (start with --debug for the traceback)"
            )
        return True

    def _dispatch(self, line: str) -> bool:
        parsed = commands.parse(line)
        if parsed is None:
            return True
        if isinstance(parsed, Question):
            self._ask(parsed.text, with_history=True)
            return True
        return self._command(parsed)

    def _command(self, cmd: Command) -> bool:
        name, arg = cmd.name, cmd.arg
        if name == "quit":
            return False
        if name == "help":
            self.console.out(commands.help_text(), highlight=False)
        elif name == "ask":
            self._ask(arg, with_history=False)
        elif name == "search":
            self._need_index()
            self.last_hits = list(
                self.backend.search(SearchRequest(arg, self.settings.search_k)).hits
            )
            self.views.print_hits(self.last_hits)
        elif name == "open":
            self._open(arg)
        elif name == "context":
            if self.last_answer is None:
                render.hint(self.console, "no answer yet; ask a question first")
            else:
                render.context(self.console, self.last_answer)
        elif name == "index":
            self._index(arg)
        elif name == "status":
            render.status(self.console, self._status(), self._settings_lines())
        elif name == "provider":
            self._provider(arg)
        elif name == "model":
            self._model(arg)
        elif name == "rerank":
            self.settings.rerank = commands.switch("rerank", arg)
            self.console.print(f"rerank {'on' if self.settings.rerank else 'off'}")
        elif name == "hyde":
            self.settings.hyde = commands.switch("hyde", arg)
            self.console.print(f"hyde {'on' if self.settings.hyde else 'off'}")
        elif name == "clear":
            turns = sum(m.role == "user" for m in self.history)
            self.history.clear()
            self.console.print(f"conversation cleared ({turns} turns forgotten)")
        return True

    # -- questions --------------------------------------------------------------------------

    def _ask(self, question: str, *, with_history: bool) -> None:
        self._streamed = False
        history = tuple(self.history) if with_history else ()
        self._need_index()
        asked = AskRequest(question, self.settings.ask_options(), self.settings.llm, history)
        outcome = self.backend.ask(asked, on_token=self._token)
        assert outcome.result is not None
        answer = outcome.result
        self._end_stream()
        self.last_answer = answer
        self.last_hits = sorted((c.hit for c in answer.chunks), key=lambda h: h.rank)
        render.answer_footer(self.console, answer)
        if with_history and answer.error is None and not answer.cancelled and answer.text:
            self.history += [Message("user", question), Message("assistant", answer.text)]
            del self.history[: max(0, len(self.history) - 2 * self.settings.max_turns)]

    def _token(self, delta: str) -> None:
        from gbr.commands.output import shown

        self._streamed = True
        self.write(shown(delta))  # an answer's escape sequences are shown, never run

    def _end_stream(self) -> None:
        if self._streamed:
            self.write("\n")
            self._streamed = False

    # -- the index --------------------------------------------------------------------------

    def _need_index(self) -> None:
        if not self.backend.has_index():
            raise IndexEmptyError(NO_INDEX)

    def _status(self) -> dict[str, Any]:
        """The index's report, with `indexed` as the chat reads it."""
        if not self.backend.has_index():
            return {"root": str(self.backend.root), "db": str(self.backend.db), "indexed": False}
        return {**self.backend.status(), "root": str(self.backend.root), "indexed": True}

    # -- other commands ---------------------------------------------------------------------

    def _open(self, arg: str) -> None:
        if not self.last_hits:
            render.hint(self.console, "no hits yet; /search QUERY or ask a question first")
            return
        try:
            number = int(arg.removeprefix("[").removesuffix("]"))
        except ValueError:
            number = 0
        match = [h for h in self.last_hits if h.rank == number]
        if not match:
            ranks = sorted(h.rank for h in self.last_hits)
            raise UsageError(f"usage: /open N, with N one of {', '.join(map(str, ranks))}")
        render.open_hit(self.console, match[0])

    def _index(self, arg: str) -> None:
        path = Path(arg).expanduser() if arg else None
        with self.views.progress_bar() as on_progress:
            summary = self.backend.index(path, on_progress)
        self.views.print_summary(summary)
        self.last_hits = []

    def _provider(self, arg: str) -> None:
        if not arg:
            choices = ", ".join(available())
            self.console.print(f"{self._provider_line()} (choose from {choices})")
            return
        name, model = self.backend.check_llm(LlmChoice(arg, None, self.settings.timeout))
        self.settings.provider, self.settings.model = name, None
        self.console.print(f"provider {name}, model {model}")

    def _model(self, arg: str) -> None:
        if not arg:
            self.console.print(self._provider_line())
            return
        name, model = self.backend.check_llm(
            LlmChoice(self.settings.provider, arg, self.settings.timeout)
        )
        self.settings.provider, self.settings.model = name, model
        self.console.print(f"provider {name}, model {model}")

    def _provider_line(self) -> str:
        try:
            name, model = self.backend.check_llm(self.settings.llm)
        except GbrError as exc:
            return f"provider: none ({exc})"
        return f"provider: {name}, model {model}"

    def _settings_lines(self) -> list[tuple[str, str]]:
        s = self.settings
        hyde = "auto" if s.hyde is None else ("on" if s.hyde else "off")
        turns = sum(m.role == "user" for m in self.history)
        return [
            ("llm", self._provider_line().removeprefix("provider: ")),
            (
                "options",
                f"rerank {'on' if s.rerank else 'off'}, hyde {hyde}, "
                f"{s.max_chunks} chunks, budget {s.budget} tokens",
            ),
            ("history", f"{turns} turn{'s' if turns != 1 else ''}"),
        ]


def _stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
