"""What a chat line means: a question, a slash command with its argument, or nothing.

Parsing is kept apart from doing, so the help text, the completer and the dispatcher all
read the one table below and cannot drift apart.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class CommandSpec:
    name: str
    usage: str  # the argument, as shown in /help and in usage hints ("" when none)
    help: str
    arg: str = "none"  # none | optional | required


COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec("index", "[PATH]", "index the package (or PATH) and show the summary", "optional"),
    CommandSpec("search", "QUERY", "show the best hits, no LLM", "required"),
    CommandSpec("ask", "QUESTION", "one question, without the conversation so far", "required"),
    CommandSpec("context", "", "the chunks and headers sent with the last answer"),
    CommandSpec("open", "N", "hit N of the last search (or answer) in full, numbered", "required"),
    CommandSpec("status", "", "index, provider and options"),
    CommandSpec("provider", "NAME", "use another LLM provider (groq, gemini, openai)", "optional"),
    CommandSpec("model", "NAME", "use another model of the provider", "optional"),
    CommandSpec("rerank", "on|off", "fetch more candidates and rerank them", "required"),
    CommandSpec("hyde", "on|off", "also search with a hypothetical snippet", "required"),
    CommandSpec("clear", "", "forget the conversation so far"),
    CommandSpec("help", "", "this list"),
    CommandSpec("quit", "", "leave (Ctrl-D too)"),
)
ALIASES = {"exit": "quit", "q": "quit", "?": "help", "s": "search", "h": "help"}
BY_NAME = {spec.name: spec for spec in COMMANDS}
SWITCHES = {"on": True, "off": False, "true": True, "false": False, "yes": True, "no": False}


class UsageError(ValueError):
    """A line the chat cannot act on; its message is the one-line hint to show."""


@dataclass(frozen=True, slots=True)
class Question:
    text: str


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    arg: str  # stripped; "" when none was given


Parsed = Question | Command | None


def parse(line: str) -> Parsed:
    """None for a blank line; raises UsageError for an unknown command or a missing argument."""
    text = line.strip()
    if not text:
        return None
    if not text.startswith("/"):
        return Question(text)
    word, _, arg = text[1:].partition(" ")
    name = ALIASES.get(word.lower(), word.lower())
    spec = BY_NAME.get(name)
    if spec is None:
        raise UsageError(unknown_hint(word))
    arg = arg.strip()
    if spec.arg == "required" and not arg:
        raise UsageError(usage_hint(spec))
    if spec.arg == "none" and arg:
        raise UsageError(f"/{spec.name} takes no argument; {usage_hint(spec)}")
    return Command(name, arg)


def usage_hint(spec: CommandSpec | str) -> str:
    spec = BY_NAME[spec] if isinstance(spec, str) else spec
    shown = f"/{spec.name} {spec.usage}".rstrip()
    return f"usage: {shown} ({spec.help})"


def unknown_hint(word: str) -> str:
    close = difflib.get_close_matches(word.lower(), [s.name for s in COMMANDS], n=1)
    guess = f"; did you mean /{close[0]}?" if close else ""
    return f"unknown command /{word}{guess} (/help lists them)"


def switch(spec_name: str, arg: str) -> bool:
    """on/off (and yes/no, true/false) as a bool; anything else is a usage error."""
    value = SWITCHES.get(arg.strip().lower())
    if value is None:
        raise UsageError(usage_hint(spec_name))
    return value


def help_text() -> str:
    width = max(len(f"/{s.name} {s.usage}".rstrip()) for s in COMMANDS)
    lines = ["Type a question to ask about the code, or a command:"]
    for spec in COMMANDS:
        lines.append(f"  {f'/{spec.name} {spec.usage}'.rstrip():<{width}}  {spec.help}")
    lines.append("Ctrl-C stops an answer that is streaming; Ctrl-D leaves.")
    return "\n".join(lines)
