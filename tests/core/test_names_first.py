"""A query that is a definition's name finds that definition first (issue 30, item 2).

The package below is shaped like gleam_time's duration module, where `search Duration`
put the type at #20: a small record type that a dozen documented functions take and
return, so BM25 finds the word everywhere and the dense model reads it as an idea."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.rank.priors import NamedQuery, named_in
from gbr.core.rank.search import Filter, Ranking, Searcher
from gbr.core.store.facade import Store
from tests.conftest import write_tree

SPAN = """import gleam/int

/// A stretch of time, kept as whole seconds and the nanoseconds past them.
///
/// Calendar periods such as "one month" are not spans: their length depends
/// on which month they start in.
pub opaque type Span {
  Span(seconds: Int, nanoseconds: Int)
}

/// What a span is measured in, when it is shown to a person.
pub type Unit {
  Nanosecond
  Second
  Minute
  Hour
}

/// The span of no time at all.
pub const zero = Span(0, 0)

/// Add two spans together.
pub fn add(left: Span, right: Span) -> Span {
  Span(left.seconds + right.seconds, left.nanoseconds + right.nanoseconds)
  |> normalise
}

/// The span from the first to the second.
pub fn difference(left: Span, right: Span) -> Span {
  Span(right.seconds - left.seconds, right.nanoseconds - left.nanoseconds)
  |> normalise
}

/// Create a span of a number of seconds.
pub fn seconds(amount: Int) -> Span {
  Span(amount, 0)
}

/// Create a span of a number of minutes.
pub fn minutes(amount: Int) -> Span {
  seconds(amount * 60)
}

/// Create a span of a number of hours.
pub fn hours(amount: Int) -> Span {
  seconds(amount * 60 * 60)
}

/// Create a span of a number of milliseconds.
pub fn milliseconds(amount: Int) -> Span {
  let rest = amount % 1000
  Span(amount / 1000, rest * 1_000_000)
}

/// Keep the nanoseconds of a span positive and below one second.
fn normalise(span: Span) -> Span {
  let extra = span.nanoseconds / 1_000_000_000
  Span(span.seconds + extra, span.nanoseconds - extra * 1_000_000_000)
}

/// A span as a number of seconds, with its fraction.
pub fn to_seconds(span: Span) -> Float {
  int.to_float(span.seconds) +. int.to_float(span.nanoseconds) /. 1_000_000_000.0
}

/// A rough reading of a span in the largest unit it fills.
pub fn approximate(span: Span) -> #(Int, Unit) {
  case span.seconds {
    s if s >= 3600 -> #(s / 3600, Hour)
    s if s >= 60 -> #(s / 60, Minute)
    s if s > 0 -> #(s, Second)
    _ -> #(span.nanoseconds, Nanosecond)
  }
}
"""

STAMP = """import clock/span.{type Span}

/// A moment in time, as seconds and nanoseconds since 00:00:00 UTC on 1 January 1970.
pub opaque type Stamp {
  Stamp(seconds: Int, nanoseconds: Int)
}

/// Move a stamp forward by a span of time.
pub fn add(stamp: Stamp, span: Span) -> Stamp {
  let seconds = span.to_seconds(span)
  Stamp(stamp.seconds + float_seconds(seconds), stamp.nanoseconds)
}

/// The span between two stamps.
pub fn difference(left: Stamp, right: Stamp) -> Span {
  span.seconds(right.seconds - left.seconds)
}

fn float_seconds(value: Float) -> Int {
  value |> truncate
}

@external(erlang, "erlang", "trunc")
fn truncate(value: Float) -> Int
"""


@pytest.fixture(scope="module")
def clock_db(tmp_path_factory: pytest.TempPathFactory, model: OnnxEmbedder) -> Path:
    files = {"gleam.toml": 'name = "clock"\n', "src/clock/span.gleam": SPAN}
    root = write_tree(tmp_path_factory.mktemp("names"), {**files, "src/clock/stamp.gleam": STAMP})
    db = root / ".gbr" / "index.duckdb"
    run_index(IndexOptions(root=root, db=db), model)
    return db


@pytest.fixture
def store(clock_db: Path) -> Iterator[Store]:
    with Store.open(clock_db, read_only=True) as opened:
        yield opened


def shipped_without_names() -> Ranking:
    shipped = Ranking.default()
    return replace(shipped, priors=replace(shipped.priors, names_first=False))


def top(searcher: Searcher, query: str, k: int = 5, **kw: object) -> list[tuple[str, str]]:
    return [(h.module, h.name) for h in searcher.search(query, k=k, **kw)]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("Span", NamedQuery("Span")),
        ("span", NamedQuery("span")),
        ("`Span`", NamedQuery("Span")),
        ("span.Span", NamedQuery("Span", "span")),
        ("clock/span.Span", NamedQuery("Span", "clock/span")),
        ("what is a Span?", NamedQuery("Span")),
        ("What is the  Span type", NamedQuery("Span")),
        ("where is normalise defined", NamedQuery("normalise")),
        ("what does stamp.add do?", NamedQuery("add", "stamp")),
        ("add two spans", None),
        ("what is the function type of a flag validator", None),
        ("Span or Stamp", None),
        ("list.map(xs, f)", None),
    ],
)
def test_named_in_reads_a_name_bare_qualified_or_asked_about(
    query: str, named: NamedQuery | None
) -> None:
    assert named_in(query) == named


def test_a_named_query_matches_any_case_and_a_trailing_module_path() -> None:
    named = NamedQuery("Span", "span")
    assert named.matches("clock/span", "Span")
    assert named.matches("clock/span", "span")
    assert not named.matches("clock/timespan", "Span")
    assert not named.matches("clock/span", "Spans")
    assert NamedQuery("span").matches("anything/at/all", "SPAN")


# Without the stage, other definitions outrank the one named for these: the module chunk or
# the functions that take the type, and for a constructor the functions named like it. (The
# default model since decision 0013 puts `Span` first on its own; these it does not.)
LOST = [
    ("stamp.Stamp", ("clock/stamp", "Stamp")),
    ("clock/stamp.Stamp", ("clock/stamp", "Stamp")),
    ("Nanosecond", ("clock/span", "Unit")),
    ("Hour", ("clock/span", "Unit")),
]


@pytest.mark.parametrize(("query", "named"), LOST)
def test_the_stage_puts_first_what_the_ranking_alone_does_not(
    store: Store, model: OnnxEmbedder, query: str, named: tuple[str, str]
) -> None:
    before = top(Searcher(store, model, ranking=shipped_without_names()), query)
    assert before[0] != named
    assert top(Searcher(store, model), query)[0] == named


@pytest.mark.parametrize(
    "query", ["Span", "span", "clock/span.Span", "span.Span", "what is a Span?", "What's a span"]
)
def test_a_types_own_name_finds_the_type_first(
    store: Store, model: OnnxEmbedder, query: str
) -> None:
    after = Searcher(store, model).search(query, k=5)
    assert (after[0].module, after[0].name, after[0].kind) == ("clock/span", "Span", "type")
    # Its constructor and doc come with it: the type's chunk holds both.
    assert "Span(seconds: Int, nanoseconds: Int)" in after[0].text
    assert after[0].doc.startswith("A stretch of time")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("stamp.add", [("clock/stamp", "add")]),
        ("span.add", [("clock/span", "add")]),
        ("add", [("clock/span", "add"), ("clock/stamp", "add")]),
        ("zero", [("clock/span", "zero")]),  # a constant
        ("Stamp", [("clock/stamp", "Stamp")]),
        ("Nanosecond", [("clock/span", "Unit")]),  # a constructor: its type
    ],
)
def test_functions_constants_and_constructors_by_name(
    store: Store, model: OnnxEmbedder, query: str, expected: list[tuple[str, str]]
) -> None:
    found = top(Searcher(store, model), query, k=len(expected) + 2)
    assert sorted(found[: len(expected)]) == sorted(expected)


def test_the_name_as_spelled_wins_over_other_cases(store: Store, model: OnnxEmbedder) -> None:
    """`seconds` is a function, and `Second` a constructor; `Seconds` exists in no case
    but as the function."""
    assert top(Searcher(store, model), "seconds", k=1) == [("clock/span", "seconds")]
    assert top(Searcher(store, model), "Seconds", k=1) == [("clock/span", "seconds")]


def test_the_filter_still_holds_for_a_named_query(store: Store, model: OnnxEmbedder) -> None:
    found = top(Searcher(store, model), "add", k=5, where=Filter(module="clock/stamp"))
    assert found[0] == ("clock/stamp", "add")
    assert all(module == "clock/stamp" for module, _ in found)


def test_prose_and_unknown_names_are_left_to_the_ranking(store: Store, model: OnnxEmbedder) -> None:
    """No definition is pinned when the query names none: the order is the plain one."""
    plain = Searcher(store, model, ranking=shipped_without_names())
    for query in ("add two spans together", "Fortnight", "what is a fortnight?"):
        assert top(Searcher(store, model), query) == top(plain, query)


def test_the_stage_is_a_switch_off_by_default_on_when_shipped() -> None:
    from gbr.core.rank.priors import Priors

    assert Priors().named("Span") is None
    assert Ranking.default().priors.named("Span") == NamedQuery("Span")
