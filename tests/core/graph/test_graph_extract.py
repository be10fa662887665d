"""Extraction of one file's graph: every construct of issue 13 item 1, on small real sources.

Real grammar; each source is parsed as the index parses it. Targets are `module.name`; the
file under test is module `app/thing` (src/app/thing.gleam).
"""

from __future__ import annotations

import pytest
import structlog.testing
from tree_sitter import Parser

from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.graph.extract import extract_file_graph, file_graph
from gbr.core.graph.model import FileGraph, Import, Symbol
from gbr.core.parse.chunker import chunk_file, new_parser
from gbr.core.parse.oversize import parse_yielding
from gbr.core.records import FileProblem
from tests.conftest import REPO
from tests.core.test_chunker import source_file

ME = "app/thing"


@pytest.fixture(scope="module")
def parser() -> Parser:
    return new_parser()


def graph(parser: Parser, content: str | bytes) -> FileGraph:
    return file_graph(source_file(content), parser)


def refs(parser: Parser, content: str) -> set[tuple[int, str, str]]:
    """(line, kind, module.name) of every resolved reference."""
    return {
        (r.line, r.kind, f"{r.target_module}.{r.target_name}")
        for r in graph(parser, content).references
    }


def targets(parser: Parser, content: str) -> set[str]:
    return {t for _, _, t in refs(parser, content)}


# ---------------------------------------------------------------------------------- imports


def test_imports_with_aliases_unqualified_names_and_types(parser: Parser) -> None:
    g = graph(
        parser,
        "import gleam/list.{map, filter as keep}\n"
        "import x as y\n"
        "import gleam/option.{type Option, Some} as opt\n"
        "import wisp\n",
    )
    path = "src/app/thing.gleam"
    unqualified = (("map", "map", False), ("filter", "keep", False))
    assert g.imports == (
        Import(path, 1, 1, "gleam/list", "list", unqualified),
        Import(path, 2, 1, "x", "y"),
        Import(
            path, 3, 1, "gleam/option", "opt", (("Option", "Option", True), ("Some", "Some", False))
        ),
        Import(path, 4, 1, "wisp", "wisp"),
    )


def test_names_resolve_through_aliases_and_unqualified_imports(parser: Parser) -> None:
    source = (
        "import gleam/list.{map, filter as keep}\n"
        "import x as y\n"
        "pub fn f(xs) {\n"
        "  y.go(xs)\n"
        "  map(xs, y.go)\n"
        "  keep(xs, y.go)\n"
        "  x.go(xs)\n"  # `x` is imported as `y`: the name `x` is nothing here
        "  filter(xs, y.go)\n"  # imported as `keep`, so `filter` is unknown
        "}\n"
    )
    assert refs(parser, source) == {
        (4, "call", "x.go"),
        (5, "call", "gleam/list.map"),
        (5, "value", "x.go"),
        (6, "call", "gleam/list.filter"),
        (6, "value", "x.go"),
        (8, "value", "x.go"),
    }


# ------------------------------------------------------------------------ function references


def test_calls_qualified_bare_and_local(parser: Parser) -> None:
    source = "import gleam/int\nfn helper(n) { n }\npub fn f(n) {\n  helper(int.add(n, 1))\n}\n"
    assert refs(parser, source) == {(4, "call", f"{ME}.helper"), (4, "call", "gleam/int.add")}


def test_pipes_to_a_name_a_qualified_name_and_a_call(parser: Parser) -> None:
    source = (
        "import gleam/list\n"
        "fn double(xs) { xs }\n"
        "fn add(xs, n) { xs }\n"
        "pub fn f(xs) {\n"
        "  xs\n"
        "  |> double\n"
        "  |> list.reverse\n"
        "  |> list.take(2)\n"
        "  |> add(1)\n"
        "}\n"
    )
    assert refs(parser, source) == {
        (6, "pipe", f"{ME}.double"),
        (7, "pipe", "gleam/list.reverse"),
        (8, "pipe", "gleam/list.take"),
        (9, "pipe", f"{ME}.add"),
    }


def test_a_pipe_binds_tighter_than_concatenation_and_comparison(parser: Parser) -> None:
    # Gleam reads `xs |> render <> "]"` as `(xs |> render) <> "]"`; the grammar nests the
    # other way, and the function piped into must still be found.
    source = (
        "fn render(xs) { xs }\n"
        "fn size(xs) { 0 }\n"
        "pub fn f(xs) {\n"
        '  xs |> render <> "]"\n'
        "  xs |> size == 0 && xs |> size > 1\n"
        "}\n"
    )
    assert refs(parser, source) == {
        (4, "pipe", f"{ME}.render"),
        (5, "pipe", f"{ME}.size"),
    }
    # ...and both `size` of line 5 are pipes, not one of them a value.
    kinds = [r.kind for r in graph(parser, source).references if r.line == 5]
    assert kinds == ["pipe", "pipe"]


def test_captures(parser: Parser) -> None:
    source = (
        "import gleam/list\n"
        "fn add(a, b) { a + b }\n"
        "pub fn f(xs) {\n"
        "  let inc = add(_, 1)\n"
        "  list.map(xs, list.prepend(_, 0))\n"
        "  xs |> list.fold(0, _)\n"
        "}\n"
    )
    assert refs(parser, source) == {
        (4, "capture", f"{ME}.add"),
        (5, "call", "gleam/list.map"),
        (5, "capture", "gleam/list.prepend"),
        (6, "capture", "gleam/list.fold"),
    }


def test_functions_passed_and_bound_as_values(parser: Parser) -> None:
    source = (
        "import gleam/list\n"
        "import gleam/string.{trim}\n"
        "fn helper(x) { x }\n"
        "pub fn f(xs) {\n"
        "  let g = list.map\n"
        "  let h = helper\n"
        "  list.map(xs, helper)\n"
        "  g(xs, trim)\n"
        "}\n"
    )
    assert refs(parser, source) == {
        (5, "value", "gleam/list.map"),
        (6, "value", f"{ME}.helper"),
        (7, "call", "gleam/list.map"),
        (7, "value", f"{ME}.helper"),
        (8, "value", "gleam/string.trim"),
    }


def test_use_callbacks(parser: Parser) -> None:
    source = (
        "import gleam/bool\n"
        "import gleam/result\n"
        "fn with_file(path, next) { next(path) }\n"
        "pub fn f(y) {\n"
        "  use x <- result.try(y)\n"
        "  use <- bool.guard(x, Ok(1))\n"
        "  use path <- with_file(x)\n"
        "  use a, b <- result.map2\n"
        "  Ok(path)\n"
        "}\n"
    )
    assert refs(parser, source) == {
        (5, "use", "gleam/result.try"),
        (6, "use", "gleam/bool.guard"),
        (7, "use", f"{ME}.with_file"),
        (8, "use", "gleam/result.map2"),
    }


# ---------------------------------------------------------------------------- type references


def test_types_in_signatures_annotations_fields_and_aliases(parser: Parser) -> None:
    source = (
        "import gleam/option.{type Option}\n"
        "import gleam/dict\n"
        "pub type Box(a) {\n"
        "  Box(inner: a, label: Option(String), table: dict.Dict(String, Box(a)))\n"
        "}\n"
        "pub type Boxes = List(Box(Int))\n"
        "pub type Pick = fn(Box(Int)) -> #(Option(Int), option.Option(Int))\n"
        "pub fn f(b: Box(a), n: Int) -> dict.Dict(Int, Boxes) {\n"
        "  let x: Option(Int) = todo\n"
        "  fn(y: Boxes) -> Pick { todo }\n"
        "}\n"
    )
    assert refs(parser, source) == {
        (4, "type", "gleam/option.Option"),
        (4, "type", "gleam/dict.Dict"),
        (4, "type", f"{ME}.Box"),
        (6, "type", f"{ME}.Box"),
        (7, "type", f"{ME}.Box"),
        (7, "type", "gleam/option.Option"),
        (8, "type", f"{ME}.Box"),
        (8, "type", "gleam/dict.Dict"),
        (8, "type", f"{ME}.Boxes"),
        (9, "type", "gleam/option.Option"),
        (10, "type", f"{ME}.Boxes"),
        (10, "type", f"{ME}.Pick"),
    }


def test_constructors_in_expressions_patterns_and_updates(parser: Parser) -> None:
    source = (
        "import gleam/option.{Some}\n"
        "pub type Shape {\n"
        "  Circle(r: Float)\n"
        "  Square(side: Float)\n"
        "}\n"
        "pub fn f(s: Shape) {\n"
        "  let c = Circle(1.0)\n"
        "  let Square(side: z) = s\n"
        "  let d = Circle(..c, r: 2.0)\n"
        "  case s {\n"
        "    Circle(..) -> Some(1)\n"
        "    Square(_) -> option.None\n"
        "  }\n"
        "  case Some(s) {\n"
        "    option.Some(Circle(r)) -> r\n"
        "    _ -> 0.0\n"
        "  }\n"
        "}\n"
    )
    assert refs(parser, source) == {
        (6, "type", f"{ME}.Shape"),
        (7, "constructor", f"{ME}.Circle"),
        (8, "constructor", f"{ME}.Square"),
        (9, "constructor", f"{ME}.Circle"),
        (11, "constructor", f"{ME}.Circle"),
        (11, "constructor", "gleam/option.Some"),
        (12, "constructor", f"{ME}.Square"),
        (12, "constructor", "gleam/option.None"),
        (14, "constructor", "gleam/option.Some"),
        (15, "constructor", "gleam/option.Some"),
        (15, "constructor", f"{ME}.Circle"),
    }


def test_constructor_symbols_name_their_custom_type(parser: Parser) -> None:
    g = graph(
        parser,
        "pub type Shape {\n  Circle(r: Float)\n  Dot\n}\n"
        "pub opaque type Id {\n  Id(Int)\n}\n"
        "type Private {\n  Private\n}\n",
    )
    constructors = {(s.name, s.parent, s.public) for s in g.symbols if s.kind == "constructor"}
    # An opaque type's constructor is not usable outside its module.
    assert constructors == {
        ("Circle", "Shape", True),
        ("Dot", "Shape", True),
        ("Id", "Id", False),
        ("Private", "Private", False),
    }


def test_prelude_names_are_skipped_unless_the_file_defines_or_imports_them(
    parser: Parser,
) -> None:
    source = (
        "import packages/error.{type Error}\n"
        "pub fn f(x: Int) -> Result(List(Bool), Error) {\n"
        "  case x {\n"
        "    1 -> Ok([True])\n"
        "    _ -> Error(Nil)\n"  # the constructor was not imported: the prelude's
        "  }\n"
        "}\n"
    )
    assert refs(parser, source) == {(2, "type", "packages/error.Error")}
    own = "pub type Result {\n  Ok\n}\npub fn f() -> Result {\n  Ok\n}\n"
    assert refs(parser, own) == {(4, "type", f"{ME}.Result"), (5, "constructor", f"{ME}.Ok")}


# --------------------------------------------------------------------------------- constants


def test_constants_local_and_imported(parser: Parser) -> None:
    source = (
        "import app/config.{default_port}\n"
        "const limit = 10\n"
        "pub const limits = [limit, 20]\n"
        "pub fn f(n) {\n"
        "  case n {\n"
        "    x if x > limit -> limits\n"
        "    _ -> [config.max, default_port]\n"
        "  }\n"
        "}\n"
    )
    # An imported lowercase name that is read, not called, may be a function or a constant:
    # this file cannot tell, so it is a "value".
    assert refs(parser, source) == {
        (3, "constant", f"{ME}.limit"),
        (6, "constant", f"{ME}.limit"),
        (6, "constant", f"{ME}.limits"),
        (7, "value", "app/config.max"),
        (7, "value", "app/config.default_port"),
    }


# --------------------------------------------------------------------------------- shadowing


def test_parameters_and_lets_shadow_top_level_definitions(parser: Parser) -> None:
    source = (
        "fn map(x) { x }\n"
        "const limit = 1\n"
        "pub fn f(map) {\n"
        "  map\n"
        "}\n"
        "pub fn g(x) {\n"
        "  let y = map(limit)\n"  # the let's own value still sees the top level
        "  let limit = y\n"
        "  let map = limit\n"
        "  map\n"
        "}\n"
        "pub fn h(xs) {\n"
        "  let a = fn(map) { map }\n"
        "  case xs {\n"
        "    [map, ..] -> map\n"
        "    _ -> map(limit)\n"
        "  }\n"
        "}\n"
        "pub fn k(r) {\n"
        "  use limit <- map(r)\n"
        "  limit\n"
        "}\n"
    )
    assert refs(parser, source) == {
        (7, "call", f"{ME}.map"),
        (7, "constant", f"{ME}.limit"),
        (16, "call", f"{ME}.map"),
        (16, "constant", f"{ME}.limit"),
        (20, "use", f"{ME}.map"),
    }


def test_label_shorthand_reads_the_name_it_spells(parser: Parser) -> None:
    source = (
        'const name = "x"\n'
        "pub type P {\n  P(name: String, age: Int)\n}\n"
        "pub fn f(age) {\n"
        "  P(name:, age:)\n"  # `name:` reads the constant, `age:` the parameter
        "}\n"
        "pub fn g(p) {\n"
        "  let P(name:, ..) = p\n"  # in a pattern the shorthand binds `name`
        "  name\n"
        "}\n"
    )
    assert refs(parser, source) == {
        (6, "constructor", f"{ME}.P"),
        (6, "constant", f"{ME}.name"),
        (9, "constructor", f"{ME}.P"),
    }


def test_a_local_named_as_a_module_alias(parser: Parser) -> None:
    # The compiler reads `request.body` as the local's field, and falls back to the module
    # where the local has no such field: `result.try(...)` on a Result parameter.
    source = (
        "import gleam/http/request\n"
        "import gleam/result\n"
        "pub fn f(request, result) {\n"
        "  request.body\n"
        "  result.try(result, fn(x) { Ok(x) })\n"
        "}\n"
    )
    assert refs(parser, source) == {(5, "call", "gleam/result.try")}


def test_unknown_bare_names_are_left_out(parser: Parser) -> None:
    source = "pub fn f(x) {\n  helper(x)\n  Thing(x)\n  other.call(x)\n}\n"
    assert refs(parser, source) == set()


# ------------------------------------------------------------------------ symbols, positions


def test_symbols_with_positions_and_visibility(parser: Parser) -> None:
    g = graph(
        parser,
        "import gleam/int\n"
        "pub type Id =\n  Int\n"
        "pub type Handle\n"
        "const secret = 1\n"
        '@external(erlang, "m", "f")\n'
        "pub fn ext(a: Int) -> Int\n"
        "fn  local() { secret }\n",
    )
    assert g.symbols == (
        Symbol("src/app/thing.gleam", ME, "Id", "type_alias", 2, 10, True),
        Symbol("src/app/thing.gleam", ME, "Handle", "external_type", 4, 10, True),
        Symbol("src/app/thing.gleam", ME, "secret", "constant", 5, 7, False),
        Symbol("src/app/thing.gleam", ME, "ext", "function", 7, 8, True),
        Symbol("src/app/thing.gleam", ME, "local", "function", 8, 5, False),
    )


def test_reference_positions_count_characters_and_name_the_enclosing_definition(
    parser: Parser,
) -> None:
    source = (
        "import gleam/io\n"
        "pub type T {\n  T(x: io.Thing)\n}\n"
        'pub fn f() {\n  "héllo ✓" |> io.println\n}\n'
    )
    got = [(r.line, r.col, r.source_name) for r in graph(parser, source).references]
    # `io.Thing`: the name `Thing` at column 11; `println` after two multi-byte characters.
    assert got == [(3, 11, "T"), (6, 19, "f")]


# ------------------------------------------------------------------------------ bad inputs


def test_a_broken_function_loses_only_its_own_edges(parser: Parser) -> None:
    source = (
        "import gleam/int\n"
        "pub fn good() { int.add(1, 2) }\n"
        "pub fn broken( { int.nope(, }\n"
        "pub fn also_good() -> Int { good() }\n"
    )
    g = graph(parser, source)
    assert {s.name for s in g.symbols} == {"good", "also_good"}
    assert {(r.line, r.target_name) for r in g.references} == {(2, "add"), (4, "good")}
    # Without a parser to re-parse damaged ranges, damaged definitions are simply left out.
    content = source.encode()
    bare = extract_file_graph(source_file(content), parse_yielding(parser, content).root_node)
    assert "broken" not in {s.name for s in bare.symbols}
    assert (2, "add") in {(r.line, r.target_name) for r in bare.references}


def test_a_damaged_file_keeps_exactly_the_definitions_the_chunker_keeps(
    parser: Parser, model: OnnxEmbedder
) -> None:
    # Every example file cut short at three points (mid-edit), and the deliberately broken
    # one: the graph's definitions are the chunks' definitions, no more and no less.
    compared = damaged = 0
    for file in sorted((REPO / "examples").rglob("*.gleam")):
        data = file.read_bytes()
        for cut in (len(data) // 3, len(data) // 2, 2 * len(data) // 3, len(data)):
            source = source_file(data[:cut], "src/" + file.name)
            result = chunk_file(source, parser, model.count_tokens)
            chunks = [] if isinstance(result, FileProblem) else getattr(result, "chunks", result)
            damaged += not isinstance(result, list)
            expected = sorted(c.name for c in chunks if c.kind != "module" and c.part == 0)
            got = sorted(s.name for s in file_graph(source, parser).symbols if not s.parent)
            assert got == expected, (file.name, cut)
            compared += 1
    assert damaged > 20 and compared > 100


@pytest.mark.parametrize(
    "content",
    [b"", b"\xff\xfe not utf-8 fn f() { g() }", b"\x00\x01\x02", b"fn", b"}}}{{{", b"import"],
)
def test_empty_binary_or_garbage_input_does_not_raise(parser: Parser, content: bytes) -> None:
    g = graph(parser, content)
    assert g.path == "src/app/thing.gleam"
    assert g.references == ()


def test_a_parser_that_fails_gives_an_empty_graph_and_a_warning() -> None:
    # A real parser with no language set: tree-sitter refuses to parse.
    with structlog.testing.capture_logs() as events:
        g = file_graph(source_file("pub fn f() { f() }\n"), Parser())
    assert (g.imports, g.symbols, g.references) == ((), (), ())
    assert [(e["event"], e["path"]) for e in events] == [
        ("graph_parse_failed", "src/app/thing.gleam")
    ]


def test_not_utf8_gives_an_empty_graph(parser: Parser) -> None:
    # The chunker drops such a file whole; the graph must not keep edges of an unindexed file.
    g = graph(parser, b"import gleam/int\npub fn f() { int.add(1, 2) } // \xff\n")
    assert (g.imports, g.symbols, g.references) == ((), (), ())


def test_a_byte_order_mark_does_not_shift_positions(parser: Parser) -> None:
    g = graph(parser, b"\xef\xbb\xbfpub fn f() { f() }\n")
    assert [(s.line, s.col) for s in g.symbols] == [(1, 8)]
    assert [(r.line, r.col) for r in g.references] == [(1, 14)]


def test_a_very_long_pipeline_does_not_overflow_the_stack(parser: Parser) -> None:
    steps = "\n".join("  |> list.reverse" for _ in range(3000))
    source = f"import gleam/list\npub fn f(xs) {{\n  xs\n{steps}\n}}\n"
    assert len(graph(parser, source).references) == 3000


def test_every_example_file_extracts(parser: Parser) -> None:
    files = sorted((REPO / "examples").rglob("*.gleam"))
    assert len(files) >= 20
    total = 0
    # Extraction swallows its own exceptions to keep an index run going; none may happen here.
    with structlog.testing.capture_logs() as events:
        for file in files:
            g = file_graph(source_file(file.read_bytes(), "src/" + file.name), parser)
            total += len(g.references)
    assert events == []
    assert total > 1000
