"""`ask` context from the code graph, and the graph's centrality prior for search: a real
package indexed with the real grammar, model and DuckDB file."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.answer.context import (
    Outline,
    context_tokens,
    render_with_outlines,
    used_outlines,
)
from gbr.core.answer.oracle import AskOptions, Oracle
from gbr.core.answer.prompt import ContextChunk
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.graph.store import GraphReader
from gbr.core.llm.base import ProviderSettings
from gbr.core.llm.openai_compat import OpenAICompatProvider
from gbr.core.rank.priors import Priors, centrality, graph_centrality, pagerank
from gbr.core.rank.search import Ranking, Searcher
from gbr.core.records import Hit
from gbr.core.store.facade import Store
from tests.conftest import write_tree
from tests.fake_llm import Reply

PRICE = """/// Doubles the amount.
/// Used everywhere prices are shown.
pub fn double(x: Int) -> Int {
  x * 2
}

/// A shape to price.
pub type Shape {
  Circle(r: Int)
  Square(side: Int)
}

/// The flat tax on every cart.
pub const tax = 3
"""

CART = """import gleam/list
import shop/price.{type Shape, Circle}

pub fn total(items: List(Int)) -> Int {
  let doubled = list.map(items, price.double)
  let s: Shape = Circle(1)
  list.fold(doubled, price.tax, fn(a, b) { a + b })
}

pub fn total_twice(items: List(Int)) -> Int {
  total(items) + total(items)
}
"""


@pytest.fixture(scope="module")
def shop_db(tmp_path_factory: pytest.TempPathFactory, model: OnnxEmbedder) -> Path:
    files = {"gleam.toml": 'name = "shop"\n', "src/shop/price.gleam": PRICE}
    root = write_tree(
        tmp_path_factory.mktemp("graph-context"), {**files, "src/shop/cart.gleam": CART}
    )
    db = root / ".gbr" / "index.duckdb"
    run_index(IndexOptions(root=root, db=db), model)
    return db


@pytest.fixture
def store(shop_db: Path) -> Iterator[Store]:
    with Store.open(shop_db, read_only=True) as s:
        yield s


def chunk_of(store: Store, name: str, rank: int = 1) -> ContextChunk:
    """The stored definition `name` as the prompt would carry it."""
    row = store.con.execute(
        "SELECT path, module, name, kind, start_line, end_line, text FROM chunks "
        "WHERE name = ? AND part = 0",
        [name],
    ).fetchone()
    assert row is not None, name
    path, module, name, kind, start, end, text = row
    return ContextChunk(Hit(rank, path, module, name, kind, start, end, 1.0, text), text)


def test_a_chunk_brings_the_outlines_of_what_it_uses_in_order_once_each(store):
    outlines = used_outlines([chunk_of(store, "total")], GraphReader(store).used_by, 1000)
    # gleam/list.map and fold lie outside the index; Circle stands for Shape, which the
    # annotation already named, so it is there once.
    assert [o.name for o in outlines] == ["double", "Shape", "tax"]
    double = outlines[0]
    assert double.render() == (
        "### [+] double (function) · src/shop/price.gleam:1-5 · module shop/price\n"
        "```gleam\n/// Doubles the amount.\npub fn double(x: Int) -> Int\n```\n"
    )
    assert "Used everywhere" not in double.render()  # the first doc line only


def test_what_the_prompt_already_holds_is_not_outlined_again(store):
    reader = GraphReader(store)
    chunks = [chunk_of(store, "total_twice", 1), chunk_of(store, "total", 2)]
    names = [o.name for o in used_outlines(chunks, reader.used_by, 1000)]
    assert names == ["double", "Shape", "tax"]  # `total` is a chunk already
    chunks.append(chunk_of(store, "double", 3))
    assert [o.name for o in used_outlines(chunks, reader.used_by, 1000)] == ["Shape", "tax"]


def test_outlines_take_only_the_budget_left_skipping_what_does_not_fit(store):
    reader = GraphReader(store)
    chunks = [chunk_of(store, "total")]
    every = used_outlines(chunks, reader.used_by, 1000)
    smallest = min(o.tokens for o in every)
    assert used_outlines(chunks, reader.used_by, smallest - 1) == []
    assert used_outlines(chunks, reader.used_by, 0) == []
    fitted = used_outlines(chunks, reader.used_by, every[0].tokens + smallest)
    assert sum(o.tokens for o in fitted) <= every[0].tokens + smallest
    assert fitted[0] == every[0] and len(fitted) == 2  # a smaller later one still fits


def test_ask_adds_outlines_within_the_budget_and_never_displaces_a_chunk(store, model):
    """Each budget is checked for what went in and for what was left out: a left-out
    outline is one that would not have fitted. The budgets cover a roomy prompt (every
    outline goes in) and a tight one (the chunks leave room for none)."""
    oracle = Oracle(Searcher(store, model), None)
    reader = GraphReader(store)
    question = "how is the cart total added up"
    seen = []
    for budget, k in ((3000, 1), (3000, 2), (260, 8), (120, 1)):
        plain = AskOptions(max_chunks=k, budget=budget, dry_run=True, graph_context=False)
        without = oracle.answer(question, plain)
        with_graph = oracle.answer(question, replace(plain, graph_context=True))
        assert with_graph.chunks == without.chunks and with_graph.chunks
        assert without.outlines == []
        prompt = with_graph.messages[-1].content
        for outline in with_graph.outlines:
            assert outline.render() in prompt
        spent = context_tokens(with_graph.chunks) + sum(o.tokens for o in with_graph.outlines)
        assert spent <= budget
        # What the chunks use, outlined, whatever the budget: none left out had room.
        wanted = used_outlines(with_graph.chunks, reader.used_by, 10**9)
        assert [o for o in wanted if o in with_graph.outlines] == with_graph.outlines
        left_out = [o for o in wanted if o not in with_graph.outlines]
        assert all(spent + o.tokens > budget for o in left_out), (budget, k)
        seen.append((len(with_graph.outlines), len(left_out)))
    assert any(put and not left for put, left in seen), seen  # roomy: every outline went in
    assert any(left and not put for put, left in seen), seen  # tight: wanted, none fitted
    roomy = oracle.answer(question, AskOptions(max_chunks=1, dry_run=True))
    assert roomy.outlines, "the default turns the graph context on"
    assert roomy.as_dict()["graph_context"] == [o.as_dict() for o in roomy.outlines]


def test_outlines_sit_between_the_best_chunks_at_both_ends(store):
    chunks = [chunk_of(store, "total", 1), chunk_of(store, "total_twice", 2)]
    outline = Outline("shop/price", "tax", "constant", "src/shop/price.gleam", 13, 14, "x")
    text = render_with_outlines(chunks, [outline])
    assert text.index("[1] total") < text.index("[+] tax") < text.index("[2] total_twice")
    assert render_with_outlines(chunks, []) == render_with_outlines(chunks, ())


def test_an_index_without_graph_tables_gives_no_outlines_and_no_error(
    shop_db: Path, tmp_path: Path, model: OnnxEmbedder
):
    old = tmp_path / "old.duckdb"
    shutil.copy(shop_db, old)
    with Store.open(old) as s:
        for table in ("graph_symbols", "graph_imports", "graph_refs"):
            s.con.execute(f"DROP TABLE {table}")
        s.con.execute("DELETE FROM meta WHERE key = 'graph_version'")
    with Store.open(old, read_only=True) as s:
        reader = GraphReader(s)
        assert reader.used_by([("src/shop/cart.gleam", 1, 20)]) == []
        assert reader.in_degrees() == {}
        answer = Oracle(Searcher(s, model), None).answer(
            "cart total", AskOptions(max_chunks=1, dry_run=True)
        )
        assert answer.chunks and answer.outlines == []
        central = Ranking(priors=Priors(central=1.5))
        assert Searcher(s, model, ranking=central).search("cart total", k=2)


def test_centrality_is_log_scaled_references_from_other_definitions(store):
    degrees = GraphReader(store).in_degrees()
    # double: by total (as a value); Shape: by total (annotation and constructor: once);
    # total: by total_twice (twice: once); nothing references total_twice.
    assert degrees == {
        ("shop/price", "double"): 1,
        ("shop/price", "Shape"): 1,
        ("shop/price", "tax"): 1,
        ("shop/cart", "total"): 1,
    }
    scores = centrality({("m", "a"): 0, ("m", "b"): 1, ("m", "c"): 3})
    assert scores[("m", "c")] == 1.0 and scores[("m", "b")] == pytest.approx(0.5)
    assert ("m", "a") not in scores and centrality({}) == {}
    prior = Priors(tests="include", aside=1.0, central=1.4)

    def factor(c: float) -> float:
        return prior.factor("nl", "src/a.gleam", "f", "function", "pub", centrality=c)

    assert factor(1.0) == pytest.approx(1.4) and factor(0.5) == pytest.approx(1.2)
    assert factor(0.0) == 1.0


def test_the_centrality_prior_lifts_the_referenced_definition_and_is_read_once(store, model):
    searcher = Searcher(store, model, ranking=Ranking(priors=Priors(central=3.0)))
    assert searcher.centrality()[("shop/cart", "total")] == 1.0
    assert searcher.centrality() is searcher.centrality()  # cached for the snapshot
    first = searcher.centrality()
    searcher.reload()
    assert searcher.centrality() is not first  # a new snapshot reads it again
    plain = Searcher(store, model, ranking=Ranking(priors=Priors()))
    question = "total of the items in the cart"
    ranks = {h.name: h.rank for h in plain.search(question, k=10)}
    lifted = {h.name: h.rank for h in searcher.search(question, k=10)}
    assert lifted["total"] <= ranks["total"] and lifted["total_twice"] >= ranks["total_twice"]


def test_a_citation_of_an_outlined_definition_counts_as_in_the_context(store, model, fake_llm):
    settings = ProviderSettings(name="openai", base_url=fake_llm.openai_base_url, model="m")
    oracle = Oracle(Searcher(store, model), OpenAICompatProvider(settings))
    options = AskOptions(max_chunks=1, hyde=False)
    outlines = oracle.answer("how is the cart total added up", replace(options, dry_run=True))
    cited = outlines.outlines[0]
    reply = Reply(f"It uses {cited.name} ({cited.path}:{cited.start_line}).")
    fake_llm.script(reply, reply)
    answer = oracle.answer("how is the cart total added up", options)
    assert [(c.path, c.line, c.known) for c in answer.citations] == [
        (cited.path, cited.start_line, True)
    ]
    off = oracle.answer("how is the cart total added up", replace(options, graph_context=False))
    assert [(c.line, c.known) for c in off.citations] == [(cited.start_line, False)]


def test_pagerank_ranks_what_central_definitions_reference_above_what_leaves_do():
    # a and b each reference hub; hub references core; leaf is referenced by a alone.
    a, b, hub, core, leaf = (("m", n) for n in ("a", "b", "hub", "core", "leaf"))
    ranks = pagerank([(a, hub), (b, hub), (hub, core), (a, leaf)])
    assert set(ranks) == {hub, core, leaf}  # only what is referenced gets a prior
    assert max(ranks.values()) == 1.0
    assert ranks[core] > ranks[leaf] and ranks[hub] > ranks[leaf]
    assert pagerank([]) == {}
    by_callers = graph_centrality([(a, hub), (b, hub), (hub, core), (a, leaf)], "callers")
    assert by_callers[hub] == 1.0 and by_callers[core] == by_callers[leaf] < 1.0
