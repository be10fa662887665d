"""Server-side highlighting for the web page, on real Gleam with the real grammar."""

from __future__ import annotations

from pathlib import Path

import pytest

from gbr.core.parse.chunker import new_parser
from gbr.core.parse.highlight import CLASSES, Link, Segment, lines, spans

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def draw(source: str, links: tuple[Link, ...] = ()) -> list[list[Segment]]:
    content = source.encode("utf-8")
    tree = new_parser().parse(content)
    return lines(content, spans(tree.root_node, content), links)


def classes_of(row: list[Segment]) -> dict[str, str]:
    """{text: class} of a line's non-blank segments."""
    return {s[0]: s[1] for s in row if s[0].strip()}


@pytest.mark.parametrize(
    "path", sorted(EXAMPLES.rglob("*.gleam")), ids=lambda p: f"{p.parent.name}/{p.name}"
)
def test_every_line_of_the_examples_comes_back_exactly(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    drawn = draw(text)
    assert ["".join(s[0] for s in row) for row in drawn] == text.split("\n")
    assert {s[1] for row in drawn for s in row} <= {"", *CLASSES}
    assert all(s[0] for row in drawn for s in row)  # no empty segment


def test_a_function_is_classed_by_what_each_word_is() -> None:
    drawn = draw(
        "import gleam/list\n\n/// Doubles.\npub fn double(xs: List(Int)) -> List(Int) {\n"
        "  list.map(xs, fn(x) { x * 2 }) // twice\n}\n"
    )
    assert classes_of(drawn[0]) == {"import": "keyword", "gleam/list": "module"}
    assert classes_of(drawn[2]) == {"/// Doubles.": "doc"}
    head = classes_of(drawn[3])
    assert head["pub"] == head["fn"] == "keyword"
    assert head["double"] == "function" and head["List"] == "type" and head["->"] == "operator"
    body = classes_of(drawn[4])
    assert body["map"] == "function" and body["2"] == "number" and body["// twice"] == "comment"


def test_markup_in_a_string_is_one_string_segment() -> None:
    drawn = draw('pub fn page() -> String {\n  "<script>alert(1)</script> // not a comment"\n}\n')
    assert drawn[1] == [["  ", ""], ['"<script>alert(1)</script> // not a comment"', "string"]]


def test_non_ascii_text_keeps_its_columns() -> None:
    drawn = draw('const greeting = "héllo wörld"\nconst n = 1\n')
    assert drawn[0][-1] == ['"héllo wörld"', "string"]
    assert drawn[1][-1] == ["1", "number"]


def test_a_link_covers_a_qualified_name_and_splits_segments() -> None:
    source = "import gleam/list\n\npub fn f(xs) {\n  list.map(xs, g)\n}\n"
    drawn = draw(source, (Link(4, 3, "gleam/list.map"), Link(3, 8, "m.f")))
    assert ["list.", "", "gleam/list.map"] in drawn[3]
    assert ["map", "function", "gleam/list.map"] in drawn[3]
    assert ["f", "function", "m.f"] in drawn[2]
    assert "".join(s[0] for s in drawn[3]) == "  list.map(xs, g)"


def test_links_off_the_text_are_ignored() -> None:
    source = "pub fn f() {\n  1\n}\n"
    links = (Link(99, 1, "x.y"), Link(2, 3, "x.one"), Link(0, 1, "x.z"), Link(1, 50, "x.w"))
    assert draw(source, links) == draw(source)


def test_broken_code_still_comes_back_whole() -> None:
    source = 'pub fn broken( {\n  let x = \n}\n"unclosed\n'
    drawn = draw(source)
    assert ["".join(s[0] for s in row) for row in drawn] == source.split("\n")


def test_text_that_is_not_utf8_is_refused() -> None:
    content = b'const x = "\xff"\n'
    tree = new_parser().parse(content)
    with pytest.raises(UnicodeDecodeError):
        lines(content, spans(tree.root_node, content))
