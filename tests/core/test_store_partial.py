"""The store's side of partial files: which version of a broken file stays searchable.

A partial file with a good version in the index keeps that whole version (stale) until it
parses again; without one, its intact definitions are stored. Real chunker, model, DuckDB.
"""

from __future__ import annotations

from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.parse.chunker import chunk_file, new_parser
from gbr.core.records import FileProblem, PartialFile, SourceFile
from gbr.core.store.facade import Store, StoredChunk, status_report
from gbr.core.store.indexing import embed_now
from tests.core.test_store import V1, names, source
from tests.core.test_store import store as store  # the fixture, shared

# V1 with a half-typed function between its two good ones.
BROKEN = V1.replace(
    "pub fn decrement", "pub fn half(x: Int) -> Int {\n  [x,, 1]\n}\n\npub fn decrement"
)
FIXED = BROKEN.replace("[x,, 1]", "x")


def parsed(src: SourceFile, model: OnnxEmbedder) -> tuple[list[StoredChunk], FileProblem | None]:
    result = chunk_file(src, new_parser(), model.count_tokens)
    chunks, problem = (
        (list(result.chunks), result.problem) if isinstance(result, PartialFile) else (result, None)
    )
    assert isinstance(chunks, list)
    items = embed_now(chunks, model)
    return items, problem


def put(store: Store, text: str, model: OnnxEmbedder) -> int:
    items, problem = parsed(source(text), model)
    return store.replace_file(source(text), items, problem)


def stale_count(store: Store) -> int:
    return store.con.execute("SELECT count(*) FILTER (stale) FROM chunks").fetchall()[0][0]


def test_a_good_version_stays_whole_while_the_file_is_partial(
    store: Store, model: OnnxEmbedder
) -> None:
    assert put(store, V1, model) == 0
    assert put(store, BROKEN, model) == 2  # increment and decrement, kept as they were
    assert names(store) == ["increment", "decrement"] and stale_count(store) == 2
    report = status_report(store)
    assert report["files_partial"] == 1 and report["files_ok"] == 0
    [item] = report["partial"]
    assert item["error_kind"] == "parse_partial" and item["stale_chunks"] == 2
    # Still broken on the next run: the good version is still the one kept.
    assert put(store, BROKEN, model) == 2
    assert names(store) == ["increment", "decrement"]
    # Fixed: the new version replaces it, fresh.
    assert put(store, FIXED, model) == 0
    assert names(store) == ["increment", "half", "decrement"] and stale_count(store) == 0
    assert status_report(store)["partial"] == []


def test_without_a_good_version_the_intact_definitions_are_stored(
    store: Store, model: OnnxEmbedder
) -> None:
    assert put(store, BROKEN, model) == 0
    assert names(store) == ["increment", "decrement"] and stale_count(store) == 0
    # Partial again, with another edit: the newer intact definitions replace the older.
    assert put(store, BROKEN.replace("decrement", "minus_one"), model) == 0
    assert names(store) == ["increment", "minus_one"]
    [item] = status_report(store)["partial"]
    assert item["chunks"] == 2 and item["stale_chunks"] == 0


def test_a_dropped_file_s_kept_version_is_still_kept_when_it_turns_partial(
    store: Store, model: OnnxEmbedder
) -> None:
    put(store, V1, model)
    failed = chunk_file(source("pub fn oops( {\n"), new_parser(), model.count_tokens)
    assert isinstance(failed, FileProblem)
    assert store.mark_failed(failed, source("pub fn oops( {\n")) == 2
    assert put(store, BROKEN, model) == 2  # the last good version, not the partial one
    assert names(store) == ["increment", "decrement"] and stale_count(store) == 2


def test_the_mcp_and_chat_status_texts_list_partial_files(
    store: Store, model: OnnxEmbedder
) -> None:
    from rich.console import Console

    from gbr.chat.render import status as chat_status
    from gbr.mcp.server import _status_text

    put(store, BROKEN, model)
    report = status_report(store)
    line = next(x for x in _status_text(report, "in-process").splitlines() if "calc" in x)
    assert line.startswith("partial src/calc.gleam: syntax error at line 7")
    console = Console(width=300, record=True, color_system=None)
    chat_status(console, {**report, "root": "/pkg", "indexed": True}, [])
    assert "partial src/calc.gleam: syntax error at line 7" in console.export_text()
