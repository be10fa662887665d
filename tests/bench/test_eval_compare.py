"""bench/eval_compare.py pairs two eval.py runs query by query."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.eval_compare import main


def run(tmp_path: Path, name: str, rows: dict[str, list[float]], devcorpus: bool) -> Path:
    variants = {"shipped": {"per_query": rows}}
    report = (
        {"layouts": {"per-package": {"held": {"queries": len(rows), "variants": variants}}}}
        if devcorpus
        else {"corpus": "examples", "variants": variants}
    )
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(report))
    return path


@pytest.mark.parametrize("devcorpus", [True, False])
def test_the_paired_difference_counts_changed_queries_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], devcorpus: bool
) -> None:
    off = {"q1": [0.0, 1.0, 1.0, 0.5], "q2": [1.0, 1.0, 1.0, 1.0], "q3": [0.0, 0.0, 0.0, 0.0]}
    on = {**off, "q1": [1.0, 1.0, 1.0, 1.0], "gone": [1.0, 1.0, 1.0, 1.0]}
    a, b = run(tmp_path, "a", off, devcorpus), run(tmp_path, "b", on, devcorpus)
    assert main([str(a), str(b)]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    cells = [c.strip() for c in line.strip("|").split("|")]
    assert cells[0] == ("per-package held" if devcorpus else "examples")
    assert cells[2:4] == ["3", "1"]  # the queries both answered; one changed
    assert cells[4].startswith("+0.333") and cells[5].startswith("+0.000")
    assert cells[7].startswith("+0.167")


def test_a_run_without_per_query_rows_says_to_run_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"corpus": "examples", "variants": {"shipped": {"overall": {}}}}))
    new = run(tmp_path, "new", {"q1": [1.0, 1.0, 1.0, 1.0]}, devcorpus=False)
    assert main([str(old), str(new)]) == 0
    assert "no per-query rows: run eval.py again" in capsys.readouterr().out
