"""The two front ends of a chat: prompt_toolkit at a terminal, plain lines over a pipe.

Both feed lines to the same `ChatSession.handle`. Ctrl-C at the prompt gives a new prompt;
during an answer it reaches the index (`gbr.access`), which cancels the stream.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from gbr.chat.commands import COMMANDS, SWITCHES
from gbr.chat.session import ChatSession
from gbr.core.llm.registry import available

if TYPE_CHECKING:
    from prompt_toolkit.completion import CompleteEvent, Completer, Completion
    from prompt_toolkit.document import Document

PROMPT = "gbr> "


def run_piped(session: ChatSession, lines: Iterable[str]) -> int:
    """One line, one command; plain text out, so a session can be scripted and tested."""
    session.greet()
    source = iter(lines)
    while True:
        try:
            line = next(source)
        except StopIteration:
            break
        except KeyboardInterrupt:
            continue
        if not session.handle(line.rstrip("\r\n")):
            break
    return 0


def run_interactive(session: ChatSession, history_file: Path) -> int:
    """Line editing, persistent history and completion of slash commands."""
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory

    history_file.parent.mkdir(parents=True, exist_ok=True)
    prompt: PromptSession[str] = PromptSession(
        history=FileHistory(str(history_file)),
        completer=_slash_completer(),
        complete_while_typing=True,
    )
    session.greet()
    while True:
        try:
            line = prompt.prompt(PROMPT)
        except KeyboardInterrupt:
            continue  # an empty or abandoned line: just a new prompt
        except EOFError:
            break
        if not session.handle(line):
            break
    return 0


def _slash_completer() -> Completer:
    # Imported here, like the prompt itself: a piped session never loads prompt_toolkit.
    from prompt_toolkit.completion import Completer, Completion

    class SlashCompleter(Completer):
        """Command names after `/`, then provider names or on/off where those fit."""

        def get_completions(
            self, document: Document, complete_event: CompleteEvent
        ) -> Iterator[Completion]:
            text = document.text_before_cursor
            if not text.startswith("/"):
                return
            word, space, arg = text[1:].partition(" ")
            if not space:
                for spec in COMMANDS:
                    if spec.name.startswith(word.lower()):
                        yield Completion(f"/{spec.name}", -len(text), display_meta=spec.help)
                return
            for option in _arguments(word.lower()):
                if option.startswith(arg.lower()):
                    yield Completion(option, -len(arg))

    return SlashCompleter()


def _arguments(command: str) -> list[str]:
    if command == "provider":
        return available()
    if command in ("rerank", "hyde"):
        return [w for w in SWITCHES if w in ("on", "off")]
    return []
