"""Does a HyDE guess keep the answer's definition in the `ask` context? (issue 30, item 10)

With HyDE on, `ask` fuses the question's ranking with the neighbours of a code snippet an
LLM guessed, and an off-topic guess pushed the right code out of the prompt. Here the guess
is fixed, not asked of an LLM (no network): for every prose question of the retrieval
benchmark (identifier-like ones never use HyDE), the real Oracle builds the prompt context
at the default budget and chunk count with

- no guess (HyDE off: the plain retrieval),
- a good guess: the target's own doc comment and signature, as a model that knew the
  answer would write it,
- a poor guess: the good guess of another question of the same package, which is code
  from the right codebase about the wrong thing,

each with the plain question's top 0 (no reserve, as before issue 30) to 5 hits kept ahead
of the fused ones (AskOptions.hyde_keeps; the default keeps half the 8 chunks, 4). A
question counts when one of its target definitions is sent as code; "plain #1 kept" counts
the questions whose plain top hit is still in the context.

Measured on 2 shared cores (issue 30), target in the context, dev / held-out / examples/:
no guess 0.980 / 0.875 / 0.954; a good guess with no reserve 1.000 / 0.938 / 0.985, keeping
4 1.000 / 0.925 / 0.974; a poor guess with no reserve 0.790 / 0.725 / 0.892, keeping 1
0.870 / 0.787 / 0.923, 2 0.930 / 0.850 / 0.928, 3 0.950 / 0.863 / 0.933, 4 0.940 / 0.875 /
0.938, 5 0.960 / 0.875 / 0.938.

    nice .venv/bin/python bench/hyde_context.py                       # devcorpus halves + examples
    nice .venv/bin/python bench/hyde_context.py --keeps 0,4 --json out.json

Indexes are shared with bench/eval.py (bench/out/, or --out), so a second run only asks.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from eval import DEVCORPUS  # noqa: E402
from graph_context import run_sets  # noqa: E402

from bench.evaluation import Query  # noqa: E402
from gbr.core.answer.oracle import AskOptions, Oracle  # noqa: E402
from gbr.core.llm.base import Message  # noqa: E402
from gbr.core.parse.chunk_text import doc_prose  # noqa: E402
from gbr.core.rank.search import Searcher, looks_like_code  # noqa: E402
from gbr.core.store.facade import Store  # noqa: E402

GUESSES = ("none", "good", "poor")


class FixedGuesses:
    """An LLM provider whose HyDE answer is looked up by question: `complete` returns the
    guess chosen for the question it is sent, and nothing else is ever asked of it."""

    name = "fixed-guess"
    model = "fixed"

    def __init__(self) -> None:
        self.guesses: dict[str, str] = {}

    def complete(
        self, messages: Sequence[Message], *, max_tokens: int = 1024, temperature: float = 0.2
    ) -> str:
        return self.guesses[messages[-1].content]

    def stream(
        self, messages: Sequence[Message], *, max_tokens: int = 1024, temperature: float = 0.2
    ) -> Iterator[str]:
        raise AssertionError("the bench builds prompts only; no answer is asked for")

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class Setting:
    name: str
    guess: str  # none | good | poor
    keeps: int


def settings(keeps: Sequence[int]) -> list[Setting]:
    out = [Setting("plain", "none", 0)]
    for guess in ("good", "poor"):
        out += [Setting(f"{guess}-keep{k}", guess, k) for k in keeps]
    return out


def good_guess(store: Store, query: Query) -> str | None:
    """The first target's doc comment and signature, as a guess that knew the answer."""
    for target in query.targets:
        row = store.con.execute(
            "SELECT signature, coalesce(doc, '') FROM chunks WHERE path = ? AND name = ? "
            "AND part = 0 LIMIT 1",
            [target.file, target.name],
        ).fetchone()
        if row is not None:
            doc = "\n".join(f"/// {line}" for line in doc_prose(row[1]).splitlines())
            return f"{doc}\n{row[0]} {{\n  todo\n}}".strip()
    return None


def run_unit(
    db: Path, queries: list[Query], model: Any, chosen: list[Setting]
) -> list[dict[str, Any]]:
    asked = [q for q in queries if not looks_like_code(q.query)]
    rows: list[dict[str, Any]] = []
    with Store.open(db, read_only=True) as store:
        good = {q.id: good_guess(store, q) for q in asked}
        usable = [q for q in asked if good[q.id]]
        if len(usable) < 2:
            return rows
        # Another question's good guess: half the list away, so never the question's own.
        poor = {
            q.id: good[usable[(i + len(usable) // 2) % len(usable)].id]
            for i, q in enumerate(usable)
        }
        provider = FixedGuesses()
        oracle = Oracle(Searcher(store, model), provider)
        for query in usable:
            wanted = {(t.file, t.name) for t in query.targets}
            row: dict[str, Any] = {"id": query.id}
            plain_top: tuple[str, str] | None = None
            for setting in chosen:
                options = AskOptions(
                    hyde=setting.guess != "none", hyde_keeps=setting.keeps, hyde_timeout=30.0
                )
                guess = {"good": good, "poor": poor}.get(setting.guess, {}).get(query.id)
                provider.guesses = {query.query: guess or ""}
                answer = oracle.prepare(query.query, options)
                sent = [(c.hit.path, c.hit.name) for c in answer.chunks]
                if setting.guess == "none":
                    first = min(answer.chunks, key=lambda c: c.hit.rank, default=None)
                    plain_top = (first.hit.path, first.hit.name) if first else None
                row[setting.name] = {
                    "contained": any(s in wanted for s in sent),
                    "top_kept": plain_top in sent,
                    "hyde": answer.hyde,
                }
            rows.append(row)
    return rows


def summarise(rows: list[dict[str, Any]], chosen: list[Setting]) -> dict[str, Any]:
    n = max(1, len(rows))
    out: dict[str, Any] = {"queries": len(rows)}
    for s in chosen:
        cells = [r[s.name] for r in rows]
        out[s.name] = {
            "contained": sum(c["contained"] for c in cells) / n,
            "top_kept": sum(c["top_kept"] for c in cells) / n,
            "hyde_used": sum(c["hyde"] == "used" for c in cells) / n,
        }
    return out


def print_block(name: str, block: dict[str, Any], chosen: list[Setting]) -> None:
    print(f"\n{name}: {block['queries']} prose questions")
    print(f"  {'setting':<14}{'target in ctx':>14}{'plain #1 kept':>15}{'HyDE used':>11}")
    for s in chosen:
        b = block[s.name]
        print(f"  {s.name:<14}{b['contained']:>14.3f}{b['top_kept']:>15.3f}{b['hyde_used']:>11.2f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keeps", default="0,1,2,3,4,5", help="hyde_keeps values, comma-separated")
    parser.add_argument("--devcorpus", type=Path, default=DEVCORPUS)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    chosen = settings([int(k) for k in args.keeps.split(",")])
    header = (
        f"budget {AskOptions().budget} estimated tokens, {AskOptions().max_chunks} chunks at most"
    )
    return run_sets(args, chosen, run_unit, summarise, print_block, header)


if __name__ == "__main__":
    raise SystemExit(main())
