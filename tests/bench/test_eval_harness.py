"""The eval harness end to end on a tiny corpus whose answers are known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.eval import VARIANTS, Corpus, devcorpus_units, evaluate, load_corpus, main
from gbr.core.embed.embedder import OnnxEmbedder

SOURCE = """/// Count the vowels in a word.
pub fn count_vowels(word: String) -> Int {
  word |> string.to_graphemes |> list.count(is_vowel)
}

/// Open the front door of the house with a key.
pub fn unlock_door(key: Key) -> Result(Door, LockError) {
  case key.valid {
    True -> Ok(Door(open: True))
    False -> Error(WrongKey)
  }
}

pub type LockError {
  WrongKey
  Jammed(reason: String)
}
"""
QUERIES = [
    {"id": "t1", "query": "count_vowels", "kind": "identifier",
     "targets": [{"file": "src/house.gleam", "name": "count_vowels"}]},
    {"id": "t2", "query": "open the door using a key", "kind": "nl",
     "targets": [{"file": "src/house.gleam", "name": "unlock_door"}]},
    {"id": "t3", "query": "what can go wrong when unlocking", "kind": "type",
     "targets": [{"file": "src/house.gleam", "name": "LockError"}]},
]  # fmt: skip


def tiny_corpus(make_package) -> tuple[Path, Path]:
    root = make_package({"src/house.gleam": SOURCE}, name="house")
    queries = root.parent / "house.jsonl"
    queries.write_text("\n".join(json.dumps(q) for q in QUERIES) + "\n")
    return root, queries


def test_harness_scores_known_answers(make_package, model: OnnxEmbedder, tmp_path: Path) -> None:
    root, queries = tiny_corpus(make_package)
    corpus: Corpus = load_corpus(root, [queries])
    variants = [v for v in VARIANTS if v.name in ("bm25", "dense", "hybrid")]
    report = evaluate(corpus, variants, model, tmp_path / "out")
    assert set(report["variants"]) == {"bm25", "dense", "hybrid"}
    hybrid = report["variants"]["hybrid"]
    assert hybrid["overall"]["n"] == 3
    assert hybrid["overall"]["R@5"] == 1.0  # four chunks in all: every target is in the top 5
    assert report["variants"]["bm25"]["by_kind"]["identifier"]["R@1"] == 1.0
    assert hybrid["overall"]["MRR@10"] > 0.5
    assert hybrid["misses"] == []


def test_harness_cli_writes_json_and_png(make_package, tmp_path: Path) -> None:
    root, queries = tiny_corpus(make_package)
    out = tmp_path / "report.json"
    png = tmp_path / "chart.png"
    code = main(
        [
            "--corpus", str(root), "--queries", str(queries), "--variants", "bm25,hybrid",
            "--out", str(tmp_path / "work"), "--json", str(out), "--png", str(png),
        ]
    )  # fmt: skip
    assert code == 0
    report = json.loads(out.read_text())
    assert report["queries"] == 3 and list(report["variants"]) == ["bm25", "hybrid"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_harness_measures_rerankers(make_package, tmp_path: Path, fake_llm, monkeypatch) -> None:
    """Both reranker backends run through the harness (the LLM one for correctness only)."""
    from tests.tiny_models import build_tiny_cross_encoder

    root, queries = tiny_corpus(make_package)
    model_dir = build_tiny_cross_encoder(tmp_path / "ce")
    for var, value in fake_llm.env("openai").items():
        monkeypatch.setenv(var, value)
    monkeypatch.delenv("GROQ_API_KEY", raising=False)
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    fake_llm.respond = lambda body: "[1]"
    out = tmp_path / "r.json"
    main(
        [
            "--corpus", str(root), "--queries", str(queries), "--variants", "hybrid",
            "--rerank", f"cross-encoder:{model_dir}", "--rerank", "llm",
            "--out", str(tmp_path / "work"), "--json", str(out), "--png", str(tmp_path / "c.png"),
        ]
    )  # fmt: skip
    report = json.loads(out.read_text())
    assert list(report["variants"]) == ["hybrid", "hybrid+cross-encoder", "hybrid+llm"]
    assert report["variants"]["hybrid+llm"]["overall"]["n"] == 3
    assert len(fake_llm.requests) == 3  # one listwise call per query


def test_devcorpus_units_one_per_package_or_one_for_all_with_files_rerooted(
    tmp_path: Path,
) -> None:
    root, queries_dir = tmp_path / "corpus", tmp_path / "queries"
    queries_dir.mkdir()
    for package in ("lpil__pog", "someone__held"):  # one of the dev half, one held out
        (root / package).mkdir(parents=True)
        (queries_dir / f"{package}.jsonl").write_text(json.dumps(QUERIES[0]) + "\n")

    dev = devcorpus_units(root, queries_dir, ("dev",), "per-package")
    both = devcorpus_units(root, queries_dir, ("dev", "held"), "per-package")
    one = devcorpus_units(root, queries_dir, ("dev", "held"), "all-in-one")

    assert [(u.name, u.root) for u in dev] == [("lpil__pog", root / "lpil__pog")]
    assert dev[0].queries[0].targets[0].file == "src/house.gleam"
    assert [u.name for u in both] == ["lpil__pog", "someone__held"]
    assert [(u.name, u.root, u.packages) for u in one] == [
        ("ALL", root, ["lpil__pog", "someone__held"])
    ]
    assert [q.targets[0].file for q in one[0].queries] == [
        "lpil__pog/src/house.gleam",
        "someone__held/src/house.gleam",
    ]
    (root / "someone__held").rmdir()
    with pytest.raises(SystemExit, match="no folder"):
        devcorpus_units(root, queries_dir, ("held",), "per-package")
