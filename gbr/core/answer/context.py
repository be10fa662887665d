"""`ask` context from the code graph: what the chosen chunks call or use, in brief.

A chunk that calls `loan.due_date(book, today)` is hard to explain without knowing what
`due_date` takes and returns; the definition itself rarely ranks high enough to be sent.
So, once the chunks are chosen, the definitions they reference inside the indexed tree go
in as one-line outlines (first doc line and signature) under the chunks' header format,
in the budget the chunks leave: the chunks are chosen first and never displaced.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any

from gbr.core.answer.prompt import ContextChunk, estimate_tokens, header, render_context
from gbr.core.graph.model import Definition

# The header label of an outline: not a number, so it is never taken for a chunk's `[n]`.
LABEL = "+"

# (path, first line, last line) of each chosen chunk, in the order given.
Span = tuple[str, int, int]


@dataclass(frozen=True, slots=True)
class Outline(Definition):
    """A definition used by the chosen chunks, as the prompt shows it: where it is, its
    signature, its doc's gist. The graph's record plus its rendering, no field of its own."""

    @property
    def key(self) -> tuple[str, str]:
        return (self.module, self.name)

    def body(self) -> str:
        first = first_sentence(self.doc)
        lines = [f"/// {first}"] if first else []
        return "\n".join([*lines, self.signature.strip() or self.name])

    def render(self) -> str:
        lines = (self.start_line, self.end_line)
        top = header(LABEL, self.name, self.kind, self.path, lines, self.module)
        return f"{top}\n```gleam\n{self.body()}\n```\n"

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.render()) + 1  # the blank line between blocks

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(Definition)}

    @classmethod
    def of(cls, d: Definition) -> Outline:
        return cls(**{f.name: getattr(d, f.name) for f in fields(Definition)})

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Outline:
        return cls(
            data["module"],
            data["name"],
            data["kind"],
            data["path"],
            int(data["start_line"]),
            int(data["end_line"]),
            data.get("signature") or "",
            data.get("doc") or "",
        )


DOC_CHARS = 160  # of the doc's first sentence, at most


def first_sentence(doc: str) -> str:
    """The gist of a doc comment: its first sentence (the index keeps a doc as one line)."""
    text = " ".join(doc.split())
    head, dot, _ = text.partition(". ")
    text = head + ("." if dot else "")
    return text if len(text) <= DOC_CHARS else text[: DOC_CHARS - 1].rstrip() + "…"


# The store's query: for each span, the internal definitions referenced inside it, as
# (index of the span, outline), in the order they are first referenced.
UsedBy = Callable[[Sequence[Span]], Sequence[tuple[int, Definition]]]


def used_outlines(chunks: Sequence[ContextChunk], used_by: UsedBy, budget: int) -> list[Outline]:
    """The outlines of what `chunks` use that fit `budget` tokens, best chunk's first.

    A definition already in the prompt (a chosen chunk is it, or covers its lines) and a
    definition used twice are left out; one that does not fit is skipped, and a smaller
    one after it may still go in, as `select` does with chunks.
    """
    if budget <= 0 or not chunks:
        return []
    by_rank = sorted(chunks, key=lambda c: c.hit.rank)
    spans = [(c.hit.path, c.hit.start_line, c.hit.end_line) for c in by_rank]
    present = {(c.hit.module, c.hit.name) for c in by_rank}
    rows = sorted(enumerate(used_by(spans)), key=lambda item: (item[1][0], item[0]))
    chosen: list[Outline] = []
    seen: set[tuple[str, str]] = set()
    used = 0
    for _, (_, definition) in rows:
        outline = Outline.of(definition)
        if outline.key in seen or outline.key in present or _covered(outline, spans):
            continue
        seen.add(outline.key)
        if used + outline.tokens <= budget:
            chosen.append(outline)
            used += outline.tokens
    return chosen


def _covered(outline: Outline, spans: Sequence[Span]) -> bool:
    return any(
        path == outline.path and first <= outline.start_line <= last for path, first, last in spans
    )


def context_tokens(chunks: Sequence[ContextChunk]) -> int:
    """What the chunks cost as `render_context` joins them (one newline between blocks)."""
    return sum(c.tokens for c in chunks) + max(0, len(chunks) - 1)


def render_with_outlines(chunks: Sequence[ContextChunk], outlines: Sequence[Outline]) -> str:
    """The chunks as laid out (best at the edges), the outlines in the middle.

    The middle is where a long context is read least; the outlines are the least of it.
    """
    if not outlines:
        return render_context(chunks)
    middle = (len(chunks) + 1) // 2
    parts = [
        render_context(chunks[:middle]),
        "\n".join(o.render() for o in outlines),
        render_context(chunks[middle:]),
    ]
    return "\n".join(p for p in parts if p)
