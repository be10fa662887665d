"""The Oracle actor under supervision: a crash in one question harms nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest

from gbr.actors.faults import FaultPlan, InjectedCrash
from gbr.actors.oracle import AskQuestion, ask, start_oracle
from gbr.actors.pipeline import IndexOptions, run_index
from gbr.actors.supervisor import Supervisor
from gbr.core.answer.oracle import AskOptions, Oracle
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.rank.search import Searcher
from gbr.core.store.facade import Store

QUESTION = AskQuestion("how do I validate an isbn", AskOptions(dry_run=True, max_chunks=3))


def test_a_crash_while_answering_goes_to_the_caller_and_the_oracle_lives_on(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    db = tmp_path / "i.duckdb"
    run_index(IndexOptions(root=small_example, db=db), model)
    supervisor = Supervisor()
    faults = FaultPlan(crash_at={"oracle": {1}})
    with Store.open(db, read_only=True) as store:
        oracle = start_oracle(supervisor, Oracle(Searcher(store, model), None), faults)
        with pytest.raises(InjectedCrash):
            ask(oracle, QUESTION, timeout=30)
        answer = ask(oracle, QUESTION, timeout=30)
        assert [c.hit.name for c in answer.chunks]
        assert supervisor.restarts == 0  # an ask failure is the caller's, not a death

        # A dead oracle is started again for the next question.
        first = oracle.actor_ref
        assert first is not None
        first.stop()
        again = ask(oracle, QUESTION, timeout=30)
        assert oracle.actor_ref is not first and supervisor.restarts == 1
        assert [c.hit.name for c in again.chunks] == [c.hit.name for c in answer.chunks]
        supervisor.stop_all()


def test_indexing_goes_on_while_the_oracle_crashes(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    db = tmp_path / "i.duckdb"
    run_index(IndexOptions(root=small_example, db=db), model)
    supervisor = Supervisor()
    with Store.open(db, read_only=True) as store:
        oracle = start_oracle(
            supervisor, Oracle(Searcher(store, model), None), FaultPlan(always={"oracle"})
        )
        with pytest.raises(InjectedCrash):
            ask(oracle, QUESTION, timeout=30)
        (small_example / "src" / "extra.gleam").write_text("pub fn extra() { 1 }\n")
        summary = run_index(IndexOptions(root=small_example, db=tmp_path / "j.duckdb"), model)
        assert summary.files_indexed == 6 and summary.restarts == 0
        supervisor.stop_all()
