"""bench/experiments/mine_doc_pairs.py: the pairs it writes for fine-tuning the embedder."""

from __future__ import annotations

from pathlib import Path

from bench.experiments.mine_doc_pairs import main, mine
from gbr.core.parse.chunker import ChunkLimits

SOURCE = """//// The module's own doc is not a pair.

/// Turns a temperature in Celsius into Fahrenheit. Rounds nothing.
pub fn to_fahrenheit(celsius: Float) -> Float {
  celsius *. 1.8 +. 32.0
}

/// Short.
pub fn tiny() -> Int {
  1
}

pub fn undocumented(x: Int) -> Int {
  x + 1
}

/// The colours a traffic light can show, in order.
pub type Light {
  Red
  Amber
  Green
}
"""


def package(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "gleam.toml").write_text('name = "thermo"\nversion = "1.0.0"\n')
    (root / "src" / "thermo.gleam").write_text(SOURCE)
    (root / "test").mkdir()
    (root / "test" / "thermo_test.gleam").write_text(
        "/// Checks that freezing water converts to 32 degrees.\n"
        "pub fn freezing_test() {\n  to_fahrenheit(0.0)\n}\n"
    )
    return root


def words(text: str) -> int:
    return len(text.split())


def test_each_documented_definition_gives_its_first_sentence_and_its_code_without_the_doc(
    tmp_path: Path,
) -> None:
    rows = {r["name"]: r for r in mine(package(tmp_path / "thermo"), words, ChunkLimits())}

    assert set(rows) == {"to_fahrenheit", "Light", "freezing_test"}  # short and undocumented docs
    pair = rows["to_fahrenheit"]
    assert pair["query"] == "Turns a temperature in Celsius into Fahrenheit"
    assert "Celsius into Fahrenheit" not in str(pair["passage"])
    assert "celsius *. 1.8 +. 32.0" in str(pair["passage"])
    assert "Celsius into Fahrenheit" in str(pair["full"])  # what gbr embeds keeps the doc
    assert pair["repo"] == "thermo" and pair["kind"] == "function"
    assert rows["Light"]["query"] == "The colours a traffic light can show, in order."
    assert rows["freezing_test"]["test"] is True and pair["test"] is False


def test_a_devcorpus_without_the_dev_half_stops_before_writing(tmp_path: Path) -> None:
    package(tmp_path / "corpus" / "gleam-community__maths")
    out = tmp_path / "pairs.jsonl"
    try:
        main(["--out", str(out), "--devcorpus", str(tmp_path / "corpus")])
    except SystemExit as stop:
        assert "lacks some of the dev half" in str(stop)
    else:
        raise AssertionError("mined an incomplete dev half")
    assert not out.exists()
