"""The ranking stage on a real index: priors order real chunks, the learned ranker file loads
and reorders deterministically, and `tests=exclude` keeps test code out entirely."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from gbr.core.answer.oracle import AskOptions, Notes, Oracle
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.errors import ConfigError
from gbr.core.rank.priors import NO_PRIORS, Priors, is_aside
from gbr.core.rank.ranker import DEFAULT_RANKER_PATH, FEATURES, LinearRanker, load_ranker
from gbr.core.rank.search import NO_RANKING, Filter, Ranking, Searcher
from gbr.core.store.facade import Store
from tests.conftest import Indexed

# Worded like the example's tests: on the raw fused order, test functions win it.
TESTY = "parse an isbn and check that the round trip to a string gives it back"


@pytest.fixture(scope="module")
def small_db(tmp_path_factory: pytest.TempPathFactory, indexed_small_template: Indexed) -> Path:
    # src/bookshelf/*.gleam and test/isbn_test.gleam
    root = indexed_small_template.copy(tmp_path_factory.mktemp("ranking") / "small")
    return root / ".gbr" / "index.duckdb"


@pytest.fixture
def store(small_db: Path) -> Iterator[Store]:
    with Store.open(small_db, read_only=True) as opened:
        yield opened


def names(hits: list) -> list[tuple[str, str]]:
    return [(h.path, h.name) for h in hits]


def first_library_and_test(hits: list) -> tuple[int, int]:
    lib = next(h.rank for h in hits if not is_aside(h.path, h.name))
    test = next(h.rank for h in hits if is_aside(h.path, h.name))
    return lib, test


def test_without_priors_test_code_crowds_the_top(store: Store, model: OnnxEmbedder) -> None:
    """The premise of the prior, on real chunks: the raw order puts a test first."""
    hits = Searcher(store, model, ranking=NO_RANKING).search(TESTY, k=10)
    lib, test = first_library_and_test(hits)
    assert test < lib


def test_demote_puts_library_hits_above_test_hits(store: Store, model: OnnxEmbedder) -> None:
    ranking = Ranking(priors=Priors(tests="demote", aside=0.3))
    hits = Searcher(store, model, ranking=ranking).search(TESTY, k=40)
    lib, test = first_library_and_test(hits)
    assert lib == 1 and test > 3
    raw = Searcher(store, model, ranking=NO_RANKING).search(TESTY, k=40)
    assert first_library_and_test(raw)[1] == 1


def test_include_overrides_the_default_demotion(store: Store, model: OnnxEmbedder) -> None:
    searcher = Searcher(store, model, ranking=Ranking(priors=Priors(aside=0.3)))
    demoted = searcher.search(TESTY, k=10)
    included = searcher.search(TESTY, k=10, where=Filter(tests="include"))
    raw = Searcher(store, model, ranking=Ranking(priors=NO_PRIORS)).search(TESTY, k=10)
    assert names(included) == names(raw)
    assert names(demoted) != names(included)


@pytest.mark.parametrize("mode", ["hybrid", "dense", "bm25"])
def test_exclude_keeps_test_code_out(store: Store, model: OnnxEmbedder, mode: str) -> None:
    searcher = Searcher(store, model)
    hits = searcher.search(TESTY, k=40, mode=mode, where=Filter(tests="exclude"))  # type: ignore[arg-type]
    assert hits, "library code still answers"
    assert not [h.path for h in hits if is_aside(h.path, h.name)]
    everything = searcher.search(TESTY, k=40, mode=mode, where=Filter(tests="include"))  # type: ignore[arg-type]
    assert any(h.path.startswith("test/") for h in everything)


def test_ask_passes_the_policy_to_retrieval(store: Store, model: OnnxEmbedder) -> None:
    oracle = Oracle(Searcher(store, model), None)
    excluded = oracle.retrieve(TESTY, AskOptions(dry_run=True, tests="exclude"), Notes())
    included = oracle.retrieve(TESTY, AskOptions(dry_run=True, tests="include"), Notes())
    assert not [h for h in excluded if h.path.startswith("test/")]
    assert [h for h in included if h.path.startswith("test/")]


def test_shipped_ranker_file_loads() -> None:
    ranker = load_ranker()
    data = json.loads(DEFAULT_RANKER_PATH.read_text())
    assert ranker.weights.shape == (len(data["features"]),)
    assert set(data["features"]) <= set(FEATURES)
    assert set(data["trained_on"]).isdisjoint(
        {"lpil__sqlight", "gleam-lang__time", "hayleigh-dot-dev__modem"}
    ), "trained on the held-out half"


def one_hot_ranker(tmp_path: Path, feature: str, weight: float) -> LinearRanker:
    weights = [weight if f == feature else 0.0 for f in FEATURES]
    path = tmp_path / f"{feature}.json"
    n = len(FEATURES)
    path.write_text(json.dumps(LinearRanker(np.array(weights), np.zeros(n), np.ones(n)).as_json()))
    return load_ranker(path)


def test_a_ranker_file_changes_the_order_deterministically(
    store: Store, model: OnnxEmbedder, tmp_path: Path
) -> None:
    """A ranker that only likes private definitions lifts them above public ones."""
    query = "check digit of an isbn"
    plain = Searcher(store, model, ranking=Ranking(priors=NO_PRIORS)).search(query, k=10)
    likes_private = one_hot_ranker(tmp_path, "private", 1.0)
    ranking = Ranking(priors=NO_PRIORS, ranker=likes_private)
    first = Searcher(store, model, ranking=ranking).search(query, k=10)
    again = Searcher(store, model, ranking=ranking).search(query, k=10)
    assert names(first) == names(again)
    assert names(first) != names(plain)
    rows = store.con.execute("SELECT path, name, visibility FROM chunks").fetchall()
    private = {(p, n) for p, n, v in rows if v == "private"}
    flags = [(h.path, h.name) in private for h in first]
    assert flags == sorted(flags, reverse=True), "every private hit comes before every public one"
    assert [h.rank for h in first] == list(range(1, len(first) + 1))


def test_a_ranker_file_from_other_features_is_refused(tmp_path: Path) -> None:
    data = LinearRanker(np.zeros(26), np.zeros(26), np.ones(26)).as_json()
    bad = tmp_path / "old.json"
    bad.write_text(json.dumps({**data, "features": ["dense", "bm25"]}))
    with pytest.raises(ConfigError, match="other features"):
        load_ranker(bad)
    garbled = tmp_path / "garbled.json"
    garbled.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read the ranker file"):
        load_ranker(garbled)


def test_priors_never_add_or_drop_hits(store: Store, model: OnnxEmbedder) -> None:
    raw = Searcher(store, model, ranking=NO_RANKING).search("isbn", k=200)
    ranked = Searcher(store, model, ranking=replace(Ranking.default(), pool=30)).search(
        "isbn", k=200
    )
    assert sorted(names(raw)) == sorted(names(ranked))


def test_the_learned_ranker_is_switched_by_gbr_ranker(tmp_path: Path) -> None:
    assert Ranking.default(env={}).ranker is None
    assert Ranking.default(env={"GBR_RANKER": "off"}).ranker is None
    shipped = Ranking.default(env={"GBR_RANKER": "on"}).ranker
    assert shipped is not None and shipped.weights.tolist() == load_ranker().weights.tolist()
    mine = one_hot_ranker(tmp_path, "dense", 1.0)
    chosen = Ranking.default(env={"GBR_RANKER": str(tmp_path / "dense.json")}).ranker
    assert chosen is not None and chosen.weights.tolist() == mine.weights.tolist()
    with pytest.raises(ConfigError, match="cannot read the ranker file"):
        Ranking.default(env={"GBR_RANKER": str(tmp_path / "missing.json")})


@pytest.mark.parametrize(
    ("message", "holder"),
    [
        ("check digit should be", "describe_error"),
        ("membership has expired", "describe_block"),
        ('"not an email address"', "parse_email"),
    ],
)
def test_a_message_the_user_saw_finds_the_code_that_prints_it(
    store: Store, model: OnnxEmbedder, message: str, holder: str
) -> None:
    """Words pasted from an error message: without the literal prior, functions whose names
    share the words win; with it, the definition holding the message verbatim comes first."""
    shipped = Ranking.default()
    without = replace(shipped, priors=replace(shipped.priors, literal=1.0))
    before = Searcher(store, model, ranking=without).search(message, k=5)
    after = Searcher(store, model, ranking=shipped).search(message, k=5)
    assert before[0].name != holder
    assert after[0].name == holder
    assert message.strip('"') in " ".join(after[0].text.split())
