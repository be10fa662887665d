"""Files that parse only in part: the intact definitions are kept, and every lost line is named.

Real grammar, real tokenizer, small Gleam files written here.
"""

from __future__ import annotations

import pytest
from tree_sitter import Parser

from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.parse.chunker import chunk_file, new_parser
from gbr.core.records import Chunk, FileProblem, PartialFile
from tests.conftest import EXAMPLE
from tests.core.test_chunker import source_file


@pytest.fixture(scope="module")
def parser() -> Parser:
    return new_parser()


def run(
    parser: Parser, model: OnnxEmbedder, content: str
) -> list[Chunk] | PartialFile | FileProblem:
    return chunk_file(source_file(content), parser, model.count_tokens)


def partial(parser: Parser, model: OnnxEmbedder, content: str) -> PartialFile:
    result = run(parser, model, content)
    assert isinstance(result, PartialFile), result
    return result


def assert_no_line_lost(content: str, result: PartialFile) -> None:
    """Every non-blank line is in a chunk or in a dropped range, and in only one of them."""
    chunked = {n for c in result.chunks for n in range(c.start_line, c.end_line + 1)}
    dropped = {n for a, b in result.problem.dropped_lines for n in range(a, b + 1)}
    assert not chunked & dropped
    for number, line in enumerate(content.split("\n"), start=1):
        if line.strip():
            assert number in chunked | dropped, (number, line)


LUSTRE = """import lustre/effect.{type Effect}

pub type Config(message) {
  Config(open_shadow_root: Bool, on_attribute_change: List(#(String, message)))
}

/// The defaults.
pub const default_config: Config(message) = Config(
  open_shadow_root: True,
  on_attribute_change: [],
)

const empty: Effect(message) = Effect(synchronous: [], before_paint: [], after_paint: [])

pub fn none() -> Effect(message) {
  empty
}
"""


def test_lustre_constants_with_type_variables_parse_whole(
    parser: Parser, model: OnnxEmbedder
) -> None:
    result = run(parser, model, LUSTRE)
    assert isinstance(result, list), result  # not partial, not dropped
    got = [(c.kind, c.name, c.start_line, c.end_line, c.visibility) for c in result]
    assert got == [
        ("module", "app/thing", 1, 1, "pub"),
        ("type", "Config", 3, 5, "pub"),
        ("constant", "default_config", 7, 11, "pub"),
        ("constant", "empty", 13, 13, "private"),
        ("function", "none", 15, 17, "pub"),
    ]
    default_config = result[2]
    assert default_config.doc == "The defaults."
    assert default_config.signature.startswith(
        "pub const default_config: Config(message) = Config("
    )
    assert result[3].signature.startswith("const empty: Effect(message) = Effect(")


@pytest.mark.parametrize(
    "annotation",
    ["Dict(k, v)", "Option(List(msg))", "#(a, b)", "Result(a, e)", "List(#(a, Int))"],
)
def test_other_type_variables_in_constant_annotations_parse_whole(
    parser: Parser, model: OnnxEmbedder, annotation: str
) -> None:
    result = run(parser, model, f"pub const c: {annotation} = x\n\npub fn f() {{\n  1\n}}\n")
    assert isinstance(result, list), result
    assert [(c.name, c.start_line) for c in result] == [("c", 1), ("f", 3)]


def test_a_real_error_in_a_constant_with_a_type_variable_still_counts(
    parser: Parser, model: OnnxEmbedder
) -> None:
    content = "const a: List(a) = [1,, 2]\n\npub fn c() {\n  3\n}\n"
    result = partial(parser, model, content)
    assert [c.name for c in result.chunks] == ["c"]
    assert result.problem.dropped_lines == ((1, 1),)
    assert "line 1 not indexed" in result.problem.reason


BROKEN_MIDDLE = """//// Numbers.

import gleam/int

/// The first.
pub fn first() -> Int {
  1
}

/// Half-typed: a stray comma.
pub fn broken(x: Int) -> Int {
  let y = [1, 2,, 3]
  int.add(x, y)
}

/// The last.
pub fn last() -> Int {
  3
}
"""


def test_one_broken_function_between_two_good_ones(parser: Parser, model: OnnxEmbedder) -> None:
    result = partial(parser, model, BROKEN_MIDDLE)
    got = [(c.kind, c.name, c.start_line, c.end_line, c.doc) for c in result.chunks]
    assert got == [
        ("module", "app/thing", 1, 3, "Numbers."),
        ("function", "first", 5, 8, "The first."),
        ("function", "last", 16, 19, "The last."),
    ]
    problem = result.problem
    assert problem.kind == "parse_partial"
    assert problem.path == "src/app/thing.gleam"
    assert (problem.line, problem.column) == (12, 17)  # the second comma
    assert problem.excerpt == "let y = [1, 2,, 3]"
    # The broken function and its doc comment: nothing dropped goes unsaid.
    assert problem.dropped_lines == ((10, 14),)
    assert "lines 10-14 not indexed" in problem.reason
    assert_no_line_lost(BROKEN_MIDDLE, result)


def test_the_intact_chunks_are_those_of_the_file_without_the_broken_function(
    parser: Parser, model: OnnxEmbedder
) -> None:
    lines = BROKEN_MIDDLE.split("\n")
    # The same file with the broken function's lines blanked: its chunks are the reference.
    blanked = "\n".join("" if 10 <= n <= 14 else line for n, line in enumerate(lines, 1))
    clean = run(parser, model, blanked)
    assert isinstance(clean, list)
    assert list(partial(parser, model, BROKEN_MIDDLE).chunks) == clean


def test_a_definition_sharing_a_line_with_the_error_is_left_out_too(
    parser: Parser, model: OnnxEmbedder
) -> None:
    content = "pub fn a() {\n  [1,, 2]\n} const b = 1\n\npub fn c() {\n  3\n}\n"
    result = partial(parser, model, content)
    assert [(c.name, c.start_line, c.end_line) for c in result.chunks] == [("c", 5, 7)]
    assert result.problem.dropped_lines == ((1, 3),)
    assert_no_line_lost(content, result)


def test_an_unclosed_brace_loses_only_the_function_it_is_in(
    parser: Parser, model: OnnxEmbedder
) -> None:
    content = (
        "pub const limit = 3\n"
        "\n"
        "pub fn open(queue: List(String)) -> List(String) {\n"
        "  case queue {\n"
        "    [] -> []\n"
        "    [_, ..rest] -> {\n"
        "      rest\n"
        "  }\n"
        "\n"
        "pub fn swallowed() {\n"
        "  1\n"
        "}\n"
    )
    result = partial(parser, model, content)
    # tree-sitter lets `open` swallow `swallowed`; parsed on its own, it is intact.
    assert [c.name for c in result.chunks] == ["limit", "swallowed"]
    assert result.problem.dropped_lines == ((3, 9),)
    assert_no_line_lost(content, result)


def test_two_broken_regions_are_both_named(parser: Parser, model: OnnxEmbedder) -> None:
    content = (
        "pub fn a() {\n  [1,, 2]\n}\n\n"
        "pub fn b() {\n  2\n}\n\n"
        "pub fn c() {\n  let = 3\n}\n\n"
        "pub fn d() {\n  4\n}\n"
    )
    result = partial(parser, model, content)
    assert [c.name for c in result.chunks] == ["b", "d"]
    assert result.problem.dropped_lines == ((1, 3), (9, 11))
    assert (result.problem.line, result.problem.column) == (2, 5)  # the first error
    assert "lines 1-3, 9-11 not indexed" in result.problem.reason
    assert_no_line_lost(content, result)


def test_a_file_whose_only_definition_is_broken_is_dropped_whole(
    parser: Parser, model: OnnxEmbedder
) -> None:
    result = run(parser, model, "import gleam/io\n\npub fn only(x) {\n  [1,, 2]\n}\n")
    assert isinstance(result, FileProblem)
    assert result.kind == "parse_failed"
    assert (result.line, result.column) == (4, 5)
    assert result.dropped_lines == ()


def test_recovery_damage_to_valid_neighbours_does_not_lose_them(
    parser: Parser, model: OnnxEmbedder
) -> None:
    # A real edit: in member.gleam, this half-typed function makes tree-sitter's recovery
    # put ERROR nodes into three valid functions further down (`member.status` and the
    # like). Parsed on their own they are intact, and they are kept.
    good = (EXAMPLE / "src/bookshelf/member.gleam").read_text()
    at = good.index("/// Decide whether the member may take out a new loan")
    half = "pub fn half_typed(member: Member) -> Int {\n  let fines = [1, 2,, 3]\n  0\n}\n\n"
    edited = good[:at] + half + good[at:]
    damaged = [n for n in parser.parse(edited.encode()).root_node.children if n.has_error]
    assert len(damaged) > 1  # the grammar's recovery, which this test is about
    clean = run(parser, model, good)
    assert isinstance(clean, list)
    result = partial(parser, model, edited)
    row = good[:at].count("\n") + 1
    assert result.problem.dropped_lines == ((row, row + 3),)
    shift = half.count("\n")
    moved = [
        (c.name, c.start_line - shift if c.start_line > row else c.start_line)
        for c in result.chunks
    ]
    assert moved == [(c.name, c.start_line) for c in clean]
    assert_no_line_lost(edited, result)


def test_definitions_swallowed_by_a_broken_function_are_given_back(
    parser: Parser, model: OnnxEmbedder
) -> None:
    # A real edit: a stray comma in `serve` of bookshelf.gleam, and tree-sitter's
    # `function` node for it runs to the end of the file, over three valid definitions.
    rel = EXAMPLE / "src/bookshelf.gleam"
    lines = rel.read_text().split("\n")
    at = next(i for i, line in enumerate(lines) if line.startswith("fn serve(")) + 1
    edited = "\n".join([*lines[:at], "  let broken = [1,, 2]", *lines[at:]])
    swallower = [n for n in parser.parse(edited.encode()).root_node.children if n.has_error]
    assert [n.end_point.row for n in swallower] == [len(lines) - 1]  # to the last line
    clean = run(parser, model, "\n".join(lines))
    assert isinstance(clean, list)
    result = partial(parser, model, edited)
    kept = [(c.kind, c.name) for c in result.chunks]
    assert kept == [(c.kind, c.name) for c in clean if c.name != "serve"]
    doc_row = next(i for i, line in enumerate(lines) if "Adapt a mist request" in line) + 1
    # `serve`'s closing brace, one line lower once edited, and the blank line after it.
    blank_row = next(i for i in range(at, len(lines)) if lines[i] == "}") + 3
    assert result.problem.dropped_lines == ((doc_row, blank_row),)
    assert_no_line_lost(edited, result)


@pytest.mark.parametrize("name", ["isbn", "member"])
def test_a_half_typed_first_line_loses_only_itself(
    parser: Parser, model: OnnxEmbedder, name: str
) -> None:
    # The unclosed `( {` makes tree-sitter swallow the whole file, and (for isbn.gleam) cut
    # its last function across three top-level nodes; all of it is valid Gleam but line 1.
    good = (EXAMPLE / f"src/bookshelf/{name}.gleam").read_text()
    edited = "pub fn half_written( {\n" + good
    clean = run(parser, model, good)
    assert isinstance(clean, list)
    result = partial(parser, model, edited)
    assert result.problem.dropped_lines == ((1, 1),)
    assert [(c.kind, c.name, c.start_line - 1, c.end_line - 1) for c in result.chunks] == [
        (c.kind, c.name, c.start_line, c.end_line) for c in clean
    ]
