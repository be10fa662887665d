"""The citation scan over an LLM answer: the same citations as the one-regex reading, in time
linear in the answer's length, whatever the answer holds (issue 32, item 1: a long word made
the old regex quadratic and froze `ask` and the daemon)."""

from __future__ import annotations

import re
import time

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from gbr.core.answer.prompt import scan_citations

# The reading the scan must agree with: what the answer means, not how it is found.
_REFERENCE = re.compile(r"([\w./-]+\.gleam):(\d+)(?:-(\d+))?")


def reference(answer: str) -> list[tuple[str, int, int]]:
    out = []
    for m in _REFERENCE.finditer(answer):
        first = int(m.group(2))
        out.append((m.group(1), first, int(m.group(3)) if m.group(3) else first))
    return out


# Pieces an answer is made of, weighted toward the ones that meet at a citation's edges.
_PIECE_LIST = [
    "src/", "app", "router", ".gleam", ":", "12", "-", "40", " ", "\n", ".", "/", "é",
    "x_1", "`", "(", ")", ",", "[2]", "gleam", "::", ":-", "-3",
]  # fmt: skip
_PIECES = st.sampled_from(_PIECE_LIST)
_ANSWERS = st.lists(_PIECES, max_size=60).map("".join)


@given(_ANSWERS)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_the_scan_finds_what_the_regex_reads(answer: str) -> None:
    assert list(scan_citations(answer)) == reference(answer)


def test_the_scan_reads_a_normal_answer() -> None:
    answer = (
        "It is `isbn.validate` (src/bookshelf/isbn.gleam:12-30), called from "
        "src/bookshelf/loan.gleam:40 and [2]; see also ./src/a-b/c_d.gleam:7."
    )
    assert list(scan_citations(answer)) == [
        ("src/bookshelf/isbn.gleam", 12, 30),
        ("src/bookshelf/loan.gleam", 40, 40),
        ("./src/a-b/c_d.gleam", 7, 7),
    ]


def _seconds(answer: str) -> float:
    """The best of three scans: the least disturbed by other work on the machine."""
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        list(scan_citations(answer))
        best = min(best, time.perf_counter() - began)
    return best


# A word 4x as long should cost about 4x, 16x if quadratic. Times under the floor are all
# noise, so they count as the floor; the allowance of 8x (against 4x) absorbs a busy machine.
_FLOOR_SECONDS = 0.005
_ALLOWED_RATIO = 8.0
_WORD = 12_000


@given(
    st.sampled_from(["A", "aZ09", "x_", "./-", "é"]),
    st.sampled_from(["", ".gleam", ".gleam:", ".gleam:1-", " src/a.gleam:3"]),
)
@settings(max_examples=8, deadline=None, phases=[Phase.explicit, Phase.generate])
def test_the_scan_time_grows_linearly_with_a_long_word(alphabet: str, tail: str) -> None:
    def word(n: int) -> str:
        return (alphabet * (n // len(alphabet) + 1))[:n] + tail

    small = max(_seconds(word(_WORD)), _FLOOR_SECONDS)
    large = _seconds(word(4 * _WORD))
    assert large <= _ALLOWED_RATIO * small, (small, large)
