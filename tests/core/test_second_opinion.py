"""The second opinion: a second real embedding model (bge-small, int8) re-scores the top hits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.embed.cache import EmbedCache, describe
from gbr.core.embed.cache_config import CacheConfig
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.rank.search import Ranking, Searcher
from gbr.core.rank.second_opinion import (
    MODEL_ID,
    SWITCH_ENV,
    SecondOpinion,
    hit_text,
    mixed,
    second_model_files,
)
from gbr.core.records import Hit
from gbr.core.store.facade import Store
from gbr.core.store.indexing import embed_key


def maths_hit(name: str, doc: str, score: float) -> Hit:
    a, b = ("r: Float, theta: Float", "x") if name.startswith("polar") else ("x: Float, y", "r")
    signature = f"pub fn {name}({a}) -> #(Float, Float)"
    return Hit(
        rank=0,
        path="src/maths.gleam",
        module="maths",
        name=name,
        kind="function",
        start_line=1,
        end_line=4,
        score=score,
        text=f"{signature} {{\n  #({b}, 0.0)\n}}",
        signature=signature,
        doc=doc,
    )


POLAR = [
    maths_hit(
        "polar_to_cartesian", "Converts polar coordinates (r, theta) to Cartesian (x, y)", 1.0
    ),
    maths_hit(
        "cartesian_to_polar", "Converts Cartesian coordinates (x, y) to polar (r, theta)", 1.0
    ),
    maths_hit("degrees_to_radians", "Converts an angle in degrees to radians", 0.2),
]


def test_it_is_on_by_default_and_the_switch_turns_it_off() -> None:
    assert second_model_files({}) is not None
    assert Ranking.default({}).second is not None
    for off in ("off", "0", "no", "False"):
        assert second_model_files({SWITCH_ENV: off}) is None
        assert Ranking.default({SWITCH_ENV: off}).second is None


def test_where_the_first_stage_ties_the_second_model_orders_by_meaning() -> None:
    """Both conversions hold the same words; only the direction tells them apart."""
    stage = SecondOpinion(second_model_files({}))  # type: ignore[arg-type]
    out = stage.rerank("convert x, y coordinates to radius and angle", POLAR)
    assert [h.name for h in out][:2] == ["cartesian_to_polar", "polar_to_cartesian"]
    assert all(0.0 <= h.score <= 1.0 for h in out)


def test_the_mix_is_half_and_half_of_both_lists_scaled() -> None:
    first = np.array([3.0, 2.0, 1.0])
    cosines = np.array([0.1, 0.9, 0.5])
    assert np.allclose(mixed(first, cosines), [0.5, 0.75, 0.25])
    assert np.allclose(mixed(np.ones(3), cosines, 1.0), [0.0, 1.0, 0.5])


def test_vectors_go_to_the_shared_cache_and_a_new_process_reads_them(tmp_path: Path) -> None:
    config = CacheConfig(tmp_path / "cache.sqlite")
    files = second_model_files({})
    assert files is not None
    first = SecondOpinion(files, config)
    order = [h.name for h in first.rerank("convert x, y coordinates to radius and angle", POLAR)]
    first.close()

    cache = EmbedCache(config, 384)
    keys = [embed_key(MODEL_ID, hit_text(h)) for h in POLAR]
    held = cache.lookup(keys)
    assert len(held) == 3
    model = OnnxEmbedder(files, pooling="cls")
    # Each text is embedded alone, so the cached vector is the text's own.
    np.testing.assert_allclose(held[keys[1]], model.embed_batch([hit_text(POLAR[1])])[0], atol=1e-6)
    cache.close()

    again = SecondOpinion(files, config)
    assert [
        h.name for h in again.rerank("convert x, y coordinates to radius and angle", POLAR)
    ] == (order)
    assert again._cache is not None and again._cache.stats.hits == 3
    assert again._cache.stats.misses == 0
    again.close()


def test_each_text_gets_its_own_vector_whatever_is_embedded_beside_it() -> None:
    """The model quantises with the range of the whole batch, so embedded together the
    texts would move each other; the stage embeds each alone, and a search ranks the same
    whatever its cache holds."""
    files = second_model_files({})
    assert files is not None
    texts = [hit_text(h) for h in POLAR] + [
        "pub fn id(x) { x }",
        "/// Parses a duration such as `1h30m` into seconds.\npub fn parse(s: String) -> "
        "Result(Int, Nil) {\n  " + 'string.split(s, on: "h")\n  ' * 12 + "}",
    ]
    together = SecondOpinion(files).vectors(texts)
    for text, vector in zip(texts, together, strict=True):
        np.testing.assert_allclose(SecondOpinion(files).vectors([text])[0], vector, atol=1e-6)
    batched = OnnxEmbedder(files, pooling="cls").embed_batch(texts)
    assert float(np.abs(batched - together).max()) > 1e-3  # what embedding alone avoids


def test_a_broken_model_leaves_the_first_order_and_says_why_once(tmp_path: Path) -> None:
    files = second_model_files({})
    assert files is not None
    broken = tmp_path / "model.onnx"
    broken.write_bytes(b"not a model")
    stage = SecondOpinion(replace(files, onnx=broken))
    assert stage.rerank("radius and angle", POLAR) == POLAR
    assert stage.failed is not None
    assert stage.rerank("radius and angle", POLAR) == POLAR  # off from then on


def test_a_hybrid_search_is_re_scored_and_other_modes_are_not(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    db = tmp_path / "i.duckdb"
    run_index(IndexOptions(root=small_example, db=db), model)
    with Store.open(db, read_only=True) as store:
        on = Searcher(store, model, ranking=Ranking.default({}))
        off = Searcher(store, model, ranking=Ranking.default({SWITCH_ENV: "off"}))
        query = "check that an ISBN is valid"
        with_second = on.search(query, k=10)
        without = off.search(query, k=10)
        assert {h.name for h in with_second[:3]} & {h.name for h in without[:5]}
        scores = [h.score for h in with_second]
        assert all(0.0 <= x <= 1.0 for x in scores) and scores == sorted(scores, reverse=True)
        assert scores != [h.score for h in without]
        assert on.search(query, k=10, mode="bm25") == off.search(query, k=10, mode="bm25")
        assert on.search(query, k=10, mode="dense") == off.search(query, k=10, mode="dense")
        many = on.search(query, k=40)
        assert len({(h.path, h.name, h.start_line) for h in many}) == len(many)
        assert [h.rank for h in many] == list(range(1, len(many) + 1))


def test_the_cli_searches_with_it_and_caches_its_vectors_and_not_without_it(
    small_example: Path, tmp_path: Path
) -> None:
    db = tmp_path / "i.duckdb"
    ctl = Path(sys.executable).with_name("gleambrctl")
    env = dict(os.environ)
    subprocess.run([ctl, "index", str(small_example), "--db", str(db)], env=env, check=True)
    config = CacheConfig(Path(env["GBR_HOME"]) / "embed-cache.sqlite")

    def rows() -> int:
        return int(describe(config)["rows"])

    def search(switch: str) -> list[dict[str, object]]:
        run = subprocess.run(
            [ctl, "search", "check that an ISBN is valid", "--db", str(db), "--json"],
            env={**env, SWITCH_ENV: switch},
            capture_output=True,
            text=True,
            check=True,
        )
        hits: list[dict[str, object]] = json.loads(run.stdout)["results"]
        return hits

    indexed = rows()
    off = search("off")
    assert off and rows() == indexed
    on = search("on")
    assert on and rows() > indexed  # the hits' second-model vectors, kept for next time
    assert all(0.0 <= float(h["score"]) <= 1.0 for h in on)  # mixed scores, scaled


def test_what_it_reads_and_how_it_mixes_can_be_chosen() -> None:
    """bench/eval.py measures other readings and mixes through these two arguments."""
    files = second_model_files({})
    assert files is not None
    read: list[str] = []

    def names(hit: Hit) -> str:
        read.append(hit.name)
        return hit.name.replace("_", " ")

    stage = SecondOpinion(files, reads=names, mix=lambda first, cosines, weight: -first)
    out = stage.rerank("radius and angle", POLAR)
    assert read == [h.name for h in POLAR]
    assert [h.name for h in out] == [
        "degrees_to_radians",
        "polar_to_cartesian",
        "cartesian_to_polar",
    ]
    assert [h.score for h in out] == [-0.2, -1.0, -1.0]
