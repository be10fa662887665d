"""Issue 15, item 2: an index run never hangs when its start fails or the file is busy.

On main, an actor whose `on_start` failed (its store could not be opened: another process
held the file for a moment) died without its supervisor hearing of it, the messages queued
for it were dropped, and `run_index` waited for them forever.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import structlog

from gbr.actors import pipeline
from gbr.actors.faults import parse_faults
from gbr.actors.pipeline import IndexOptions, run_index
from gbr.actors.supervisor import RestartPolicy
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.errors import GbrError, SupervisionError
from gbr.core.store.facade import Store
from gbr.core.store.lock import LOCK_WAIT
from gbr.core.store.snapshot import READ_WAIT
from tests.faults.conftest import ctl, held_by_another_process, start_ctl

BOUND = 240.0  # seconds: far above a loaded machine's run; reaching it means a hang


def bounded(call: Callable[[], Any], timeout: float = BOUND) -> Any:
    """`call()` on a thread; a hang fails the test instead of the suite."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = call()
        except BaseException as exc:
            result["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"hung for {timeout:g} s"
    if "error" in result:
        raise result["error"]
    return result["value"]


def chunk_keys(db: Path) -> Counter[tuple[str, str, str, int]]:
    with Store.open(db, read_only=True) as store:
        return Counter(store.con.execute("SELECT path, kind, name, part FROM chunks").fetchall())


@pytest.fixture
def clean(small_example: Path, model: OnnxEmbedder, tmp_path: Path) -> Counter:
    db = tmp_path / "clean.duckdb"
    run_index(IndexOptions(root=small_example, db=db), model)
    return chunk_keys(db)


@pytest.mark.parametrize(
    "spec",
    [
        # The writer's first start fails: nothing reached it yet, or it was queued.
        "writer@start",
        # The embedder crashes on its 2nd message, and its next incarnation fails to start
        # while the parsers keep queueing: the redelivered message and the queue move on.
        "embedder@2,embedder@start2",
    ],
)
def test_a_failed_start_is_restarted_like_a_crash_and_nothing_queued_is_lost(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path, clean: Counter, spec: str
) -> None:
    faults = parse_faults(spec)
    assert faults is not None
    db = tmp_path / "started.duckdb"
    with structlog.testing.capture_logs() as events:
        summary = bounded(
            lambda: run_index(
                IndexOptions(root=small_example, db=db, batch_chunks=4, faults=faults), model
            )
        )
    assert sum(faults.crashes.values()) == spec.count("@")  # each drill fired once
    assert any(e["event"] == "actor_start_failed" for e in events)
    assert summary.dead_letters == 0 and summary.files_dropped == 0
    assert chunk_keys(db) == clean  # every chunk, once


def test_a_start_that_keeps_failing_ends_the_run_with_one_error(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    options = IndexOptions(
        root=small_example,
        db=tmp_path / "never.duckdb",
        faults=parse_faults(",".join(f"writer@start{n}" for n in range(1, 50))),
        policy=RestartPolicy(max_restarts=3, within_seconds=60),
    )
    with pytest.raises(SupervisionError, match="the writer crashed 4 times") as info:
        bounded(lambda: run_index(options, model))
    assert "injected failure of writer's start" in str(info.value)
    assert "\n" not in str(info.value)


def test_a_holder_right_after_the_store_is_prepared_cannot_hang_the_run(
    indexed_small: Path, model: OnnxEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's reproduction: another process opens the index read-only in the moment
    between `prepare` and the actors' starts (the coordinator starts just then; the hook
    only adds that process, everything else is real). main: the writer's and embedder's
    starts failed, nobody heard, and the run hung."""
    small_example = indexed_small  # indexed once per session, copied
    db = small_example / ".gbr" / "index.duckdb"
    (small_example / "src/bookshelf/isbn.gleam").open("a").write("\npub fn held() { 1 }\n")
    real_start = pipeline.CoordinatorActor.start
    holders = []

    def start_with_a_holder(*args: Any, **kwargs: Any) -> Any:
        holder = subprocess.Popen(
            [sys.executable, "-c", _TRY_HOLD, str(db)], stdout=subprocess.PIPE, text=True
        )
        assert holder.stdout is not None
        holders.append((holder, holder.stdout.readline().strip()))
        return real_start(*args, **kwargs)

    monkeypatch.setattr(pipeline.CoordinatorActor, "start", start_with_a_holder)
    try:
        summary = bounded(lambda: run_index(IndexOptions(root=small_example, db=db), model))
    finally:
        for holder, _ in holders:
            holder.kill()
            holder.wait(10)
    [(_, said)] = holders
    assert said.startswith("refused")  # the run kept the file: no moment to slip in
    assert summary.files_indexed == 1 and summary.files_dropped == 0


# Tries to open the index read-only and keep it 3 s; says whether it could.
_TRY_HOLD = """
import sys, time, duckdb
try:
    con = duckdb.connect(sys.argv[1], read_only=True)
except duckdb.Error as exc:
    print("refused", exc, flush=True)
else:
    print("held", flush=True)
    time.sleep(3)
"""


def test_a_cli_run_is_not_blocked_by_a_reader_holding_the_index(
    indexed_small: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    """main: `error: cannot open index ...: Could not set lock` at once, exit 1. A CLI run
    now writes a copy and renames it over the index, so a reader never stands in its way."""
    small_example = indexed_small  # indexed once per session, copied
    db = small_example / ".gbr" / "index.duckdb"
    (small_example / "src/bookshelf/isbn.gleam").open("a").write("\npub fn waited() { 1 }\n")
    with held_by_another_process(db, seconds=600):
        done = ctl("index", ".", "--json", cwd=small_example, home=tmp_path / "home")
    assert done.returncode == 0, done.stderr
    assert '"files_indexed": 1' in done.stdout


def test_an_in_place_run_waits_for_a_held_index_then_indexes(
    indexed_small: Path, model: OnnxEmbedder
) -> None:
    """A run in place (the daemon's) waits a bounded while for another process's hold."""
    small_example = indexed_small  # indexed once per session, copied
    db = small_example / ".gbr" / "index.duckdb"
    (small_example / "src/bookshelf/isbn.gleam").open("a").write("\npub fn waited() { 1 }\n")
    # Held 4 s, within the 20 s allowed here: the run finds the file busy, then free.
    with held_by_another_process(db, seconds=4):
        options = IndexOptions(root=small_example, db=db, lock_wait=20.0)
        with structlog.testing.capture_logs() as events:
            summary = bounded(lambda: run_index(options, model))
    assert summary.files_indexed == 1
    assert any(e["event"] == "index_busy" for e in events)


def test_an_index_held_too_long_fails_with_one_line_naming_the_holder(
    indexed_small: Path, model: OnnxEmbedder
) -> None:
    small_example = indexed_small  # indexed once per session, copied
    db = small_example / ".gbr" / "index.duckdb"
    with held_by_another_process(db, seconds=600) as holder:
        started = time.monotonic()
        options = IndexOptions(root=small_example, db=db, lock_wait=3.0)
        with pytest.raises(GbrError) as caught:
            bounded(lambda: run_index(options, model))
        waited = time.monotonic() - started
    message = str(caught.value)
    assert "\n" not in message and message.startswith("the index ")
    assert "is in use by another process" in message
    assert f"PID {holder.pid}" in message and "run again" in message
    assert 3 <= waited < BOUND  # it waited the bounded while first


def test_two_index_runs_started_together_both_end(small_example: Path, tmp_path: Path) -> None:
    """Each succeeds, or ends at once with one line naming the other; none hangs."""
    runs = [
        start_ctl("index", ".", "--json", cwd=small_example, home=tmp_path / f"home{i}")
        for i in range(2)
    ]
    outcomes = []
    for proc in runs:
        out, err = proc.communicate(timeout=BOUND)
        outcomes.append((proc.returncode, out, err))
    for code, _, err in outcomes:
        # One writer at a time: the other ends at once with one line naming it (exit 75).
        assert code == 0 or (code == 75 and len(err.strip().splitlines()) == 1), err
        assert code == 0 or "an index run (pid" in err
        assert "Traceback" not in err
    assert any(code == 0 for code, _, _ in outcomes)


def test_a_program_holding_the_index_for_writing_is_named_truthfully_after_the_wait(
    indexed_small: Path, tmp_path: Path
) -> None:
    """Issue 32 item 14: another program (not gbr) holds the index file through DuckDB for
    writing. main: `index` said "an index run (pid N)" naming its own pid, after the
    reader's 3 s instead of the run's 10 s (`LOCK_WAIT`); `search` called the holder an
    index run too. Now both name the program DuckDB reports, and the run waits its 10 s."""
    small_example = indexed_small  # indexed once per session, copied
    db = small_example / ".gbr" / "index.duckdb"
    (small_example / "src/bookshelf/isbn.gleam").open("a").write("\npub fn held() { 1 }\n")
    home = tmp_path / "home"
    with held_by_another_process(db, seconds=600, write=True) as holder:
        started = time.monotonic()
        run = start_ctl("index", ".", cwd=small_example, home=home)
        _, run_err = run.communicate(timeout=BOUND)
        waited = time.monotonic() - started
        search = ctl("search", "isbn", "-k", "1", cwd=small_example, home=home)
    assert f"pid {run.pid}" not in run_err.lower()  # its own
    outcomes = ((run.returncode, run_err, LOCK_WAIT), (search.returncode, search.stderr, READ_WAIT))
    for code, err, wait in outcomes:
        assert code == 75, err
        [line] = err.strip().splitlines()
        assert "index run" not in line
        assert f"is in use by another process (PID {holder.pid}: " in line
        assert f"still busy after {wait:g} s" in line
    assert waited >= LOCK_WAIT
