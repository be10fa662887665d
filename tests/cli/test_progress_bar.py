"""The `index` bar as a terminal shows it: files, chunks embedded, a rate and an ETA."""

from __future__ import annotations

import io

from rich.console import Console

from gbr.commands.progress import bar_position, index_progress, progress_text
from gbr.core.records import Progress


def moment(**fields: float | int | None) -> Progress:
    base: dict = dict(done=0, expected=10, chunks=0, dropped=0, elapsed=4.0)
    return Progress(**{**base, **fields})  # type: ignore[arg-type]


def test_mid_file_the_text_counts_chunks_with_a_rate_and_an_eta() -> None:
    # All 10 files written with 200 chunks left without a vector; 80 embedded in 4 s:
    # 20/s. Left: 120 -> 6 s.
    p = moment(done=10, files_indexed=10, chunks_queued=200, chunks_embedded=80)
    assert progress_text(p) == "10/10 files, 80/200 chunks embedded, 20 chunks/s, ETA 0:06"
    assert bar_position(p) == (80.0, 200.0)


def test_before_the_walk_ends_and_with_nothing_to_embed_it_counts_files() -> None:
    assert progress_text(moment(done=3, expected=None)) == "3/? files, 0 chunks, ETA -:--"
    unchanged = moment(done=7, chunks=0, dropped=1)
    assert progress_text(unchanged) == "7/10 files, 0 chunks, 1 dropped, ETA -:--"
    assert bar_position(unchanged) == (7.0, 10.0)


def test_an_hour_long_eta_shows_hours() -> None:
    p = moment(expected=1, elapsed=10.0, chunks_queued=40_000, chunks_embedded=100)
    assert progress_text(p).endswith("10 chunks/s, ETA 1:06:30")  # 39,900 left at 10/s


def test_the_bar_moves_while_one_file_is_embedded() -> None:
    console = Console(file=io.StringIO(), record=True, force_terminal=True, width=160)
    with index_progress(console, enabled=True, transient=False) as update:
        assert update is not None
        for embedded in (0, 32, 64):
            update(moment(expected=1, chunks_queued=100, chunks_embedded=embedded))
    text = console.export_text()
    assert "indexing" in text
    assert "0/1 files, 64/100 chunks embedded, 16 chunks/s, ETA 0:02" in text


def test_no_bar_for_json_or_a_pipe() -> None:
    console = Console(file=io.StringIO(), record=True)
    with index_progress(console, enabled=False) as update:
        assert update is None
    assert console.export_text() == ""
