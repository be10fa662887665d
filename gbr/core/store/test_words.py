"""Words lent by tests: a test's name, added to the BM25 text of the definitions it calls.

A test's name often says in plain words what the code under test does
(`expired_cookie_is_removed_test` calls `cookie.remove`), in words the code itself never
uses. Through the code graph's resolved call edges, each test function lends its name's
words to the few library definitions it calls directly; the test's own chunk is left as
it is. A test that calls many library definitions (an integration test) lends nothing, so
that its words do not smear over everything it touches, and a definition takes at most a
few words, those most of its tests agree on.

The words sit at the end of `chunks.search_text`, after a separator the tokenizer drops,
and the words each chunk holds are recorded in a table of their own, so the next update
finds exactly the chunks whose words changed (a test file saved, a test deleted, a target
renamed) and the full-text index re-reads only those (gbr.core.store.fulltext.update).
Everything is worked out again from the graph tables at each update: it reads only test
references, a few ms at the package sizes gbr serves.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gbr.core.environ import TEST_WORDS, is_off
from gbr.core.parse.chunk_text import split_identifier

if TYPE_CHECKING:  # the front doors read GBR_TEST_WORDS here without loading DuckDB
    import duckdb

TABLE = "test_words"
# Between a chunk's own search text and the words lent to it: the full-text tokenizer
# splits on it (it is no word character) and SQL's split_part finds it.
SEPARATOR = "\x1e"
# Words that name the test, not what it tests. English stop words go anyway in the index.
_NOISE = frozenset({"test", "tests", "should", "it", "spec", "case", "check", "works", "ok"})
# Reference kinds that mean the test runs the target (gbr.core.graph.store.CALL_KINDS).
_CALLS = ("call", "pipe", "capture", "value", "use")
# Test code as gbr.core.rank.priors.is_test says it (store_queries.ASIDE_SQL's test half).
TEST_PATH_SQL = (
    "(regexp_matches({p}, '(^|/)(test|tests|integration_tests?)/')"
    " OR regexp_matches({p}, '_test\\.gleam$'))"
)
_ASIDE_PATH_SQL = "regexp_matches({p}, '(^|/)(test|tests|integration_tests?|examples?|demos?)/')"
_WORD = re.compile(r"[a-z][a-z0-9]*")


@dataclass(frozen=True, slots=True)
class TestWords:
    """How tests lend words (chosen on the silver dev split and the devcorpus dev half)."""

    __test__ = False  # not a pytest class, despite its name

    # A test calling more library definitions than this lends them nothing.
    max_targets: int = 6
    # The most words one definition takes from all its tests.
    max_words: int = 16
    # How many times each lent word is written: its weight against the chunk's own text.
    weight: int = 1

    def signature(self) -> str:
        """What the index records, so that another setting re-reads the lent words."""
        return f"targets={self.max_targets},words={self.max_words},weight={self.weight}"


def from_env(env: Mapping[str, str]) -> TestWords | None:
    """What GBR_TEST_WORDS in `env` asks for (see `parse`)."""
    return parse(TEST_WORDS.text(env))


def parse(text: str) -> TestWords | None:
    """GBR_TEST_WORDS's value: off or unset (None), on (the defaults), or
    `TARGETS,WORDS[,WEIGHT]`; a ValueError saying what to write otherwise."""
    value = text.strip().lower()
    if not value or is_off(value):
        return None
    if value in ("on", "1", "true", "yes"):
        return TestWords()
    try:
        counts = [int(part) for part in value.split(",")]
    except ValueError:
        counts = []
    if len(counts) not in (2, 3):
        raise ValueError(
            f"GBR_TEST_WORDS={text!r}: use on, off, or counts like 6,16 (targets, words) "
            "or 6,16,2 (and each word's weight)"
        )
    if min(counts) < 1:
        raise ValueError(f"GBR_TEST_WORDS={text!r}: every count must be at least 1")
    return TestWords(*counts)


def name_words(name: str) -> list[str]:
    """`expired_cookie_is_removed_test` -> [expired, cookie, is, removed]."""
    return [w for w in split_identifier(name) if w not in _NOISE and _WORD.fullmatch(w)]


def ensure_table(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(f"CREATE TABLE IF NOT EXISTS {TABLE}(id BIGINT, words VARCHAR)")


def wanted(con: duckdb.DuckDBPyConnection, config: TestWords) -> dict[int, str]:
    """Chunk id -> the words its tests lend it now, from the graph tables."""
    test_path = TEST_PATH_SQL.format(p="r.path")
    edges = con.execute(
        f"""SELECT DISTINCT r.path, r.source_name, c.id
        FROM graph_refs AS r
        JOIN chunks AS c ON c.module = r.target_module AND c.name = r.target_name
        WHERE r.kind IN ({", ".join("?" for _ in _CALLS)}) AND r.source_name <> ''
          AND ({test_path} OR ends_with(r.source_name, '_test'))
          AND NOT {TEST_PATH_SQL.format(p="c.path")}
          AND NOT {_ASIDE_PATH_SQL.format(p="c.path")}
          AND NOT ends_with(c.name, '_test')
          AND c.kind = 'function'""",
        list(_CALLS),
    ).fetchall()
    calls: dict[tuple[str, str], set[int]] = defaultdict(set)
    for path, source, chunk in edges:
        calls[(str(path), str(source))].add(int(chunk))
    lent: dict[int, Counter[str]] = defaultdict(Counter)
    for (_, source), chunks in sorted(calls.items()):
        if len(chunks) > config.max_targets:
            continue
        words = list(dict.fromkeys(name_words(source)))  # once per test, in order
        for chunk in chunks:
            lent[chunk].update(words)
    return {
        chunk: " ".join(
            w for w, _ in counts.most_common(config.max_words) for _ in range(config.weight)
        )
        for chunk, counts in lent.items()
    }


def apply(con: duckdb.DuckDBPyConnection, config: TestWords | None) -> list[int]:
    """Bring every chunk's lent words to what its tests say now (none when `config` is
    None), in the caller's transaction; returns the ids of the chunks whose search text
    changed and were already there (new chunks are new to the full-text index anyway)."""
    if config is None and not _has_table(con, TABLE):
        return []  # never lent any: an index built with it off stays exactly as it was
    ensure_table(con)
    con.execute(f"DELETE FROM {TABLE} WHERE id NOT IN (SELECT id FROM chunks)")
    now = {int(i): str(w) for i, w in con.execute(f"SELECT id, words FROM {TABLE}").fetchall()}
    want = wanted(con, config) if config is not None and _has_graph(con) else {}
    changed = sorted(
        chunk for chunk in set(now) | set(want) if now.get(chunk, "") != want.get(chunk, "")
    )
    if not changed:
        return []
    rows = [(chunk, want.get(chunk, "")) for chunk in changed]
    con.execute("CREATE OR REPLACE TEMP TABLE lent_now(id BIGINT, words VARCHAR)")
    con.executemany("INSERT INTO lent_now VALUES (?, ?)", rows)
    con.execute(
        f"""UPDATE chunks SET search_text = split_part(chunks.search_text, '{SEPARATOR}', 1)
            || CASE WHEN l.words = '' THEN '' ELSE '{SEPARATOR}' || l.words END
        FROM lent_now AS l WHERE chunks.id = l.id"""
    )
    con.execute(f"DELETE FROM {TABLE} WHERE id IN (SELECT id FROM lent_now)")
    con.execute(f"INSERT INTO {TABLE} SELECT id, words FROM lent_now WHERE words <> ''")
    con.execute("DROP TABLE lent_now")
    return changed


def own_text(search_text: str) -> str:
    """A chunk's search text without the words lent to it."""
    return search_text.split(SEPARATOR, 1)[0]


def lent_to(con: duckdb.DuckDBPyConnection, ids: Sequence[int]) -> dict[int, str]:
    """The words lent to each of `ids` that has any."""
    if not ids or not _has_table(con, TABLE):
        return {}
    listed = ", ".join(str(int(i)) for i in ids)
    rows = con.execute(f"SELECT id, words FROM {TABLE} WHERE id IN ({listed})").fetchall()
    return {int(i): str(w) for i, w in rows}


def _has_graph(con: duckdb.DuckDBPyConnection) -> bool:
    return _has_table(con, "graph_refs")


def _has_table(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    row = con.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_name = ?", [name]
    ).fetchone()
    return bool(row and row[0])
