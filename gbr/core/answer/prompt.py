"""Context assembly for the Oracle: which chunks go in, in what order, under which header.

The context format is fixed, so that the model (and a person reading `--dry-run`) always
knows which function and file a piece of code comes from (EVD-02):

    ### [2] calculate_fine (function) · src/bookshelf/loan.gleam:40-123 · module bookshelf/loan
    ```gleam
    pub fn calculate_fine(...) { ... }
    ```

Each chunk is one header line, then its code in a fenced block, then a blank line. Only
the best chunks go in, within a token budget and a maximum count (STD-01), and they are
ordered best-at-the-edges: models read the start and the end of a long context best
("Lost in the Middle", Liu et al. 2023), so rank 1 opens it and rank 2 closes it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gbr.core.llm.base import Message
from gbr.core.records import Hit

# Tokens are estimated, not counted: the LLM's tokenizer is not ours to load. 3.5
# characters per token is on the safe side for code (English prose is about 4).
CHARS_PER_TOKEN = 3.5

SYSTEM_PROMPT = """You answer questions about a Gleam code base.
Use only the code in the context below; each chunk starts with a header naming the
function or type, its file with line numbers, and its module.
Cite the code you rely on as path:line (for example src/app/router.gleam:42), using the
file paths and line numbers from the headers.
If the context does not contain the answer, say so plainly instead of guessing.
Answer concisely, with short Gleam snippets when they help."""


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def header(
    label: object, name: str, kind: str, path: str, lines: tuple[int, int], module: str
) -> str:
    """A context block's header: the chunks and the code graph's outlines share it."""
    return f"### [{label}] {name} ({kind}) · {path}:{lines[0]}-{lines[1]} · module {module}"


def chunk_header(index: int, hit: Hit) -> str:
    lines = (hit.start_line, hit.end_line)
    return header(index, hit.name, hit.kind, hit.path, lines, hit.module)


def render_chunk(index: int, hit: Hit, text: str | None = None) -> str:
    body = (text if text is not None else hit.text).rstrip("\n")
    return f"{chunk_header(index, hit)}\n```gleam\n{body}\n```\n"


@dataclass(frozen=True, slots=True)
class ContextChunk:
    """A hit as it goes into the prompt: its rank, and its text (cut if it had to be)."""

    hit: Hit
    text: str
    truncated: bool = False

    @property
    def tokens(self) -> int:
        return estimate_tokens(render_chunk(self.hit.rank, self.hit, self.text))


def select(hits: Sequence[Hit], budget: int, max_chunks: int) -> list[ContextChunk]:
    """The best hits that fit the budget, in rank order.

    A hit that does not fit is skipped and smaller lower-ranked ones may still go in; the
    best hit always goes in, cut to the budget if it alone is too big.
    """
    chosen: list[ContextChunk] = []
    used = 0
    for hit in sorted(hits, key=lambda h: h.rank):
        if len(chosen) >= max_chunks:
            break
        item = ContextChunk(hit, hit.text)
        if used + item.tokens <= budget:
            chosen.append(item)
            used += item.tokens
        elif not chosen:
            chosen.append(_cut(hit, budget))
            used = chosen[0].tokens
    return chosen


_CUT_MARKER = "// … (cut to fit the context budget)"


def _cut(hit: Hit, budget: int) -> ContextChunk:
    overhead = estimate_tokens(render_chunk(hit.rank, hit, _CUT_MARKER)) + 1
    keep_chars = max(0, int((budget - overhead) * CHARS_PER_TOKEN))
    lines, size = [], 0
    for line in hit.text.splitlines():
        if size + len(line) + 1 > keep_chars:
            break
        lines.append(line)
        size += len(line) + 1
    lines.append(_CUT_MARKER)
    return ContextChunk(hit, "\n".join(lines), truncated=True)


def edges_first(chunks: Sequence[ContextChunk]) -> list[ContextChunk]:
    """Ranks 1..n laid out as 1, 3, 5, …, 6, 4, 2: the best at both ends, the weakest mid."""
    ordered = sorted(chunks, key=lambda c: c.hit.rank)
    front = ordered[0::2]
    back = ordered[1::2]
    return front + back[::-1]


def render_context(chunks: Sequence[ContextChunk]) -> str:
    return "\n".join(render_chunk(c.hit.rank, c.hit, c.text) for c in chunks)


def user_prompt(question: str, context: str) -> str:
    return f"Context:\n\n{context}\nQuestion: {question}"


# Role and framing tokens every chat message costs on top of its text (OpenAI counts 3-4).
MESSAGE_OVERHEAD = 4


def message_tokens(messages: Sequence[Message]) -> int:
    return sum(estimate_tokens(m.content) + MESSAGE_OVERHEAD for m in messages)


def split_turns(history: Sequence[Message]) -> list[list[Message]]:
    """A conversation as turns: each user message with the replies after it (system left out)."""
    turns: list[list[Message]] = []
    for message in history:
        if message.role == "system":
            continue
        if message.role == "user" or not turns:
            turns.append([])
        turns[-1].append(message)
    return turns


def fit_history(history: Sequence[Message], budget: int) -> list[Message]:
    """The newest whole turns of a conversation that fit `budget` estimated tokens.

    A turn is a user message and the replies after it; turns are dropped oldest first and
    never cut in half, so the model never sees an answer without its question. Once a turn
    does not fit, older ones go too: a gap in the middle would misplace what "it" refers to.
    """
    turns = split_turns(history)
    kept: list[list[Message]] = []
    used = 0
    for turn in reversed(turns):
        cost = message_tokens(turn)
        if used + cost > budget:
            break
        kept.append(turn)
        used += cost
    return [m for turn in reversed(kept) for m in turn]


# path:line or path:start-end, where path ends in .gleam. One regex for the whole
# (`([\w./-]+\.gleam):(\d+)…`) retries every start inside a long run of word characters
# and is quadratic on it: a base64 blob in an answer froze `ask` for minutes. The scan
# below takes each maximal run of path characters once, so it is linear, and finds the
# same citations.
_PATH_RUN = re.compile(r"[\w./-]+")
_LINES_AFTER = re.compile(r":(\d+)(?:-(\d+))?")
_GLEAM = ".gleam"


def scan_citations(answer: str) -> Iterator[tuple[str, int, int]]:
    """(path, first, last) of every `path.gleam:line[-end]` in `answer`, in order."""
    if _GLEAM + ":" not in answer:
        return
    taken = 0  # where the last citation ended: its line digits open the next run
    for run in _PATH_RUN.finditer(answer):
        end = run.end()
        start = max(run.start(), taken)
        if end - start <= len(_GLEAM) or not answer.endswith(_GLEAM, start, end):
            continue
        lines = _LINES_AFTER.match(answer, end)
        if lines is None:
            continue
        first = int(lines.group(1))
        last = int(lines.group(2)) if lines.group(2) else first
        taken = lines.end()
        yield answer[start:end], first, last


@dataclass(frozen=True, slots=True)
class Citation:
    path: str
    line: int
    end_line: int
    known: bool  # True when the lines lie inside a chunk that was sent

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "line": self.line,
            "end_line": self.end_line,
            "known": self.known,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Citation:
        return cls(data["path"], int(data["line"]), int(data["end_line"]), bool(data["known"]))


def check_citations(
    answer: str,
    chunks: Sequence[ContextChunk],
    also: Sequence[tuple[str, int, int]] = (),
) -> list[Citation]:
    """Every `path:line` in the answer, flagged unknown unless a sent chunk covers it (or
    one of `also`, the (path, first, last) of other blocks sent, like the graph's outlines)."""
    spans: dict[str, list[tuple[int, int]]] = {}
    for c in chunks:
        spans.setdefault(c.hit.path, []).append((c.hit.start_line, c.hit.end_line))
    for path, first, last in also:
        spans.setdefault(path, []).append((first, last))
    out: list[Citation] = []
    seen: set[tuple[str, int, int]] = set()
    for path, first, last in scan_citations(answer):
        key = (path, first, last)
        if key in seen:
            continue
        seen.add(key)
        known = any(a <= first and last <= b for a, b in spans.get(path, []))
        out.append(Citation(path, first, last, known))
    return out


# `[2]`: the header number of a sent chunk, which models often cite instead of path:line.
_HEADER_REF = re.compile(r"(?<![\w\]])\[(\d+)\]")


@dataclass(frozen=True, slots=True)
class Source:
    """A chunk that was sent, and whether the answer relied on it."""

    hit: Hit
    cited: bool


def sources(
    answer: str, chunks: Sequence[ContextChunk], citations: Sequence[Citation]
) -> list[Source]:
    """The sent chunks, the cited ones first, each group in rank order.

    Prompt order (best at the edges) says nothing to a reader; what the answer leaned on does.
    A chunk counts as cited when a known `path:line` falls in its lines, or its `[n]` is named.
    """
    ranks = {c.hit.rank for c in chunks}
    named = {int(m.group(1)) for m in _HEADER_REF.finditer(answer)} & ranks

    def cited(hit: Hit) -> bool:
        return hit.rank in named or any(
            c.known
            and c.path == hit.path
            and c.line <= hit.end_line
            and hit.start_line <= c.end_line
            for c in citations
        )

    ordered = sorted((c.hit for c in chunks), key=lambda h: h.rank)
    marked = [Source(h, cited(h)) for h in ordered]
    return [s for s in marked if s.cited] + [s for s in marked if not s.cited]


def sources_line(items: Sequence[Source]) -> str:
    """`[3] src/a.gleam:40 (cited), [1] src/b.gleam:2, [2] …`: every chunk sent, cited ones
    first, each under the number of its `### [n]` header, which `/open n` takes. A shorter
    line left chunks the answer may lean on unnamed, and `/open` took numbers it never showed."""
    return ", ".join(
        f"[{s.hit.rank}] {s.hit.path}:{s.hit.start_line}" + (" (cited)" if s.cited else "")
        for s in items
    )


CONDENSE_SYSTEM_PROMPT = """You rewrite the last question of a conversation about a Gleam
code base so that it stands alone: name the thing it refers to (a function, a type, a value),
keep its intent, and add nothing else. Reply with the rewritten question only."""

# Earlier user turns carried into a follow-up's retrieval; older ones rarely name its subject.
FOLLOWUP_TURNS = 1
CONDENSE_TURN_CHARS = 1500  # of each earlier message sent for the rewrite: its gist, not its code


def followup_query(question: str, history: Sequence[Message]) -> str | None:
    """The question after the last earlier user turn, or None when there is none.

    A follow-up ("and how do I read it back?") names its subject only in the turn before,
    so retrieval for it alone finds the wrong code; the pair finds the right one.
    """
    earlier = [m.content.strip() for m in history if m.role == "user" and m.content.strip()]
    if not earlier:
        return None
    return "\n".join([*earlier[-FOLLOWUP_TURNS:], question])


# Words by which a question leans on an earlier turn for its subject.
# Not "that", "one" or "there": as in "check that …", "turn one …", "is there …", they
# open standalone questions as often as they point back.
_LEANING_WORDS = frozenset(
    {"it", "its", "it's", "this", "these", "those", "them", "they", "their", "ones", "same"}
    | {"above", "previous", "again", "else", "instead"}
)
_LEANING_STARTS = ("and ", "also ", "but ", "then ", "what about", "how about", "so ")
SHORT_QUESTION_WORDS = 4  # a question this short rarely carries its own subject


def leans_on_history(question: str) -> bool:
    """Whether a question needs the earlier turn to be understood ("and how do I read it?").

    English cues only (pronouns, a leading "and"/"what about", very few words); a question
    without them is taken as standalone, so changing the subject is not dragged back.
    """
    text = question.strip().lower()
    words = re.findall(r"[a-z']+", text)
    if len(words) <= SHORT_QUESTION_WORDS or text.startswith(_LEANING_STARTS):
        return True
    return any(w in _LEANING_WORDS for w in words)


def condense_messages(question: str, history: Sequence[Message]) -> list[Message]:
    """The request for a standalone rewrite of `question`, given the conversation so far."""
    turns = "\n".join(
        f"{m.role}: {m.content[:CONDENSE_TURN_CHARS]}" for m in history if m.role != "system"
    )
    return [
        Message("system", CONDENSE_SYSTEM_PROMPT),
        Message("user", f"Conversation:\n{turns}\n\nLast question: {question}"),
    ]


HYDE_SYSTEM_PROMPT = """You write Gleam code. Given a question about a Gleam code base you
have not seen, write the short Gleam function (at most 15 lines) that would most likely
answer it, with a plausible name and signature. Reply with the code only."""
