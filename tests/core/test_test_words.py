"""Words lent by tests (GBR_TEST_WORDS): a test's name reaches the BM25 text of what it calls.

Real grammar, real pipeline, real DuckDB FTS: a small package with a library module and a
test module is indexed with the words on, then edited and indexed again; the patched
full-text index must equal a rebuild of the same chunks.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from gbr.access.config import package_config
from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core import telemetry
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.errors import ConfigError
from gbr.core.rank.search import Searcher
from gbr.core.store import test_words
from gbr.core.store.facade import Store
from gbr.core.store.test_words import SEPARATOR, TestWords
from tests.conftest import write_tree
from tests.core.test_store_fulltext import events, fts_state

LIBRARY = """pub fn remove(jar: List(String), name: String) -> List(String) {
  jar
}

pub fn alpha() -> Int { 1 }
pub fn beta() -> Int { 2 }
pub fn gamma() -> Int { 3 }
pub fn delta() -> Int { 4 }
"""

TESTS = """import cookie

pub fn expired_cookie_is_removed_test() {
  cookie.remove([], "session")
}

pub fn whole_ledger_integration_test() {
  cookie.alpha()
  cookie.beta()
  cookie.gamma()
  cookie.delta()
}
"""

Package = Callable[[dict[str, str | bytes]], Path]


def write_package(root: Path) -> Path:
    """The cookie package at `root`, for tests outside this module (the CLI, the daemon)."""
    return write_tree(
        root,
        {
            "gleam.toml": 'name = "pkg"\nversion = "1.0.0"\n',
            "src/cookie.gleam": LIBRARY,
            "test/cookie_test.gleam": TESTS,
        },
    )


@pytest.fixture
def package(make_package: Package) -> Path:
    return make_package({"src/cookie.gleam": LIBRARY, "test/cookie_test.gleam": TESTS})


def index(
    root: Path,
    db: Path,
    model: OnnxEmbedder,
    lend: TestWords | None,
    only: frozenset[str] | None = None,
) -> None:
    """A run over the whole tree, or over the changed paths `only`, as the daemon's watch
    runs one after a save."""
    run_index(IndexOptions(root=root, db=db, test_words=lend, only=only), model)


def texts(db: Path) -> dict[str, str]:
    """Each function's search text, by name."""
    with Store.open(db, read_only=True) as store:
        rows = store.con.execute("SELECT name, search_text FROM chunks").fetchall()
    return {str(name): str(text) for name, text in rows}


def bm25_names(db: Path, query: str) -> list[str]:
    with Store.open(db, read_only=True) as store:
        ids = [i for i, _ in store.bm25(query, 10)]
        return [r.name for r in store.chunk_rows(ids).values()]


def lent(text: str) -> str:
    return text.split(SEPARATOR, 1)[1] if SEPARATOR in text else ""


def test_a_tests_name_reaches_what_it_calls_and_search_finds_it(
    package: Path, tmp_path: Path, model: OnnxEmbedder
) -> None:
    off, on = tmp_path / "off.duckdb", tmp_path / "on.duckdb"
    index(package, off, model, None)
    index(package, on, model, TestWords())
    plain, lending = texts(off), texts(on)
    assert lent(lending["remove"]).split() == ["expired", "cookie", "is", "removed"]
    assert test_words.own_text(lending["remove"]) == plain["remove"]
    # The test chunks themselves are as they were.
    for name in ("expired_cookie_is_removed_test", "whole_ledger_integration_test"):
        assert lending[name] == plain[name]
    assert "remove" not in bm25_names(off, "expired")
    assert set(bm25_names(on, "expired")) == {"expired_cookie_is_removed_test", "remove"}
    with Store.open(on, read_only=True) as store:
        found = Searcher(store, model).search("expired cookies get removed", k=5, mode="bm25")
    assert "remove" in [hit.name for hit in found]


def test_a_test_calling_many_functions_lends_them_nothing(
    package: Path, tmp_path: Path, model: OnnxEmbedder
) -> None:
    db = tmp_path / "on.duckdb"
    index(package, db, model, TestWords(max_targets=3))
    lending = texts(db)
    for name in ("alpha", "beta", "gamma", "delta"):
        assert SEPARATOR not in lending[name]
    assert bm25_names(db, "ledger integration") == ["whole_ledger_integration_test"]
    # A looser cap lets the same test lend its words to all four.
    index(package, db, model, TestWords(max_targets=4))
    assert lent(texts(db)["alpha"]).split() == ["whole", "ledger", "integration"]


def test_a_function_takes_at_most_max_words(
    make_package: Package, tmp_path: Path, model: OnnxEmbedder
) -> None:
    many = TESTS + (
        '\npub fn stale_session_cookie_dropped_after_logout_test() {\n  cookie.remove([], "x")\n}\n'
    )
    root = make_package({"src/cookie.gleam": LIBRARY, "test/cookie_test.gleam": many})
    db = tmp_path / "index.duckdb"
    index(root, db, model, TestWords(max_words=3))
    # `cookie`, said by both tests, comes first; then the first test's words, in order.
    assert lent(texts(db)["remove"]).split() == ["cookie", "expired", "is"]
    # A weight writes each word that many times.
    index(root, db, model, TestWords(max_words=2, weight=2))
    assert lent(texts(db)["remove"]).split() == ["cookie", "cookie", "expired", "expired"]


def test_a_saved_test_file_updates_its_targets_words_incrementally(
    make_package: Package, tmp_path: Path, model: OnnxEmbedder
) -> None:
    # Enough other code that a test file's edit is patched into the index, not rebuilt.
    filler = "".join(f"pub fn filler_{n}() -> Int {{ {n} }}\n" for n in range(80))
    package = make_package(
        {
            "src/cookie.gleam": LIBRARY,
            "src/filler.gleam": filler,
            "test/cookie_test.gleam": TESTS,
        }
    )
    log = tmp_path / "events.jsonl"
    telemetry.configure(log)
    db = tmp_path / "index.duckdb"
    index(package, db, model, TestWords())
    test_file = package / "test/cookie_test.gleam"
    test_file.write_text(TESTS.replace("expired_cookie_is_removed_test", "stale_token_purged_test"))
    saved = frozenset({"test/cookie_test.gleam"})
    index(package, db, model, TestWords(), only=saved)
    assert [e["how"] for e in events(log, "fulltext_updated")] == ["rebuilt", "patched"]
    assert lent(texts(db)["remove"]).split() == ["stale", "token", "purged"]
    assert "remove" not in bm25_names(db, "expired")
    assert "remove" in bm25_names(db, "stale token purged")
    rebuilt = tmp_path / "rebuilt.duckdb"
    shutil.copy(db, rebuilt)
    with Store.open(rebuilt) as store:
        store.refresh_fulltext(lend=TestWords())
        expected = fts_state(store)
    with Store.open(db, read_only=True) as patched:
        assert fts_state(patched) == expected
    # The test file gone: its words go with it.
    test_file.unlink()
    index(package, db, model, TestWords(), only=saved)
    assert [e["how"] for e in events(log, "fulltext_updated")][-1] == "patched"
    assert SEPARATOR not in texts(db)["remove"]
    assert bm25_names(db, "stale token purged") == []


def test_turning_it_off_takes_the_words_back_with_no_file_changed(
    package: Path, tmp_path: Path, model: OnnxEmbedder
) -> None:
    db = tmp_path / "index.duckdb"
    index(package, db, model, TestWords())
    assert SEPARATOR in texts(db)["remove"]
    index(package, db, model, None)
    assert SEPARATOR not in texts(db)["remove"]
    assert "remove" not in bm25_names(db, "expired")
    with Store.open(db, read_only=True) as store:
        assert not store.fulltext_outdated(lend=None)
        assert store.fulltext_outdated(lend=TestWords())


def test_the_setting_reads_on_off_and_two_counts_and_refuses_the_rest(tmp_path: Path) -> None:
    assert test_words.parse("") is None
    assert test_words.parse("OFF") is None and test_words.parse("no") is None
    assert test_words.parse("on") == TestWords()
    assert test_words.parse(" 2,8 ") == TestWords(max_targets=2, max_words=8)
    assert test_words.parse("2,8,3") == TestWords(max_targets=2, max_words=8, weight=3)
    for bad in ("maybe", "2", "0,4", "a,b", "1,2,3,4", "6,16,0"):
        with pytest.raises(ValueError, match="GBR_TEST_WORDS"):
            test_words.parse(bad)
    root = tmp_path / "pkg"
    root.mkdir()
    with pytest.raises(ConfigError, match="GBR_TEST_WORDS='lots'"):
        package_config(root, root / ".gbr/index.duckdb", {"GBR_TEST_WORDS": "lots"})
    config = package_config(root, root / ".gbr/index.duckdb", {"GBR_TEST_WORDS": "on"})
    assert config.test_words == TestWords()
