"""Identifier splitting and the texts built for BM25 and for the embedder."""

from __future__ import annotations

import pytest

from gbr.core.parse.chunk_text import (
    HEADER_RESERVE,
    chunk_budget,
    code_words,
    doc_prose,
    embed_text,
    search_text,
    split_identifier,
)
from gbr.core.records import Chunk


@pytest.mark.parametrize(
    ("ident", "words"),
    [
        ("map_loop", ["map", "loop"]),
        ("sendAfter", ["send", "after"]),
        ("HTTPError", ["http", "error"]),
        ("isbn13", ["isbn", "13"]),
        ("LoanError", ["loan", "error"]),
        ("x", ["x"]),
    ],
)
def test_split_identifier(ident: str, words: list[str]) -> None:
    assert split_identifier(ident) == words


def test_code_words_keeps_whole_identifiers_and_their_parts() -> None:
    assert code_words("list.map_loop(x)").split() == ["list", "map_loop", "map", "loop", "x"]


def chunk(**kw: object) -> Chunk:
    base = dict(
        path="src/shelf/loan.gleam",
        module="shelf/loan",
        package="shelf",
        kind="function",
        name="calculate_fine",
        signature="pub fn calculate_fine(loan: Loan, today: Int) -> Int",
        visibility="pub",
        start_line=3,
        end_line=9,
        part=0,
        parts=1,
        doc="The fine owed for a late loan. Capped at the book price.",
        text="pub fn calculate_fine(loan: Loan, today: Int) -> Int {\n  0\n}",
    )
    base.update(kw)
    return Chunk(**base)  # type: ignore[arg-type]


def test_search_text_weights_the_name_above_the_body() -> None:
    body = "pub fn calculate_fine(loan: Loan, today: Int) -> Int {\n  let penalty = 0\n}"
    words = search_text(chunk(text=body)).split()
    assert words.count("calculate_fine") >= 3 * words.count("penalty") > 0
    assert {"calculate", "fine", "shelf", "loan"} <= set(words)


def test_embed_text_starts_with_a_header_naming_module_and_function() -> None:
    first_line = embed_text(chunk()).splitlines()[0]
    assert "shelf/loan" in first_line and "calculate_fine" in first_line


def test_embed_text_of_a_later_part_names_the_parent_signature_once() -> None:
    signature = "pub fn calculate_fine(loan: Loan, today: Int) -> Int"
    later = chunk(part=1, parts=2, header=signature, text="  0\n}")
    text = embed_text(later)
    assert text.count("pub fn calculate_fine(loan: Loan, today: Int) -> Int") == 1
    assert text.splitlines()[0].endswith("pub fn calculate_fine(loan: Loan, today: Int) -> Int")


def test_plain_embed_text_keeps_the_part_header_above_the_code() -> None:
    later = chunk(part=1, parts=2, header="pub fn calculate_fine(loan: Loan) -> Int", text="  0")
    assert embed_text(later, "plain") == "pub fn calculate_fine(loan: Loan) -> Int\n  0"
    assert embed_text(chunk(text="  1"), "plain") == "  1"


def test_chunk_budget_leaves_room_for_the_header() -> None:
    assert chunk_budget(256, "plain") == 254
    assert chunk_budget(256, "header") == 254 - HEADER_RESERVE


def test_doc_prose_drops_examples_tags_and_link_targets() -> None:
    doc = (
        "Split on the [pattern](../regexp.md#split). <details> <summary>Examples</summary> "
        '```gleam regexp.split(re, "a,b") ``` </details>'
    )
    assert doc_prose(doc) == "Split on the pattern. Examples"


def test_prose_embed_text_gives_the_doc_once_above_the_code_without_its_comments() -> None:
    text = "/// The fine owed for a late loan.\n/// ```gleam\n/// x\n/// ```\npub fn f() {\n  0\n}"
    doc = "The fine owed for a late loan. ```gleam x ```"
    lines = embed_text(chunk(text=text, doc=doc), "prose").splitlines()
    assert "shelf/loan" in lines[0] and "calculate_fine" in lines[0]
    assert lines[1:] == ["The fine owed for a late loan.", "pub fn f() {", "  0", "}"]
    assert chunk_budget(256, "prose") == chunk_budget(256, "header")


def test_the_prose_search_text_drops_doc_examples_and_counts_the_doc_once() -> None:
    doc = "The fine owed for a late loan. ```gleam\nshelf.overdue_report()\n```"
    text = "/// The fine owed for a late loan.\npub fn calculate_fine() -> Int {\n  0\n}"
    weighted = search_text(chunk(doc=doc, text=text)).split()
    prose = search_text(chunk(doc=doc, text=text), "prose-weighted").split()
    assert "overdue_report" in " ".join(weighted) and "overdue_report" not in " ".join(prose)
    assert weighted.count("owed") == 2 and prose.count("owed") == 1
    assert prose.count("calculate_fine") == weighted.count("calculate_fine")
