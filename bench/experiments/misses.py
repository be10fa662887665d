"""Read the misses of one retrieval configuration on the devcorpus, query by query.

    .venv/bin/python bench/experiments/misses.py --half dev --out /tmp/evalout [--worse-than 1]

For every query whose first target is not ranked first (or not above `--worse-than`), it
prints the query, its kind, the target's rank in the final list, in the dense list and in
the BM25 list, and the hits ranked above it with their kind and path. Reading these side by
side is how the priors and texts of issue 10 were chosen: patterns in what outranks the
target, not single queries, decide what is worth measuring. It reuses the indexes that
bench/eval.py built under OUT/devcorpus/ (per package) and builds any that are missing.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench.eval import DEV_QUERIES, DEVCORPUS, HALVES, devcorpus_units, unit_index  # noqa: E402
from bench.evaluation import Query  # noqa: E402
from gbr.core.embed.embedder import OnnxEmbedder  # noqa: E402
from gbr.core.embed.model_files import resolve_model_files  # noqa: E402
from gbr.core.rank.search import Ranking, Retrieval, Searcher  # noqa: E402
from gbr.core.store.facade import Store  # noqa: E402


def target_rank(query: Query, hits: list[tuple[str, str]]) -> int | None:
    wanted = {(t.file, t.name) for t in query.targets}
    return next((n for n, hit in enumerate(hits, start=1) if hit in wanted), None)


def list_rank(query: Query, retrieval_list: dict[int, tuple[float, int]], rows: dict) -> str:
    """The best rank any part of a target has in one list, or '-' when absent."""
    wanted = {(t.file, t.name) for t in query.targets}
    ranks = [
        rank
        for doc, (_, rank) in retrieval_list.items()
        if (rows[doc].path, rows[doc].name) in wanted
    ]
    return str(min(ranks)) if ranks else "-"


def report_unit(searcher: Searcher, store: Store, queries: list[Query], worse: int, k: int) -> int:
    shown = 0
    for query in queries:
        retrieval: Retrieval = searcher.retrieve(query.query, "hybrid", depth=100)
        hits = searcher.finish(query.query, retrieval, 20)
        pairs = [(h.path, h.name) for h in hits]
        rank = target_rank(query, pairs)
        if rank is not None and rank <= worse:
            continue
        shown += 1
        rows = store.chunk_rows(list({*retrieval.dense, *retrieval.bm25}))
        dense = list_rank(query, retrieval.dense, rows)
        bm25 = list_rank(query, retrieval.bm25, rows)
        target = ", ".join(f"{t.name} ({t.file})" for t in query.targets)
        print(f"\n[{query.id}] {query.kind}: {query.query}")
        print(f"  target {target}: final {rank or '>20'}, dense {dense}, bm25 {bm25}")
        for hit in hits[: min(k, (rank or k + 1) - 1)]:
            print(f"   {hit.rank:>2} {hit.score:.3f} {hit.kind:<9} {hit.name:<28} {hit.path}")
    return shown


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--devcorpus", type=Path, default=DEVCORPUS)
    parser.add_argument("--queries-dir", type=Path, default=DEV_QUERIES)
    parser.add_argument("--half", choices=HALVES, default="dev")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    parser.add_argument("--layout", choices=("per-package", "all-in-one"), default="per-package")
    parser.add_argument("--worse-than", type=int, default=1, help="show ranks above this")
    parser.add_argument("--above", type=int, default=5, help="hits shown above the target")
    args = parser.parse_args(argv)
    model = OnnxEmbedder(resolve_model_files(env=os.environ))
    shown = total = 0
    for unit in devcorpus_units(args.devcorpus, args.queries_dir, (args.half,), args.layout):
        db = unit_index(unit, "header", model, args.out)
        with Store.open(db) as store:
            searcher = Searcher(store, model, ranking=Ranking.default())
            print(f"\n===== {unit.name} ({len(unit.queries)} queries)")
            shown += report_unit(searcher, store, unit.queries, args.worse_than, args.above)
            total += len(unit.queries)
    print(f"\n{shown} of {total} queries ranked their target below {args.worse_than}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
