"""A cap on what one chunk may hold, and how a node too big for it is cut.

The chunker splits a big definition at its children's boundaries, but one child can be
huge (a 4.7 MB constant list, a generated function), and a chunk that kept it whole held
megabytes of text, its search text and its tokenization several times over: 2 GB for one
constant. Every part is now at most MAX_CHUNK_CHARS characters. A span over the cap is cut
into windows of whole lines; a single line over the cap is cut into pieces of the cap (each
piece keeps the line's number, and the part index orders them). Nothing is dropped: the
windows of a span, in order, hold every character of it.

The size of a span is measured in characters from the line lengths, so the decision costs
no copy and no tokenizer call on megabytes of text.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from tree_sitter import Parser, Tree

# About 400 lines of ordinary code; the embedder reads only the first 256 tokens (roughly
# 1,000 characters) of it anyway, and BM25 still sees every word.
MAX_CHUNK_CHARS = 16_000

Piece = tuple[int, int, str]  # first row, last row (0-based, inclusive), text


def span_chars(lines: Sequence[str], first: int, last: int) -> int:
    """Characters of rows first..last joined by newlines, without building the string."""
    return sum(len(lines[row]) for row in range(first, last + 1)) + (last - first)


def windows(lines: Sequence[str], first: int, last: int, cap: int = MAX_CHUNK_CHARS) -> list[Piece]:
    """Rows first..last as pieces of at most `cap` characters, in order.

    Whole lines are packed while they fit; a line longer than `cap` becomes pieces of its
    own, cut every `cap` characters.
    """
    pieces: list[Piece] = []
    start: int | None = None
    size = 0
    for row in range(first, last + 1):
        length = len(lines[row])
        if start is not None and size + 1 + length > cap:
            pieces.append((start, row - 1, "\n".join(lines[start:row])))
            start = None
        if length > cap:
            line = lines[row]
            pieces.extend((row, row, line[i : i + cap]) for i in range(0, length, cap))
            continue
        if start is None:
            start, size = row, length
        else:
            size += 1 + length
    if start is not None:
        pieces.append((start, last, "\n".join(lines[start : last + 1])))
    return pieces


PARSE_SLICE = 1 << 16  # bytes handed to tree-sitter per read
_STOPPING = threading.Event()


class ParseStopped(Exception):
    """A parse ended early because the process is being interrupted (`stop_parsing`)."""


def stop_parsing() -> None:
    """End every big parse in this process at its next slice, with ParseStopped.

    An interrupted run must keep what it finished within a few seconds, and its writer
    gets the GIL only between the slices of a parse: one slice at a time, writing thirty
    small files behind a 10 MB parse took longer than the grace allows."""
    _STOPPING.set()


def parse_yielding(parser: Parser, content: bytes) -> Tree:
    """`parser.parse(content)`, fed in slices so that other threads get to run meanwhile.

    tree-sitter holds the GIL for a whole parse: 20 s on a 10 MB file, during which neither
    a signal handler nor the exit watchdog could run (gbr.interrupts). Between slices the
    read callback is Python code, where the interpreter hands the GIL on. Slices end on
    character boundaries, so no UTF-8 sequence is split between two reads.
    """
    if len(content) <= PARSE_SLICE:
        return parser.parse(content)

    def read(offset: int, _point: object) -> bytes:
        if _STOPPING.is_set():
            raise ParseStopped
        end = min(offset + PARSE_SLICE, len(content))
        while end < len(content) and end > offset + 1 and content[end] & 0xC0 == 0x80:
            end -= 1  # step back off a UTF-8 continuation byte
        return content[offset:end]

    try:
        return parser.parse(read)
    except SystemError:  # tree-sitter wraps what the read callback raised
        if _STOPPING.is_set():
            raise ParseStopped from None
        raise
