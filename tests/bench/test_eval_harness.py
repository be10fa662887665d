"""The eval harness end to end on a tiny corpus whose answers are known."""

from __future__ import annotations

import json
from pathlib import Path

from bench.eval import VARIANTS, Corpus, evaluate, load_corpus, main
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
