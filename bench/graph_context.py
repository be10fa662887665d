"""Does the code graph's `ask` context hold the answer's definition more often? (issue 13.4)

For every retrieval-benchmark question, the prompt context `ask --dry-run` would send is
built with the real Oracle (no LLM: dry run, no HyDE) at the default budget and chunk count,
with and without the graph's outlines, and the question counts as contained when one of its
target definitions is in the context: a chosen chunk is it, or an outline (its signature
and first doc line) is. A third setting spends the same budget on more chunks instead, to
tell whether the outlines beat simply sending more code.

    nice .venv/bin/python bench/graph_context.py                  # devcorpus halves + examples
    nice .venv/bin/python bench/graph_context.py --budget 2000 --json out.json

Indexes are shared with bench/eval.py (bench/out/), so a second run only asks.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from eval import (  # noqa: E402
    DEV_QUERIES,
    DEVCORPUS,
    HALVES,
    MemoEmbedder,
    devcorpus_units,
    half_of,
    index_for,
    load_corpus,
    unit_index,
)

from bench.evaluation import Query  # noqa: E402
from gbr.core.answer.oracle import Answer, AskOptions, Oracle  # noqa: E402
from gbr.core.embed.embedder import OnnxEmbedder  # noqa: E402
from gbr.core.embed.model_files import resolve_model_files  # noqa: E402
from gbr.core.llm.base import Message  # noqa: E402
from gbr.core.rank.search import Searcher  # noqa: E402
from gbr.core.records import Hit  # noqa: E402
from gbr.core.store.facade import Store  # noqa: E402

DEFAULTS = AskOptions(dry_run=True, hyde=False)
MORE_CHUNKS = 16  # the "more code instead" setting: twice the default chunk count


@dataclass(frozen=True)
class Setting:
    name: str
    options: AskOptions


def settings(budget: int) -> list[Setting]:
    base = replace(DEFAULTS, budget=budget)
    more = replace(base, graph_context=False, max_chunks=MORE_CHUNKS)
    return [
        Setting("chunks", replace(base, graph_context=False)),
        Setting("chunks+graph", replace(base, graph_context=True)),
        Setting(f"chunks-k{MORE_CHUNKS}", more),
        Setting(f"chunks-k{MORE_CHUNKS}+graph", replace(more, graph_context=True)),
    ]


class OnceOracle(Oracle):
    """The Oracle with each question retrieved once: the settings differ only after it."""

    def __init__(self, searcher: Searcher) -> None:
        super().__init__(searcher, None)
        self._memo: dict[tuple[str, int], list[Hit]] = {}

    def retrieve(
        self, question: str, options: AskOptions, answer: Answer, history: Sequence[Message] = ()
    ) -> list[Hit]:
        key = (question, options.max_chunks)
        if key not in self._memo:
            self._memo[key] = super().retrieve(question, options, answer, history)
        return self._memo[key]


def contained(query: Query, answer: Answer) -> tuple[bool, bool]:
    """(a target's code is sent, a target is in the context at all: code or outline)."""
    wanted = {(t.file, t.name) for t in query.targets}
    code = any((c.hit.path, c.hit.name) in wanted for c in answer.chunks)
    outline = any((o.path, o.name) in wanted for o in answer.outlines)
    return code, code or outline


def run_unit(
    db: Path, queries: list[Query], model: Any, chosen: list[Setting]
) -> list[dict[str, Any]]:
    rows = []
    with Store.open(db) as store:
        oracle = OnceOracle(Searcher(store, model))
        for query in queries:
            row: dict[str, Any] = {"id": query.id}
            for setting in chosen:
                answer = oracle.answer(query.query, setting.options)
                code, any_form = contained(query, answer)
                prompt = answer.messages[-1].content
                row[setting.name] = {
                    "code": code,
                    "contained": any_form,
                    "chunks": len(answer.chunks),
                    "outlines": len(answer.outlines),
                    "chars": len(prompt),
                }
            rows.append(row)
    return rows


def summarise(rows: list[dict[str, Any]], chosen: list[Setting]) -> dict[str, Any]:
    n = len(rows)
    out: dict[str, Any] = {"queries": n}
    for s in chosen:
        cells = [r[s.name] for r in rows]
        out[s.name] = {
            "contained": sum(c["contained"] for c in cells) / max(1, n),
            "code": sum(c["code"] for c in cells) / max(1, n),
            "outlines": sum(c["outlines"] for c in cells) / max(1, n),
            "chunks": sum(c["chunks"] for c in cells) / max(1, n),
            "tokens": sum(c["chars"] for c in cells) / max(1, n) / 3.5,
        }
    return out


def print_block(name: str, block: dict[str, Any], chosen: list[Setting]) -> None:
    print(f"\n{name}: {block['queries']} queries")
    print(
        f"  {'setting':<18}{'target in ctx':>14}{'as code':>9}{'chunks':>8}{'outlines':>9}"
        f"{'tokens':>8}"
    )
    for s in chosen:
        b = block[s.name]
        print(
            f"  {s.name:<18}{b['contained']:>14.3f}{b['code']:>9.3f}{b['chunks']:>8.1f}"
            f"{b['outlines']:>9.1f}{b['tokens']:>8.0f}"
        )


def rows_per_set(
    devcorpus: Path, out: Path, model: Any, run: Callable[[Path, list[Query]], list[dict[str, Any]]]
) -> dict[str, list[dict[str, Any]]]:
    """`run(index, questions)` over each devcorpus repository (per-repository indexes, rows
    pooled per half) and over examples/: the rows of each set, named as the tables say."""
    per_half: dict[str, list[dict[str, Any]]] = {h: [] for h in HALVES}
    for unit in devcorpus_units(devcorpus, DEV_QUERIES, HALVES, "per-package"):
        db = unit_index(unit, "header", model, out)
        per_half[half_of(unit.name)] += run(db, unit.queries)
    corpus = load_corpus(
        REPO / "examples",
        [REPO / "bench/queries/bookshelf.jsonl", REPO / "bench/queries/relay.jsonl"],
    )
    sets = {f"devcorpus {h} half": per_half[h] for h in HALVES}
    sets["examples"] = run(index_for(corpus, "header", model, out), corpus.queries)
    return sets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, default=DEFAULTS.budget)
    parser.add_argument("--devcorpus", type=Path, default=DEVCORPUS)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    chosen = settings(args.budget)
    header = f"budget {args.budget} estimated tokens, {DEFAULTS.max_chunks} chunks at most"
    return run_sets(args, chosen, run_unit, summarise, print_block, header)


def run_sets(
    args: argparse.Namespace,
    chosen: Any,
    run_unit: Callable[[Path, Sequence[Query], MemoEmbedder, Any], list[dict[str, Any]]],
    summarise: Callable[[list[dict[str, Any]], Any], dict[str, Any]],
    print_block: Callable[[str, dict[str, Any], Any], None],
    header: str,
) -> int:
    """Run each setting over every set (devcorpus halves, examples), print a block per set
    and write them as JSON with `--json`: the frame both context benches share."""
    args.out.mkdir(parents=True, exist_ok=True)
    model = OnnxEmbedder(resolve_model_files(env=os.environ))
    memo = MemoEmbedder(model)
    sets = rows_per_set(
        args.devcorpus, args.out, model, lambda db, qs: run_unit(db, qs, memo, chosen)
    )
    blocks = {name: summarise(rows, chosen) for name, rows in sets.items()}
    print(header)
    for name, block in blocks.items():
        print_block(name, block, chosen)
    if args.json is not None:
        args.json.write_text(json.dumps(blocks, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
