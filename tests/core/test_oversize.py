"""The cap on one chunk's size: giant nodes are cut, and no source character is lost."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from tree_sitter import Parser

from gbr.core import telemetry
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.parse.chunker import chunk_file, new_parser
from gbr.core.parse.oversize import MAX_CHUNK_CHARS, PARSE_SLICE, parse_yielding, windows
from gbr.core.records import Chunk
from tests.core.test_chunker import source_file

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import big_files  # the bench's generators: tests and bench cut the same shapes


@pytest.fixture(scope="module")
def parser() -> Parser:
    return new_parser()


def chunks(text: str, parser: Parser, model: OnnxEmbedder) -> list[Chunk]:
    result = chunk_file(source_file(text), parser, model.count_tokens)
    assert isinstance(result, list), result
    return result


def assert_every_character_kept(text: str, got: list[Chunk]) -> None:
    """Parts in order rebuild the source: whole-line parts by line, line pieces joined."""
    lines = text.split("\n")
    rebuilt: dict[int, str] = {}
    for c in got:
        if c.start_line == c.end_line and c.start_line in rebuilt:
            rebuilt[c.start_line] += c.text  # the next piece of a line cut at the cap
            continue
        for offset, line in enumerate(c.text.split("\n")):
            assert c.start_line + offset not in rebuilt, f"line {c.start_line + offset} doubled"
            rebuilt[c.start_line + offset] = line
    for number, line in enumerate(lines, start=1):
        if line.strip():
            assert rebuilt.get(number) == line, f"line {number} lost or changed"


def test_windows_pack_lines_and_cut_a_line_longer_than_the_cap() -> None:
    lines = ["a" * 4, "b" * 4, "c" * 23, "d" * 3]
    assert windows(lines, 0, 3, cap=10) == [
        (0, 1, "aaaa\nbbbb"),
        (2, 2, "c" * 10),
        (2, 2, "c" * 10),
        (2, 2, "c" * 3),
        (3, 3, "ddd"),
    ]


def test_a_huge_constant_is_cut_into_marked_parts_under_the_cap(
    parser: Parser, model: OnnxEmbedder, tmp_path: Path
) -> None:
    text = big_files.big_constant(120_000)
    events = tmp_path / "events.jsonl"
    telemetry.configure(events)
    got = chunks(text, parser, model)
    assert len(got) > 1
    assert max(len(c.text) for c in got) <= MAX_CHUNK_CHARS
    assert [c.part for c in got] == list(range(len(got)))
    assert {c.parts for c in got} == {len(got)}
    assert {c.name for c in got} == {"table"}
    assert all(c.header == got[0].signature for c in got[1:])
    assert len(got[0].signature) <= 240
    assert_every_character_kept(text, got)
    cut = [json.loads(line) for line in events.read_text().splitlines()]
    cut = [e for e in cut if e["event"] == "chunk_cut"]
    assert len(cut) == 1 and cut[0]["name"] == "table" and cut[0]["parts"] == len(got)


def test_a_constant_on_one_giant_line_is_cut_within_the_line(
    parser: Parser, model: OnnxEmbedder
) -> None:
    blob = "".join(f"word{i} " for i in range(12_000))
    text = f'pub const blob = "{blob}"\n\npub fn after() -> Int {{\n  1\n}}\n'
    got = chunks(text, parser, model)
    pieces = [c for c in got if c.name == "blob"]
    assert len(pieces) > 1
    assert all(c.start_line == c.end_line == 1 for c in pieces)
    assert max(len(c.text) for c in got) <= MAX_CHUNK_CHARS
    assert "".join(c.text for c in pieces) == text.split("\n")[0]
    assert [c.name for c in got if c.name != "blob"] == ["after"]


def test_a_giant_function_with_one_giant_statement_is_cut_too(
    parser: Parser, model: OnnxEmbedder
) -> None:
    items = "\n".join(f"    {i}," for i in range(8_000))
    text = f"pub fn big() -> List(Int) {{\n  [\n{items}\n  ]\n}}\n"
    got = chunks(text, parser, model)
    assert max(len(c.text) for c in got) <= MAX_CHUNK_CHARS
    assert_every_character_kept(text, got)


def test_a_big_function_is_still_split_at_its_statements(
    parser: Parser, model: OnnxEmbedder
) -> None:
    text = big_files.big_function(200_000)
    got = chunks(text, parser, model)
    assert max(len(c.text) for c in got) <= MAX_CHUNK_CHARS
    # Cut at statements, by tokens: every part but the last ends on a whole `let` line.
    assert all(c.text.rstrip().split("\n")[-1].lstrip().startswith("let ") for c in got[:-1])
    assert_every_character_kept(text, got)


def test_a_parse_fed_in_slices_gives_the_same_tree(parser: Parser) -> None:
    # Two- and three-byte characters everywhere, so that slice ends fall inside them.
    body = "".join(
        f'/// Café n°{i}: ½ → ¾\npub fn f{i}() -> String {{\n  "naïve {i} ✓ €"\n}}\n\n'
        for i in range(3_000)
    )
    content = body.encode("utf-8")
    assert len(content) > 3 * PARSE_SLICE
    sliced = parse_yielding(parser, content).root_node
    whole = parser.parse(content).root_node
    assert not sliced.has_error
    assert str(sliced) == str(whole)
    assert sliced.end_byte == whole.end_byte == len(content)
