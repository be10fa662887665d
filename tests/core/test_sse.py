"""The SSE parser against the WHATWG event-stream rules, however the stream is cut into reads.

A network read can end anywhere: inside a field, between the CR and the LF of one line end, or
right before the blank line that dispatches an event. The parser must give the same events as
a parser that sees the whole text at once, and those must be the events the spec defines. The
reference below is written straight from the spec's steps, over the whole text, and shares no
code with `SseParser`.
"""

from __future__ import annotations

import itertools
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from gbr.core.llm.sse import SseEvent, SseParser, iter_sse

Event = tuple[str, str, str | None]
"""(data, event type, last event id), as the spec's dispatch step sees them."""


def reference(stream: str) -> list[Event]:
    """The events of a whole stream, by the WHATWG "interpreting an event stream" steps."""
    stream = stream.removeprefix("\ufeff")
    # A line is whatever a CRLF, a lone LF or a lone CR ends; the text after the last line
    # end is a line still being received, and the stream's end discards it.
    lines = re.split(r"\r\n|\n|\r", stream)[:-1]
    events: list[Event] = []
    data, kind, last_id = "", "", None
    for line in lines:
        if line == "":
            if data:
                events.append((data.removesuffix("\n"), kind or "message", last_id))
            data, kind = "", ""
            continue
        if line.startswith(":"):
            continue
        if ":" in line:
            name, value = line.split(":", 1)
            value = value.removeprefix(" ")
        else:
            name, value = line, ""
        if name == "data":
            data += value + "\n"
        elif name == "event":
            kind = value
        elif name == "id" and "\0" not in value:
            last_id = value
    return events


def parsed(pieces: list[str]) -> list[Event]:
    """The events `SseParser` gives when the stream arrives as these reads."""
    return [(e.data, e.event, e.id) for e in iter_sse(pieces)]


def cut(stream: str, points: list[int]) -> list[str]:
    bounds = [0, *sorted(points), len(stream)]
    return [stream[a:b] for a, b in itertools.pairwise(bounds)]


# Streams written with each kind of line end, and with all of them mixed.
LINES = [
    ": keep-alive",
    'data: {"a": 1}',
    "",
    "event: delta",
    "id: 7",
    "data: one",
    "data:two",
    "data",
    "",
    "",
    "data: [DONE]",
    "",
    "data: cut mid-ev",
]


def written(ends: list[str]) -> str:
    return "".join(line + ends[i % len(ends)] for i, line in enumerate(LINES[:-1])) + LINES[-1]


STREAMS = {
    "lf": written(["\n"]),
    "crlf": written(["\r\n"]),
    "cr": written(["\r"]),
    # A CRLF before an LF blank line (the split that merged events), and never a CR-ended
    # line before an LF-ended blank one, which written out is one CRLF.
    "mixed": written(
        ["\r\n", "\r\n", "\n", "\n", "\r", "\r\n", "\n", "\r\n", "\n", "\r\n", "\n", "\r"]
    ),
    "bom-crlf": "\ufeff" + written(["\r\n"]),
}
EXPECTED = [
    ('{"a": 1}', "message", None),
    ("one\ntwo\n", "delta", "7"),
    ("[DONE]", "message", "7"),
]


def test_the_reference_reads_the_spec_examples() -> None:
    # Fixed expectations, so that the reference itself is checked and not only trusted.
    for name, stream in STREAMS.items():
        assert reference(stream) == EXPECTED, name
    # The spec's own example: two events, "" and "\n"; the last line is never ended.
    assert reference("data\n\ndata\ndata\n\ndata:") == [
        ("", "message", None),
        ("\n", "message", None),
    ]
    assert reference("data:test\n\n") == reference("data: test\n\n") == [("test", "message", None)]
    assert reference("event: x\n\ndata: y\n\n") == [("y", "message", None)]  # type was reset


def test_every_split_point_every_ending() -> None:
    for name, stream in STREAMS.items():
        assert parsed([stream]) == EXPECTED, name
        assert parsed(list(stream)) == EXPECTED, name  # one character per read
        for i in range(len(stream) + 1):
            assert parsed([stream[:i], stream[i:]]) == EXPECTED, (name, i)


def test_every_pair_of_split_points() -> None:
    # Three reads reach the case one cut cannot: a read holding only the LF of a CRLF.
    for name, stream in STREAMS.items():
        for i, j in itertools.combinations_with_replacement(range(len(stream) + 1), 2):
            assert parsed([stream[:i], stream[i:j], stream[j:]]) == EXPECTED, (name, i, j)


def test_a_crlf_split_across_reads_ends_one_line_not_two() -> None:
    # The reported bug: the read holding the LF alone left the parser thinking a CR was still
    # pending, so the next read's leading LF (the blank line) was taken for its other half.
    assert parsed(["data: a\r", "\n", "\ndata: b\n\n"]) == [
        ("a", "message", None),
        ("b", "message", None),
    ]
    parser = SseParser()
    assert parser.feed("data: a\r") == []
    assert parser.feed("") == []  # an empty read between CR and LF changes nothing
    assert parser.feed("\n") == []
    assert parser.feed("\n") == [SseEvent("a")]
    # A CR then a CR is two line ends (a blank line), whatever lies between the reads.
    assert parsed(["data: c\r", "\r"]) == [("c", "message", None)]


# -- property-based: any stream from the grammar, cut any way ---------------------------------

FIELDS = st.sampled_from(
    [
        "",
        "",
        ":",
        ": comment",
        "data",
        "data:",
        "data: x",
        "data:y",
        "data:  two spaces",
        'data: {"t": "é"}',
        "data: [DONE]",
        "event: delta",
        "event",
        "id: 3",
        "id",
        "id: a\0b",
        "retry: 100",
        "unknown: z",
        "nocolon",
    ]
)
ENDS = st.sampled_from(["\n", "\r\n", "\r"])


@st.composite
def streams(draw: st.DrawFn) -> str:
    lines = draw(st.lists(st.tuples(FIELDS, ENDS), max_size=24))
    text = "".join(line + end for line, end in lines)
    text = draw(st.sampled_from(["", "\ufeff"])) + text
    return text + draw(st.sampled_from(["", "data: unterminated", "\r"]))


@st.composite
def cut_streams(draw: st.DrawFn) -> tuple[str, list[str]]:
    stream = draw(streams())
    points = draw(st.lists(st.integers(0, len(stream)), max_size=12))
    return stream, cut(stream, points)


@settings(max_examples=400, deadline=None, database=None)  # nothing written outside tmp
@given(cut_streams())
def test_any_chunking_gives_the_events_of_the_whole_stream(case: tuple[str, list[str]]) -> None:
    stream, pieces = case
    assert "".join(pieces) == stream
    assert parsed(pieces) == parsed([stream]) == reference(stream)


@settings(max_examples=200, deadline=None, database=None)
@given(streams())
def test_one_character_per_read_matches_the_spec(stream: str) -> None:
    assert parsed(list(stream)) == reference(stream)
