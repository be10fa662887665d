"""Context assembly: headers, budget, ordering and citation checks."""

from __future__ import annotations

from gbr.core.answer.prompt import (
    ContextChunk,
    check_citations,
    chunk_header,
    edges_first,
    estimate_tokens,
    fit_history,
    message_tokens,
    render_context,
    select,
)
from gbr.core.llm.base import Message
from gbr.core.records import Hit


def hit(rank: int, lines: int = 3, name: str | None = None, path: str | None = None) -> Hit:
    body = "\n".join(f"  let x{i} = {i}" for i in range(lines))
    return Hit(
        rank=rank,
        path=path or f"src/app/m{rank}.gleam",
        module=f"app/m{rank}",
        name=name or f"fn_{rank}",
        kind="function",
        start_line=10,
        end_line=10 + lines + 1,
        score=1.0 / rank,
        text=f"pub fn fn_{rank}() {{\n{body}\n}}",
    )


def test_header_names_function_kind_file_lines_and_module() -> None:
    h = hit(2, name="calculate_fine", path="src/bookshelf/loan.gleam")
    assert chunk_header(2, h) == (
        "### [2] calculate_fine (function) · src/bookshelf/loan.gleam:10-14 · module app/m2"
    )


def test_rendered_context_fences_each_chunk_under_its_header() -> None:
    text = render_context([ContextChunk(hit(1), hit(1).text), ContextChunk(hit(2), hit(2).text)])
    blocks = text.split("### ")[1:]
    assert len(blocks) == 2
    for block in blocks:
        assert "```gleam\n" in block and block.rstrip().endswith("```")


def test_select_keeps_the_best_within_budget_and_count() -> None:
    hits = [hit(r, lines=20) for r in range(1, 9)]
    one = ContextChunk(hits[0], hits[0].text).tokens
    chosen = select(hits, budget=one * 3 + 1, max_chunks=10)
    assert [c.hit.rank for c in chosen] == [1, 2, 3]
    assert sum(c.tokens for c in chosen) <= one * 3 + 1
    assert [c.hit.rank for c in select(hits, budget=10_000, max_chunks=4)] == [1, 2, 3, 4]


def test_select_skips_a_big_hit_but_takes_smaller_ones_after_it() -> None:
    hits = [hit(1, lines=2), hit(2, lines=400), hit(3, lines=2)]
    budget = ContextChunk(hits[0], hits[0].text).tokens * 2 + 5
    assert [c.hit.rank for c in select(hits, budget, 5)] == [1, 3]


def test_the_best_hit_always_goes_in_cut_to_the_budget() -> None:
    big = hit(1, lines=500)
    [only] = select([big], budget=200, max_chunks=5)
    assert only.truncated and only.tokens <= 200
    assert only.text.endswith("cut to fit the context budget)")


def test_edges_first_puts_best_ranks_at_both_ends() -> None:
    chunks = [ContextChunk(hit(r), "") for r in (3, 1, 5, 2, 4)]
    assert [c.hit.rank for c in edges_first(chunks)] == [1, 3, 5, 4, 2]
    assert [c.hit.rank for c in edges_first(chunks[:2])] == [1, 3]


def test_citations_inside_sent_chunks_are_known_others_flagged() -> None:
    sent = [ContextChunk(hit(1, path="src/app/router.gleam"), "")]  # lines 10-14
    answer = (
        "See src/app/router.gleam:12 and src/app/router.gleam:10-14, "
        "but not src/app/router.gleam:99 nor src/other.gleam:3. Again src/app/router.gleam:12."
    )
    cites = check_citations(answer, sent)
    assert [(c.path, c.line, c.end_line, c.known) for c in cites] == [
        ("src/app/router.gleam", 12, 12, True),
        ("src/app/router.gleam", 10, 14, True),
        ("src/app/router.gleam", 99, 99, False),
        ("src/other.gleam", 3, 3, False),
    ]


def test_token_estimate_is_documented_chars_per_token() -> None:
    assert estimate_tokens("x" * 35) == 10
    assert estimate_tokens("") == 0


def test_history_keeps_the_newest_whole_turns_that_fit() -> None:
    turns = [
        Message("user", "q1"),
        Message("assistant", "a" * 350),  # 100 estimated tokens
        Message("user", "q2"),
        Message("assistant", "b" * 350),
        Message("user", "q3"),
        Message("assistant", "c" * 35),
    ]
    assert fit_history(turns, 10_000) == turns
    kept = fit_history(turns, 150)
    assert kept == turns[2:]  # q1 went first; q2 and q3 stay whole
    assert message_tokens(kept) <= 150
    assert fit_history(turns, 20) == turns[4:]
    assert fit_history(turns, 5) == []
    assert fit_history([], 100) == []


def test_history_never_keeps_a_newer_turn_behind_a_gap() -> None:
    turns = [
        Message("user", "q1"),
        Message("assistant", "short"),
        Message("user", "q2"),
        Message("assistant", "x" * 3500),  # too big alone
        Message("user", "q3"),
        Message("assistant", "short"),
    ]
    assert fit_history(turns, 100) == turns[4:]
