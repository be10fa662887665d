"""The AST chunker on real Gleam, with the real grammar and the real tokenizer."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from tree_sitter import Node, Parser

from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.parse.chunker import ChunkLimits, chunk_file, new_parser
from gbr.core.records import Chunk, FileProblem, PartialFile, SourceFile

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "bookshelf"
MAX_TOKENS = ChunkLimits().max_tokens
DEFINITION_TYPES = {
    "function",
    "type_definition",
    "type_alias",
    "constant",
    "external_type",
    "external_function",
}
LEADING_TYPES = {"statement_comment", "comment", "attribute"}

Chunker = Callable[..., "list[Chunk] | PartialFile | FileProblem"]


@pytest.fixture(scope="module")
def parser() -> Parser:
    return new_parser()


def source_file(content: str | bytes, path: str = "src/app/thing.gleam") -> SourceFile:
    data = content.encode("utf-8") if isinstance(content, str) else content
    module = path.split("/", 1)[1].removesuffix(".gleam")
    return SourceFile(
        path=path,
        module=module,
        package="app",
        content=data,
        content_hash=hashlib.sha256(data).hexdigest(),
        size=len(data),
        mtime=0.0,
    )


@pytest.fixture
def chunk(parser: Parser, model: OnnxEmbedder) -> Chunker:
    def run(
        content: str | bytes, path: str = "src/app/thing.gleam"
    ) -> list[Chunk] | PartialFile | FileProblem:
        return chunk_file(source_file(content, path), parser, model.count_tokens)

    return run


def chunks_of(chunk: Chunker, content: str | bytes) -> list[Chunk]:
    result = chunk(content)
    assert isinstance(result, list), result
    return result


def problem_of(chunk: Chunker, content: str | bytes) -> FileProblem:
    """The file's problem: why it was dropped, or (when partial) its first syntax error."""
    result = chunk(content)
    if isinstance(result, PartialFile):
        return result.problem
    assert isinstance(result, FileProblem), result
    return result


def only(chunks: list[Chunk], name: str) -> Chunk:
    found = [c for c in chunks if c.name == name]
    assert len(found) == 1, [(c.name, c.part) for c in chunks]
    return found[0]


def end_row(node: Node) -> int:
    end = node.end_point
    return end.row - 1 if end.column == 0 and end.row > node.start_point.row else end.row


def rows_of(chunk: Chunk) -> range:
    """0-based rows, as tree-sitter counts them."""
    return range(chunk.start_line - 1, chunk.end_line)


def definition_rows(root: Node) -> dict[int, str]:
    """Every row of a top-level definition, with the docs/attributes glued above it."""
    rows: dict[int, str] = {}
    children = root.children
    for i, node in enumerate(children):
        if node.type not in DEFINITION_TYPES:
            continue
        start = node.start_point.row
        j = i - 1
        while j >= 0 and children[j].type in LEADING_TYPES and end_row(children[j]) + 1 >= start:
            start = children[j].start_point.row
            j -= 1
        for row in range(start, end_row(node) + 1):
            rows[row] = node.type
    return rows


# --- one test per node type -----------------------------------------------------------------


def test_public_function_carries_all_its_fields(chunk: Chunker) -> None:
    source = (
        "import gleam/int\n"
        "\n"
        "/// Add two numbers.\n"
        "pub fn add(a: Int, b: Int) -> Int {\n"
        "  a + b\n"
        "}\n"
    )
    result = chunks_of(chunk, source)
    add = only(result, "add")
    assert add.kind == "function"
    assert add.visibility == "pub"
    assert add.signature == "pub fn add(a: Int, b: Int) -> Int"
    assert (add.start_line, add.end_line) == (3, 6)
    assert add.module == "app/thing"
    assert add.package == "app"
    assert add.path == "src/app/thing.gleam"
    assert add.doc == "Add two numbers."
    assert add.text == "/// Add two numbers.\npub fn add(a: Int, b: Int) -> Int {\n  a + b\n}"
    assert (add.part, add.parts, add.header) == (0, 1, "")


def test_private_function_is_private(chunk: Chunker) -> None:
    helper = only(chunks_of(chunk, "fn helper(x) {\n  x\n}\n"), "helper")
    assert helper.visibility == "private"
    assert helper.kind == "function"
    assert helper.signature == "fn helper(x)"


def test_type_with_several_constructors_is_one_type_chunk(chunk: Chunker) -> None:
    source = (
        "/// A shape.\n"
        "pub type Shape {\n"
        "  Circle(radius: Float)\n"
        "  Square(side: Float)\n"
        "  Rectangle(width: Float, height: Float)\n"
        "}\n"
    )
    result = chunks_of(chunk, source)
    assert len(result) == 1
    shape = result[0]
    assert (shape.kind, shape.name, shape.visibility) == ("type", "Shape", "pub")
    assert shape.signature == "pub type Shape"
    assert (shape.start_line, shape.end_line) == (1, 6)
    assert "Rectangle(width: Float, height: Float)" in shape.text


def test_generic_type_signature_keeps_its_parameters(chunk: Chunker) -> None:
    page = only(chunks_of(chunk, "pub type Page(item) {\n  Page(items: List(item))\n}\n"), "Page")
    assert page.signature == "pub type Page(item)"


def test_opaque_type_is_a_public_type(chunk: Chunker) -> None:
    source = "pub opaque type Email {\n  Email(String)\n}\n"
    email = only(chunks_of(chunk, source), "Email")
    assert (email.kind, email.visibility) == ("type", "pub")
    assert email.signature == "pub opaque type Email"


def test_type_alias(chunk: Chunker) -> None:
    source = "/// Identifier.\npub type BookId =\n  String\n"
    alias = only(chunks_of(chunk, source), "BookId")
    assert alias.kind == "type_alias"
    assert alias.signature == "pub type BookId = String"
    assert (alias.start_line, alias.end_line) == (1, 3)
    assert alias.doc == "Identifier."


def test_generic_type_alias_is_named_without_parameters(chunk: Chunker) -> None:
    source = "pub type Reply(a) =\n  Subject(Result(a, String))\n"
    alias = only(chunks_of(chunk, source), "Reply")
    assert alias.signature == "pub type Reply(a) = Subject(Result(a, String))"


def test_constants_public_and_private(chunk: Chunker) -> None:
    result = chunks_of(chunk, 'pub const limit: Int = 5\n\nconst host = "127.0.0.1"\n')
    limit, host = only(result, "limit"), only(result, "host")
    assert (limit.kind, limit.visibility, limit.signature) == (
        "constant",
        "pub",
        "pub const limit: Int = 5",
    )
    assert (host.kind, host.visibility, host.signature) == (
        "constant",
        "private",
        'const host = "127.0.0.1"',
    )
    assert (host.start_line, host.end_line) == (3, 3)


def test_external_type_is_named_after_its_type(chunk: Chunker) -> None:
    result = chunks_of(chunk, "/// A process id.\npub type Pid\n\ntype Ref(a)\n")
    pid, ref = only(result, "Pid"), only(result, "Ref")
    assert (pid.kind, pid.visibility, pid.signature) == ("external_type", "pub", "pub type Pid")
    assert pid.doc == "A process id."
    assert (ref.kind, ref.visibility, ref.signature) == ("external_type", "private", "type Ref(a)")


def test_external_attribute_belongs_to_the_function_below(chunk: Chunker) -> None:
    source = (
        "pub fn other() {\n"
        "  1\n"
        "}\n"
        "\n"
        "/// Milliseconds since the epoch.\n"
        '@external(erlang, "app_ffi", "now")\n'
        "pub fn now() -> Int\n"
    )
    now = only(chunks_of(chunk, source), "now")
    assert (now.start_line, now.end_line) == (5, 7)
    assert '@external(erlang, "app_ffi", "now")' in now.text
    assert now.signature == "pub fn now() -> Int"
    assert now.doc == "Milliseconds since the epoch."


def test_attributes_for_two_targets_both_belong_to_the_function(chunk: Chunker) -> None:
    source = (
        '@external(erlang, "ffi", "index")\n'
        '@external(javascript, "../ffi.mjs", "index")\n'
        "fn bare_index(data: Dynamic, key: anything) -> Result(Int, String)\n"
    )
    result = chunks_of(chunk, source)
    assert len(result) == 1
    assert (result[0].start_line, result[0].end_line) == (1, 3)
    assert result[0].name == "bare_index"


def test_deprecated_attribute_belongs_to_the_definition_below(chunk: Chunker) -> None:
    source = (
        "/// Old name.\n"
        '@deprecated("Use `return_loan` instead")\n'
        "pub fn give_back(id: Int) -> Int {\n"
        "  id\n"
        "}\n"
    )
    give_back = only(chunks_of(chunk, source), "give_back")
    assert give_back.start_line == 1
    assert "@deprecated" in give_back.text
    assert give_back.doc == "Old name."


def test_doc_comment_is_attached_without_its_markers(chunk: Chunker) -> None:
    source = (
        "/// First line of the doc.\n"
        "///\n"
        "///   Indented second paragraph.\n"
        "pub fn documented() {\n"
        "  Nil\n"
        "}\n"
    )
    documented = only(chunks_of(chunk, source), "documented")
    assert documented.doc == "First line of the doc. Indented second paragraph."
    assert "///" not in documented.doc
    assert documented.start_line == 1


def test_plain_comment_above_is_glued_but_not_doc(chunk: Chunker) -> None:
    source = "// TODO: speed up\npub fn slow() {\n  Nil\n}\n"
    slow = only(chunks_of(chunk, source), "slow")
    assert slow.start_line == 1
    assert slow.doc == ""


def test_doc_separated_by_a_blank_line_is_not_attached(chunk: Chunker) -> None:
    source = "/// Stray words.\n\npub fn lonely() {\n  Nil\n}\n"
    lonely = only(chunks_of(chunk, source), "lonely")
    assert lonely.doc == ""
    assert lonely.start_line == 3
    assert "Stray words" not in lonely.text


def test_module_doc_and_imports_make_the_module_chunk(chunk: Chunker) -> None:
    source = (
        "//// Shelf management.\n"
        "//// Second line.\n"
        "\n"
        "import gleam/list\n"
        "import gleam/string.{length}\n"
        "\n"
        "/// Function doc.\n"
        "pub fn shelve() {\n"
        "  Nil\n"
        "}\n"
    )
    result = chunks_of(chunk, source)
    module = result[0]
    assert module.kind == "module"
    assert module.name == "app/thing"
    assert module.signature == "module app/thing"
    assert module.doc == "Shelf management. Second line."
    assert (module.start_line, module.end_line) == (1, 5)
    assert "import gleam/string.{length}" in module.text
    assert "Function doc" not in module.text
    assert only(result, "shelve").start_line == 7


def test_file_without_imports_or_module_doc_has_no_module_chunk(chunk: Chunker) -> None:
    result = chunks_of(chunk, "/// Doc.\npub fn a() {\n  1\n}\n")
    assert [c.kind for c in result] == ["function"]


def test_file_with_only_imports_is_one_module_chunk(chunk: Chunker) -> None:
    result = chunks_of(chunk, "import gleam/io\nimport gleam/list\n")
    assert [(c.kind, c.start_line, c.end_line) for c in result] == [("module", 1, 2)]


# --- signatures ----------------------------------------------------------------------------


def test_multi_line_parameters_give_a_one_line_signature_without_trailing_comma(
    chunk: Chunker,
) -> None:
    source = (
        "pub fn renew(\n"
        "  loan: Loan,\n"
        "  today: Day,\n"
        "  // a comment among the parameters\n"
        "  closed_weekdays closed: List(Int),\n"
        ") -> Result(Loan, LoanError) {\n"
        "  Ok(loan)\n"
        "}\n"
    )
    renew = only(chunks_of(chunk, source), "renew")
    assert renew.signature == (
        "pub fn renew(loan: Loan, today: Day, closed_weekdays closed: List(Int)) "
        "-> Result(Loan, LoanError)"
    )


def test_signature_of_function_typed_parameters_and_tuples(chunk: Chunker) -> None:
    source = "pub fn map_page(page: #(a, Int), with fun: fn(a) -> b) -> #(b, Int) {\n  todo\n}\n"
    assert only(chunks_of(chunk, source), "map_page").signature == (
        "pub fn map_page(page: #(a, Int), with fun: fn(a) -> b) -> #(b, Int)"
    )


def test_signature_of_a_multi_line_constant_keeps_strings_verbatim(chunk: Chunker) -> None:
    source = 'const words = [\n  "a  b",\n  "c",\n]\n'
    assert only(chunks_of(chunk, source), "words").signature == 'const words = ["a  b", "c"]'


# --- oversized nodes -----------------------------------------------------------------------


def big_function(lets: int = 60, clauses: int = 40) -> str:
    """A function far over the window: many `let`s, some multi-line, and a big `case`."""
    lines = [
        "/// A very long function.",
        "pub fn big(a: Int, b: String) -> Int {",
        "  // set up",
    ]
    for i in range(lets):
        if i % 7 == 3:
            lines += [
                f"  let folded_{i} =",
                "    list.fold([a, b |> string.length], 0, fn(acc, x) {",
                f"      acc + x * {i}",
                "    })",
            ]
        else:
            lines.append(f"  let value_{i} = a * {i} + string.length(b) - {i * 7}")
        if i % 10 == 9:
            lines += ["", f"  // checkpoint {i}"]
    lines.append("  case value_0 {")
    lines += [f"    {i} -> value_{i % 3} + {i}" for i in range(clauses)]
    lines += ["    _ -> 0", "  }", "}"]
    return "\n".join(lines) + "\n"


def function_node(source: str, parser: Parser) -> Node:
    root = parser.parse(source.encode()).root_node
    return next(n for n in root.children if n.type in ("function", "type_definition"))


def test_oversized_function_is_split_into_parts_of_one_name_kind_and_signature(
    chunk: Chunker,
) -> None:
    parts = chunks_of(chunk, big_function())
    assert len(parts) >= 3
    assert {c.name for c in parts} == {"big"}
    assert {c.kind for c in parts} == {"function"}
    assert {c.signature for c in parts} == {"pub fn big(a: Int, b: String) -> Int"}
    assert [c.part for c in parts] == list(range(len(parts)))
    assert {c.parts for c in parts} == {len(parts)}
    assert {c.doc for c in parts} == {"A very long function."}


def test_parts_after_the_first_carry_the_signature_as_header(chunk: Chunker) -> None:
    parts = chunks_of(chunk, big_function())
    assert parts[0].header == ""
    assert all(c.header == c.signature for c in parts[1:])


def test_parts_cover_the_node_lines_exactly_once(chunk: Chunker, parser: Parser) -> None:
    source = big_function()
    parts = chunks_of(chunk, source)
    node = function_node(source, parser)
    rows = [row for c in parts for row in rows_of(c)]
    assert rows == list(range(0, end_row(node) + 1))  # doc row 0 .. closing brace, in order
    lines = source.split("\n")
    for c in parts:
        assert c.text == "\n".join(lines[c.start_line - 1 : c.end_line])


def test_no_part_boundary_falls_inside_a_statement(chunk: Chunker, parser: Parser) -> None:
    source = big_function()
    parts = chunks_of(chunk, source)
    body = function_node(source, parser).child_by_field_name("body")
    assert body is not None
    part_of_row = {row: c.part for c in parts for row in rows_of(c)}
    statements = [s for s in body.named_children if s.type != "comment"]
    assert any(end_row(s) > s.start_point.row for s in statements)  # multi-line ones exist
    for statement in statements:
        assert part_of_row[statement.start_point.row] == part_of_row[end_row(statement)]


def test_a_comment_between_statements_stays_with_the_statement_below(
    chunk: Chunker, parser: Parser
) -> None:
    source = big_function()
    parts = chunks_of(chunk, source)
    lines = source.split("\n")
    part_of_row = {row: c.part for c in parts for row in rows_of(c)}
    for row, line in enumerate(lines):
        if line.strip().startswith("// checkpoint"):
            assert part_of_row[row] == part_of_row[row + 1]


def test_each_part_fits_the_budget_unless_it_is_one_oversized_statement(
    chunk: Chunker, parser: Parser, model: OnnxEmbedder
) -> None:
    source = big_function()
    parts = chunks_of(chunk, source)
    body = function_node(source, parser).child_by_field_name("body")
    assert body is not None
    statements = [s for s in body.named_children if s.type != "comment"]
    oversized = 0
    for c in parts:
        tokens = model.count_tokens(c.signature + "\n" + c.text)
        inside = [s for s in statements if s.start_point.row in rows_of(c)]
        if tokens > MAX_TOKENS:
            assert len(inside) == 1, (c.part, tokens)
            oversized += 1
    assert oversized == 1  # the big `case`, kept whole


def test_type_with_many_constructors_splits_at_constructor_boundaries(
    chunk: Chunker, parser: Parser, model: OnnxEmbedder
) -> None:
    lines = ["/// Every event.", "pub type Event {"]
    for i in range(80):
        if i % 5 == 0:
            lines += [f"  Multi{i}(", "    first: Int,", "    second: String,", "  )"]
        else:
            lines.append(f"  Event{i}(id: Int, label: String, weight: Float)")
    lines.append("}")
    source = "\n".join(lines) + "\n"
    parts = chunks_of(chunk, source)
    assert len(parts) >= 2
    assert {(c.name, c.kind, c.signature) for c in parts} == {("Event", "type", "pub type Event")}
    node = function_node(source, parser)
    assert [r for c in parts for r in rows_of(c)] == list(range(0, end_row(node) + 1))
    part_of_row = {row: c.part for c in parts for row in rows_of(c)}
    ctors = next(c for c in node.children if c.type == "data_constructors").named_children
    for ctor in ctors:
        assert part_of_row[ctor.start_point.row] == part_of_row[end_row(ctor)]
    for c in parts:
        assert model.count_tokens(c.signature + "\n" + c.text) <= MAX_TOKENS


def test_a_huge_single_statement_is_kept_whole(chunk: Chunker, model: OnnxEmbedder) -> None:
    clauses = "\n".join(f'    {i} -> "number {i} in words"' for i in range(120))
    source = (
        f'pub fn spell(n: Int) -> String {{\n  case n {{\n{clauses}\n    _ -> "many"\n  }}\n}}\n'
    )
    result = chunks_of(chunk, source)
    assert model.count_tokens(source) > 2 * MAX_TOKENS
    assert len(result) == 1
    assert (result[0].part, result[0].parts) == (0, 1)
    assert (result[0].start_line, result[0].end_line) == (1, source.count("\n"))


def test_a_long_module_doc_is_split_into_module_parts(chunk: Chunker, model: OnnxEmbedder) -> None:
    paragraphs = [
        f"//// Paragraph {i}: the decoder walks dynamic data and reports every mismatch\n"
        "//// with a path, so callers can show where a document went wrong.\n"
        "////"
        for i in range(30)
    ]
    source = "\n".join(paragraphs) + "\n\nimport gleam/list\n\npub fn f() {\n  1\n}\n"
    result = chunks_of(chunk, source)
    modules = [c for c in result if c.kind == "module"]
    assert len(modules) >= 2
    assert [r for c in modules for r in rows_of(c)] == list(range(0, 92))
    for c in modules:
        assert model.count_tokens(c.signature + "\n" + c.text) <= MAX_TOKENS
        # cut between paragraphs: every part starts a paragraph or the imports
        assert c.text.startswith(("//// Paragraph", "\nimport", "import"))
    assert all(c.header == "module app/thing" for c in modules[1:])


# --- no line lost or doubled ---------------------------------------------------------------

EXAMPLE_FILES = sorted(
    p.relative_to(EXAMPLE).as_posix()
    for p in EXAMPLE.rglob("*.gleam")
    if p.name != "broken.gleam" and "build" not in p.parts
)


def test_the_example_has_files_to_check() -> None:
    assert len(EXAMPLE_FILES) >= 10


@pytest.mark.parametrize("rel", EXAMPLE_FILES)
def test_no_source_line_is_lost_or_doubled_in_the_example(
    rel: str, chunk: Chunker, parser: Parser
) -> None:
    content = (EXAMPLE / rel).read_bytes()
    result = chunk(content, rel)
    assert isinstance(result, list), result
    counts = Counter(row for c in result for row in rows_of(c))
    assert max(counts.values()) == 1, [r + 1 for r, n in counts.items() if n > 1]
    wanted = definition_rows(parser.parse(content).root_node)
    missing = sorted(r + 1 for r in wanted if counts[r] != 1)
    assert not missing, f"lines not in exactly one chunk: {missing}"
    lines = content.decode().split("\n")
    for c in result:
        assert c.text == "\n".join(lines[c.start_line - 1 : c.end_line])


def test_a_comment_after_a_definition_on_its_line_is_not_doubled(chunk: Chunker) -> None:
    result = chunks_of(chunk, "const a = 1 // seconds\nconst b = 2\n")
    assert [(c.name, c.start_line, c.end_line) for c in result] == [("a", 1, 1), ("b", 2, 2)]


def test_a_definition_on_the_line_of_the_last_import_is_not_doubled(chunk: Chunker) -> None:
    result = chunks_of(chunk, "//// Doc.\nimport gleam/io pub fn f() {\n  1\n}\n")
    assert [(c.kind, c.start_line, c.end_line) for c in result] == [
        ("module", 1, 1),
        ("function", 2, 4),
    ]


def test_two_definitions_on_one_line_share_one_chunk(chunk: Chunker) -> None:
    result = chunks_of(chunk, "pub type X = Int pub type Y = Int\nconst z = 1\n")
    rows = Counter(row for c in result for row in rows_of(c))
    assert set(rows.values()) == {1}
    assert "pub type Y = Int" in result[0].text


# --- problems ------------------------------------------------------------------------------


def test_a_syntax_error_is_reported_where_it_is(chunk: Chunker) -> None:
    source = "pub fn ok() {\n  1\n}\n\npub fn f(x: Int) -> Int {\n  let y = [1, 2,, 3]\n  x\n}\n"
    problem = problem_of(chunk, source)
    assert problem.kind == "parse_partial"  # `ok` parsed intact and is kept
    assert problem.dropped_lines == ((5, 8),)
    assert problem.path == "src/app/thing.gleam"
    assert (problem.line, problem.column) == (6, 17)  # the second comma
    assert problem.excerpt == "let y = [1, 2,, 3]"
    assert "line 6" in problem.reason


def test_a_missing_token_is_reported_at_the_gap(chunk: Chunker) -> None:
    problem = problem_of(chunk, "pub fn f() {\n  let y = foo(1, 2\n  y\n}\n")
    assert problem.kind == "parse_failed"
    assert problem.line == 2
    assert "missing" in problem.reason


def test_a_missing_value_inlined_by_the_grammar_is_still_located(chunk: Chunker) -> None:
    problem = problem_of(chunk, "pub fn f(x: Int) -> Int {\n  let y = \n}\n")
    assert (problem.line, problem.column) == (2, 10)


def test_an_unclosed_brace_points_past_it_and_names_the_brace(chunk: Chunker) -> None:
    source = (
        "pub fn first(queue: List(String)) -> List(String) {\n"
        "  case queue {\n"
        "    [] -> []\n"
        "    [_, ..rest] -> {\n"
        "      rest\n"
        "  }\n"
        "\n"
        "pub fn second() {\n"
        "  1\n"
        "}\n"
    )
    problem = problem_of(chunk, source)
    assert (problem.line, problem.column) == (8, 1)
    assert problem.excerpt.startswith("pub fn second")
    assert "line 1, column 51" in problem.reason


def test_the_broken_example_keeps_its_intact_constant_and_says_where_it_broke(
    chunk: Chunker,
) -> None:
    rel = "src/bookshelf/broken.gleam"
    result = chunk((EXAMPLE / rel).read_bytes(), rel)
    assert isinstance(result, PartialFile)
    assert [(c.kind, c.name) for c in result.chunks] == [
        ("module", "bookshelf/broken"),
        ("constant", "max_reminders"),
        ("function", "prune"),  # swallowed by the unclosed `{`, parsed again on its own
    ]
    problem = result.problem
    assert problem.kind == "parse_partial"
    # `notify_next`, its doc and the blank line after it.
    assert problem.dropped_lines == ((15, 23),)
    assert "lines 15-23 not indexed" in problem.reason
    # `notify_next` (line 16) lacks a `}`; the parser stops at `pub fn prune` (line 25).
    assert (problem.line, problem.column) == (25, 1)
    assert problem.excerpt.startswith("pub fn prune(")
    assert "line 16" in problem.reason


def test_error_column_counts_characters_not_bytes(chunk: Chunker) -> None:
    problem = problem_of(chunk, 'pub fn f() {\n  "ééé" <> , 1\n}\n')
    assert (problem.line, problem.column) == (2, 12)


def test_a_non_ascii_name_is_reported_at_the_letter(chunk: Chunker) -> None:
    problem = problem_of(chunk, 'pub fn café(x) {\n  "ü"\n}\n')
    assert problem.kind == "parse_failed"
    assert (problem.line, problem.column) == (1, 11)
    assert "'é'" in problem.reason


def test_a_stray_top_level_expression_is_left_out_and_reported(chunk: Chunker) -> None:
    result = chunk("import gleam/io\n\nfoo bar\n\npub fn g() {\n  2\n}\n")
    assert isinstance(result, PartialFile)
    assert [c.name for c in result.chunks] == ["app/thing", "g"]
    problem = result.problem
    assert problem.kind == "parse_partial"
    assert problem.dropped_lines == ((3, 3),)
    assert (problem.line, problem.column) == (3, 1)
    assert problem.excerpt == "foo bar"


def test_invalid_utf8_is_reported_with_its_line(chunk: Chunker) -> None:
    source = b'pub fn a() {\n  1\n}\n\nconst s = "caf\xe9"\n'
    problem = problem_of(chunk, source)
    assert problem.kind == "invalid_utf8"
    assert (problem.line, problem.column) == (5, 15)
    assert "line 5" in problem.reason
    assert "UTF-8" in problem.reason


# --- odd files -----------------------------------------------------------------------------


def test_an_empty_file_has_no_chunks(chunk: Chunker) -> None:
    assert chunks_of(chunk, "") == []
    assert chunks_of(chunk, "\n\n  \n") == []


def test_a_file_of_only_comments_has_no_chunks(chunk: Chunker) -> None:
    assert chunks_of(chunk, "// just a note\n/// dangling doc\n\n// another\n") == []


def test_crlf_line_endings_keep_lines_text_and_docs_right(chunk: Chunker) -> None:
    source = (
        "//// Module doc.\r\n"
        "\r\n"
        "import gleam/io\r\n"
        "\r\n"
        "/// Says hi.\r\n"
        "pub fn hi(\r\n"
        "  name: String,\r\n"
        ") -> Nil {\r\n"
        "  io.println(name)\r\n"
        "}\r\n"
    )
    result = chunks_of(chunk, source)
    module, hi = result
    assert (module.start_line, module.end_line, module.doc) == (1, 3, "Module doc.")
    assert (hi.start_line, hi.end_line) == (5, 10)
    assert hi.doc == "Says hi."
    assert hi.signature == "pub fn hi(name: String) -> Nil"
    assert "\r" not in hi.text
    assert hi.text.splitlines()[-1] == "}"


def test_unicode_strings_and_docs_keep_lines_and_text_right(chunk: Chunker) -> None:
    source = (
        "/// Grüße, 世界 🌍.\n"
        'pub const greeting = "héllo wörld" // trailing note\n'
        "\n"
        "/// Ellipsis.\n"
        "pub fn dots() -> String {\n"
        '  "…\u2028…"\n'  # a LINE SEPARATOR inside a string is not a line break
        "}\n"
        "\n"
        "pub fn after() {\n"
        "  1\n"
        "}\n"
    )
    result = chunks_of(chunk, source)
    greeting, dots, after = result
    assert greeting.doc == "Grüße, 世界 🌍."
    assert greeting.signature == 'pub const greeting = "héllo wörld"'
    assert (dots.start_line, dots.end_line) == (4, 7)
    assert (after.name, after.start_line, after.end_line) == ("after", 9, 11)
    assert after.text == "pub fn after() {\n  1\n}"


def test_a_byte_order_mark_is_ignored(chunk: Chunker) -> None:
    result = chunks_of(chunk, "\ufeff//// Doc.\nimport gleam/io\n\npub fn f() {\n  1\n}\n")
    assert result[0].doc == "Doc."
    assert result[0].text.startswith("//// Doc.")
    assert (result[1].name, result[1].start_line) == ("f", 4)


def test_legacy_target_groups_and_external_fns_are_chunked(chunk: Chunker) -> None:
    source = (
        "if erlang {\n"
        "  pub fn only_on_erlang() {\n"
        "    1\n"
        "  }\n"
        "}\n"
        "\n"
        'pub external fn now() -> Int = "erlang" "now"\n'
    )
    result = chunks_of(chunk, source)
    assert [(c.name, c.kind, c.start_line) for c in result] == [
        ("only_on_erlang", "function", 2),
        ("now", "function", 7),
    ]


def test_chunking_is_deterministic(chunk: Chunker) -> None:
    source = (EXAMPLE / "src/bookshelf/worker.gleam").read_bytes()
    assert chunk(source) == chunk(source)


def test_signature_keeps_negative_and_float_literals(chunk: Chunker) -> None:
    chunks = chunks_of(chunk, "pub const never = -1\n\nconst ratio: Float = -0.5\n")
    assert [c.signature for c in chunks] == [
        "pub const never = -1",
        "const ratio: Float = -0.5",
    ]
