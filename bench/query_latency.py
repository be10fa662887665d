"""Query latency: warm in-process search at 10k and 100k chunks, and one cold CLI search.

    .venv/bin/python bench/query_latency.py [--sizes 10000,100000] [--json out.json] [--profile]

The example package is indexed once for real (real vectors, real BM25 text). Each size is
then a copy of that index whose chunk rows are replicated in DuckDB up to the target count:
every copy gets its own path prefix (`copy00042/src/...`, so hits do not collapse into one)
and its vector gets Gaussian noise and is re-normalised (so cosine scores differ). The
full-text index is rebuilt with `Store.refresh_fulltext()`.

Replicated search texts are a pessimistic case for BM25: every term's posting list grows
with the copies, where a real corpus of that size would spread over a larger vocabulary.

Warm: one `Searcher` (model loaded, vectors mapped from the index's vector file when this
gbr has one, else in memory) runs every query in every mode; the modes are interleaved per
query so that machine noise falls on all of them alike. Ranking check: every query in every
mode through the vector file against the vectors read from DuckDB, same hits in the same
order and scores within SCORE_TOLERANCE.
Cold: `gleambrctl search QUERY --db DB` as a subprocess, wall time. The first run after the
index was built (which writes the vector file, as `gleambrctl index` would have) is reported
apart; the median is over the --cli-runs after it.

Before/after in one sitting: run this script with PYTHONPATH pointing at each checkout
(the script adapts to a gbr without a vector file), alternately.

Graph: the code graph's rows are copied with the chunks (paths and the package's own
modules prefixed per copy; external targets such as `gleam/list.map` are shared, so their
reference lists grow with the copies). `refs`, `callers` and `callees` (depth 2) run warm
through one GraphReader on the base's most referenced names, fully qualified.
"""

from __future__ import annotations

import argparse
import cProfile
import inspect
import io
import pstats
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _corpus as bc
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.rank.priors import Priors
from gbr.core.rank.search import Ranking, Searcher
from gbr.core.records import MODES
from gbr.core.store.facade import Store

HYBRID_P50_TARGET_MS = 50.0
GRAPH_P50_TARGET_MS = 50.0
GRAPH_NAMES = 15  # the base's most referenced targets, asked by every graph question
TARGET_SIZE = 10_000
# Issue 14 (item 3): by size, warm hybrid p50 (ms) and cold CLI median (s).
HYBRID_TARGETS_MS = {10_000: HYBRID_P50_TARGET_MS, 100_000: 20.0, 1_000_000: 100.0}
COLD_TARGETS_S = {10_000: 0.5, 1_000_000: 1.0}
# Issue 29 (item 3): warm hybrid p50 (ms) with the reranker on.
RERANKED_TARGETS_MS = {10_000: 40.0, 100_000: 60.0}
SCORE_TOLERANCE = 1e-5

# Natural-language questions and bare identifiers, as people type them at a code search box.
QUERIES = [
    "check that an ISBN is valid",
    "convert an ISBN-10 to ISBN-13",
    "route an HTTP request to its handler",
    "how are overdue fines calculated",
    "cap the fine at a maximum amount",
    "decode a JSON body into a book draft",
    "encode a member as JSON",
    "parse a date in ISO format",
    "find a book by its ISBN in the catalog",
    "suggest titles when the search has a typo",
    "levenshtein edit distance between two strings",
    "wrap text to a line width",
    "turn a title into a URL slug",
    "members with unpaid fines cannot borrow",
    "renew a loan and extend its due date",
    "skip days when the library is closed",
    "read configuration from environment variables",
    "default port and host for the server",
    "paginate a list of results",
    "report of overdue loans grouped by member",
    "inventory report by genre",
    "worker process that handles messages",
    "reserve a book and join the waiting queue",
    "cancel a reservation",
    "return a borrowed book",
    "error response with a status code",
    "random identifier for a new loan",
    "log a request with its method and path",
    "normalise user input by removing hyphens and spaces",
    "capitalise each word in a title",
    "validate_isbn13",
    "isbn10_check_digit",
    "calculate_fine",
    "handle_request",
    "encode_book",
    "parse_iso_date",
    "word_wrap",
    "levenshtein",
    "next_open_day",
    "borrow_request_decoder",
    "MemberId",
    "LoanError",
    "Catalog",
    "BorrowBlock",
    "max_loans_premium",
    "fine_cap_cents",
    "get_by_isbn",
    "title_case",
    "from_env",
    "overdue_report",
]
CLI_QUERY = "check that an ISBN is valid"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--sizes", default="10000,100000", help="chunk counts, comma separated (default 10k,100k)"
    )
    p.add_argument("--queries", type=int, default=len(QUERIES), help="queries per mode")
    p.add_argument(
        "--rounds",
        type=int,
        default=3,
        help="passes over the queries (default 3); p50/p95 pool all of them",
    )
    p.add_argument("-k", type=int, default=10, help="hits per search (default 10, as the CLI)")
    p.add_argument("--cli-runs", type=int, default=3, help="cold CLI runs per size (median)")
    p.add_argument(
        "--cli-sizes",
        default="all",
        help="sizes for the cold CLI ('all', or a comma list; the target is at 10k)",
    )
    p.add_argument("--noise", type=float, default=0.3, help="relative noise norm on copied vectors")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--profile", action="store_true", help="cProfile the warm hybrid queries")
    p.add_argument(
        "--compare-priors",
        action="store_true",
        help="also time hybrid with the priors before issue 10's round two, interleaved",
    )
    p.add_argument("--workdir", type=Path, default=None, help="where to build (default: a tmp dir)")
    p.add_argument("--keep", action="store_true", help="keep the work dir (and its indexes)")
    p.add_argument(
        "--reuse",
        action="store_true",
        help="with --workdir: reuse an index of a size already built there (for before/after)",
    )
    p.add_argument(
        "--postings",
        choices=("memory", "sql"),
        default="memory",
        help="warm BM25 from postings held in memory, as the daemon, MCP and chat do "
        "(default), or from DuckDB each time, as a one-query command does",
    )
    p.add_argument(
        "--reranker",
        metavar="SPEC",
        default=None,
        help="also time hybrid then a cross-encoder, interleaved: xe:DIR:N:W[:LEN] "
        "(bench/eval.py's mixed_cross_encoder)",
    )
    p.add_argument("--json", metavar="FILE", default=None, help="also write the results as JSON")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    results: dict[str, Any] = {"args": dict(vars(args)), "sizes": {}}
    return bc.bench_main(
        args, "gbr-bench-query-", results, lambda work: run(args, sizes, work, results), report
    )


def run(args: argparse.Namespace, sizes: list[int], work: Path, results: dict[str, Any]) -> None:
    bc.log_step("loading the model")
    model = bc.load_model()
    model.embed_batch(["warm up"])
    base = work / "base.duckdb"
    if not (args.reuse and base.is_file()):
        base.unlink(missing_ok=True)
        bc.log_step("indexing the example package for real")
        summary = run_index(
            IndexOptions(root=bc.EXAMPLE, db=base, embed_cache=bc.shared_cache()), model
        )
        bc.open_read_only(base).close()  # waits until the pipeline has closed the file
        results["base"] = {"chunks": summary.chunks, "seconds": summary.seconds}
    results["vector_file"] = MAPPED
    queries = (QUERIES * (args.queries // len(QUERIES) + 1))[: args.queries]
    results["queries"] = len(queries)
    cli_sizes = (
        sizes if args.cli_sizes == "all" else [int(s) for s in args.cli_sizes.split(",") if s]
    )
    rng = np.random.default_rng(args.seed)
    for size in sizes:
        db = work / f"index_{size}.duckdb"
        if args.reuse and db.is_file():
            bc.log_step(f"{size}: reusing {db.name}")
            build = built(db)
        else:
            bc.log_step(f"{size}: replicating the base's chunks")
            build = replicate(base, db, size, args.noise, rng)
        build["vector_file_seconds"] = write_vector_file(db)
        bc.log_step(f"{size}: {len(queries)} queries x {len(MODES)} modes, warm")
        entry: dict[str, Any] = {"build": build, **warm(db, model, queries, args)}
        if MAPPED:
            bc.log_step(f"{size}: ranking through the vector file against DuckDB's vectors")
            entry["ranking"] = same_ranking(db, model, queries, args.k)
        bc.log_step(f"{size}: refs / callers / callees, warm")
        entry["graph"] = warm_graph(db, args.rounds)
        if size in cli_sizes:
            bc.log_step(f"{size}: cold CLI x {args.cli_runs}")
            entry["cli"] = cold_cli(db, args.cli_runs)
        results["sizes"][str(size)] = entry
    results["checks"] = checks(results)


# ------------------------------------------------------------------------------- building


def replicate(
    base: Path, db: Path, size: int, noise: float, rng: np.random.Generator
) -> dict[str, Any]:
    """Copy the base index and grow its chunks table to `size` rows, then rebuild FTS."""
    shutil.copyfile(base, db)
    started = time.perf_counter()
    with Store.open(db) as store:
        con = store.con
        rows = con.execute("SELECT * EXCLUDE (id) FROM chunks ORDER BY id").to_arrow_table()
        n0 = rows.num_rows
        extra = max(0, size - n0)
        emb = rows.column("embedding").combine_chunks()
        dim = emb.type.list_size
        vectors = emb.flatten().to_numpy(zero_copy_only=False).reshape(-1, dim)
        step = 20_000  # rows per INSERT, to keep the Arrow copies small
        for lo in range(0, extra, step):
            n = min(step, extra - lo)
            pos = np.arange(lo, lo + n)
            src = pos % n0
            copy_no = pos // n0 + 1
            part = rows.take(pa.array(src))
            prefixes = pa.array([f"copy{c:05d}/" for c in copy_no], type=pa.string())
            part = part.set_column(
                part.schema.get_field_index("path"),
                "path",
                pc.binary_join_element_wise(prefixes, part.column("path"), ""),
            )
            noisy = vectors[src] + rng.normal(0.0, noise / np.sqrt(dim), (n, dim))
            noisy /= np.linalg.norm(noisy, axis=1, keepdims=True)
            flat = pa.array(noisy.astype(np.float32).ravel())
            part = part.set_column(
                part.schema.get_field_index("embedding"),
                "embedding",
                pa.FixedSizeListArray.from_arrays(flat, dim),
            )
            con.register("replica", part)
            try:
                con.execute("INSERT INTO chunks SELECT nextval('chunk_ids'), * FROM replica")
            finally:
                con.unregister("replica")
        copies = (extra + n0 - 1) // n0 if n0 else 0
        # One files row per copied file, so `gleambrctl status` tells the same story.
        con.execute(
            "INSERT INTO files SELECT f.* REPLACE (p.prefix || f.path AS path) FROM files f, "
            "(SELECT printf('copy%05d/', range) AS prefix FROM range(1, ?)) p "
            "WHERE f.status = 'ok'",
            [copies + 1],
        )
        _replicate_graph(con, copies)
        replicate_s = time.perf_counter() - started
        fts_s, _ = bc.timed(store.refresh_fulltext)
        checkpoint_s, _ = bc.timed(store.checkpoint)
        chunks = store.counts()["chunks"]
    return {
        "chunks": chunks,
        "copies": copies,
        "replicate_seconds": replicate_s,
        "fts_seconds": fts_s,
        "checkpoint_seconds": checkpoint_s,
        "db_bytes": db.stat().st_size,
    }


def built(db: Path) -> dict[str, Any]:
    """What `replicate` reports, for an index reused from an earlier run (times unknown)."""
    with bc.open_read_only(db) as store:
        chunks = store.counts()["chunks"]
    nan = float("nan")
    return {
        "chunks": chunks,
        "copies": None,
        "replicate_seconds": nan,
        "fts_seconds": nan,
        "checkpoint_seconds": nan,
        "db_bytes": db.stat().st_size,
    }


# Whether this gbr keeps the vectors in a file beside the index (issue 14); the bench also
# runs against a checkout from before it, for before/after figures in one sitting.
MAPPED = "vector_file" in inspect.signature(Searcher).parameters
# Whether this gbr's searcher can hold BM25's postings in memory, as the daemon's does.
HELD = "postings_budget" in inspect.signature(Searcher).parameters


def vector_file_of(db: Path) -> Path | None:
    if not MAPPED:
        return None
    from gbr.core.store.vector_file import file_for

    return file_for(db)


def write_vector_file(db: Path) -> float | None:
    """Write the index's vector file from scratch, as `gleambrctl index` does after a run
    that found no file to carry rows from; its time. None for a gbr without one."""
    file = vector_file_of(db)
    if file is None:
        return None
    file.unlink(missing_ok=True)
    with bc.open_read_only(db) as store:
        seconds, _ = bc.timed(lambda: store.refresh_vectors(file))
    return seconds


def same_ranking(db: Path, model: Any, queries: list[str], k: int) -> dict[str, Any]:
    """Through the vector file against the vectors read from DuckDB: each query's dense list
    (ids, order, scores: the part the file serves), then its hits in every mode.

    Before issue 32 (item 14), BM25 summed its terms in parallel, so its scores varied in
    the last bits from run to run and copies with tied scores swapped (replicated indexes
    are full of ties): at 100k chunks, 8-14 of the 50 queries' top-150 BM25 lists changed
    over five runs, and now and then a search here (1 of 150) differed for that alone. gbr
    now rounds BM25 scores and orders ties by the chunk's place in the tree, so any search
    that differs is unexplained. For a gbr from before (this bench runs older checkouts
    too), a search whose hits differ is counted as explained when its BM25 list differs
    between runs too: in five more runs, or already between the two searchers' BM25-only
    searches, which read no vector.
    """
    from gbr.core.parse.chunk_text import code_words

    differ: list[str] = []
    unexplained: list[str] = []
    dense_differ: list[str] = []
    gap = 0.0
    depth = max(50, k * 3)
    with bc.open_read_only(db) as store:
        plain = Searcher(store, model)
        mapped = Searcher(store, model, vector_file=vector_file_of(db))  # type: ignore[call-arg]

        jittery: set[str] = set()

        def jitters(q: str) -> bool:
            if q in jittery:  # already shown: no need to rerun BM25 five times
                return True
            runs = {tuple(store.bm25(code_words(q), depth)) for _ in range(5)}
            if len(runs) > 1:
                jittery.add(q)
            return q in jittery

        for q in queries:
            want, got = dict(plain.dense(q, depth)), mapped.dense(q, depth)
            if list(want) != [doc for doc, _ in got]:
                dense_differ.append(q)
            gap = max([gap] + [abs(want[doc] - score) for doc, score in got if doc in want])
            changed = [
                mode
                for mode in MODES
                if [(h.path, h.name, h.start_line) for h in plain.search(q, k=k, mode=mode)]
                != [(h.path, h.name, h.start_line) for h in mapped.search(q, k=k, mode=mode)]
            ]
            if "bm25" in changed:
                jittery.add(q)
            for mode in changed:
                differ.append(f"{mode}: {q}")
                if mode == "dense" or not jitters(q):
                    unexplained.append(f"{mode}: {q}")
        # Whether BM25 itself gives one list every time (see the docstring).
        unstable = sum(
            len({tuple(store.bm25(code_words(q), depth)) for _ in range(5)}) > 1 for q in queries
        )
    return {
        "searches": len(queries) * len(MODES),
        "bm25_lists_unstable": unstable,
        "dense_lists_differ": dense_differ,
        "differ": differ,
        "unexplained": unexplained,
        "max_score_gap": gap,
        "ok": not dense_differ and not unexplained and gap <= SCORE_TOLERANCE,
    }


def _replicate_graph(con: Any, copies: int) -> None:
    """Copy the base's graph rows once per chunk copy, as `copy00001/` files and modules."""
    own = "(SELECT DISTINCT module FROM graph_symbols WHERE NOT starts_with(path, 'copy'))"
    prefixes = "(SELECT printf('copy%05d/', range) AS prefix FROM range(1, ?)) p"

    def moved(column: str) -> str:
        return f"CASE WHEN {column} IN {own} THEN p.prefix || {column} ELSE {column} END"

    for table, extra in (
        ("graph_symbols", "p.prefix || t.module AS module"),
        (
            "graph_imports",
            f"p.prefix || t.module_from AS module_from, {moved('t.module')} AS module",
        ),
        (
            "graph_refs",
            "p.prefix || t.module_from AS module_from, "
            f"{moved('t.target_module')} AS target_module",
        ),
    ):
        con.execute(
            f"INSERT INTO {table} SELECT t.* REPLACE (p.prefix || t.path AS path, {extra}) "
            f"FROM (SELECT * FROM {table} WHERE NOT starts_with(path, 'copy')) t, {prefixes}",
            [copies + 1],
        )


def warm_graph(db: Path, rounds: int) -> dict[str, Any]:
    """p50/p95 of refs, callers and callees (depth 2) on the most referenced names."""
    from gbr.core.graph.store import GraphReader

    with bc.open_read_only(db) as store:
        names = [
            f"{m}.{n}"
            for m, n, _ in store.con.execute(
                "SELECT target_module, target_name, count(*) AS c FROM graph_refs "
                "WHERE NOT starts_with(path, 'copy') GROUP BY ALL ORDER BY c DESC, 1, 2 LIMIT ?",
                [GRAPH_NAMES],
            ).fetchall()
        ]
        reader = GraphReader(store)
        questions = {
            "refs": reader.refs,
            "callers": lambda n: reader.callers(n, 2),
            "callees": lambda n: reader.callees(n, 2),
        }
        for ask in questions.values():  # first calls: DuckDB plans the queries
            ask(names[0])
        times: dict[str, list[float]] = {q: [] for q in questions}
        for _ in range(max(1, rounds)):
            for name in names:
                for q, ask in questions.items():
                    started = time.perf_counter()
                    ask(name)
                    times[q].append((time.perf_counter() - started) * 1000)
        rows = store.con.execute("SELECT count(*) FROM graph_refs").fetchone()[0]
    return {
        "names": names,
        "graph_refs_rows": rows,
        **{
            q: {"p50_ms": bc.percentile(v, 50), "p95_ms": bc.percentile(v, 95), "max_ms": max(v)}
            for q, v in times.items()
        },
    }


# -------------------------------------------------------------------------------- warm


# The ranking stage before round two of issue 10's priors, for --compare-priors.
PRIORS_BEFORE = Ranking(priors=Priors(tests="demote", aside=0.3, type_lean=1.3))


def warm(db: Path, model: Any, queries: list[str], args: argparse.Namespace) -> dict[str, Any]:
    with bc.open_read_only(db) as store:
        file = vector_file_of(db)
        extra: dict[str, Any] = {"vector_file": file} if file else {}
        if HELD and args.postings == "memory":
            from gbr.core.store.postings_memory import SERVING_BUDGET

            extra["postings_budget"] = SERVING_BUDGET  # as the daemon's searcher
        searcher = Searcher(store, model, **extra)
        load_s, _ = bc.timed(searcher.reload)
        postings_s, held = bc.timed(
            lambda: HELD and args.postings == "memory" and searcher.postings_in_memory(600)
        )
        # (label, searcher, mode): every label is timed on every query, interleaved.
        runs = [(mode, searcher, mode) for mode in MODES]
        if getattr(args, "compare_priors", False):
            before = Searcher(store, model, ranking=PRIORS_BEFORE)
            before.reload()
            runs.append(("hybrid@priors-before", before, "hybrid"))
        reranked = _Reranked(searcher, args.reranker) if args.reranker else None
        if reranked is not None:
            runs.append(("hybrid+reranker", reranked, "hybrid"))
        labels = [label for label, _, _ in runs]
        for _, who, mode in runs:  # first calls: DuckDB plans the FTS macro, NumPy pages in
            for q in queries[:3]:
                who.search(q, k=args.k, mode=mode)
        latencies: dict[str, list[float]] = {m: [] for m in labels}
        hits: dict[str, int] = {m: 0 for m in labels}
        round_p50: dict[str, list[float]] = {m: [] for m in labels}
        with bc.PeakRss() as rss:
            for _ in range(max(1, args.rounds)):
                this_round: dict[str, list[float]] = {m: [] for m in labels}
                for q in queries:
                    for label, who, mode in runs:
                        started = time.perf_counter()
                        found = who.search(q, k=args.k, mode=mode)
                        this_round[label].append((time.perf_counter() - started) * 1000)
                        hits[label] += bool(found)
                for mode, values in this_round.items():
                    latencies[mode] += values
                    round_p50[mode].append(bc.percentile(values, 50))
        parts = hybrid_parts(searcher, queries, args.k)
        profile = profile_hybrid(searcher, queries, args.k) if args.profile else None
    out: dict[str, Any] = {
        "vector_load_seconds": load_s,
        "postings_held": bool(held),
        "postings_load_seconds": postings_s if held else None,
        "peak_rss": rss.peak,
        "others_cpu": rss.others_cpu,
        "modes": {
            m: {
                "p50_ms": bc.percentile(v, 50),
                "p95_ms": bc.percentile(v, 95),
                "mean_ms": sum(v) / len(v),
                "max_ms": max(v),
                "round_p50_ms": round_p50[m],
                "best_round_p50_ms": min(round_p50[m]),
                "searches": len(v),
                "queries_with_hits": hits[m],
            }
            for m, v in latencies.items()
        },
        "hybrid_parts_p50_ms": parts,
    }
    if profile is not None:
        out["profile"] = profile
    if reranked is not None:
        alone = reranked.reranker.timings_ms
        out["reranker"] = {
            "spec": args.reranker,
            "name": reranked.reranker.name,
            "model_p50_ms": bc.percentile(alone, 50) if alone else None,
            "model_p95_ms": bc.percentile(alone, 95) if alone else None,
            "questions_reranked": len(alone),
        }
    return out


class _Reranked:
    """A searcher whose hybrid hits then pass through a cross-encoder (issue 29, item 3);
    identifiers and verbatim phrases keep the first order, so they cost nothing more."""

    def __init__(self, searcher: Searcher, spec: str) -> None:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from bench.eval import mixed_cross_encoder

        self.searcher = searcher
        self.reranker = mixed_cross_encoder(spec)[1]

    def search(self, query: str, k: int, mode: str) -> list[Any]:
        hits = self.searcher.search(query, k=max(k, self.reranker.n), mode=mode)  # type: ignore[arg-type]
        return self.reranker.rerank(query, hits)[:k]


def hybrid_parts(searcher: Searcher, queries: list[str], k: int) -> dict[str, float] | None:
    """Where a hybrid search spends its time: query embedding, cosine, BM25, fuse + fetch.

    Re-does the steps of `Searcher.search` from gbr's building blocks, so it reaches into
    a few internals; if they have moved, the breakdown is skipped rather than the bench.
    """
    from gbr.core.rank.search import rrf, top_k_cosine

    try:
        fusion = getattr(searcher, "fusion", None)
        depth = max(getattr(fusion, "depth", None) or getattr(searcher, "candidates", 50), k * 3)
        collapse = getattr(searcher, "collapse", None) or searcher._collapse  # type: ignore[attr-defined]
        ids, matrix = searcher._vectors()  # type: ignore[attr-defined]
        t: dict[str, list[float]] = {"embed": [], "cosine": [], "bm25": [], "fuse+collapse": []}
        for q in queries:
            t0 = time.perf_counter()
            vector = searcher.embedder.embed_batch([q])[0]
            t1 = time.perf_counter()
            idx, _ = top_k_cosine(matrix, vector, depth)
            dense = [int(ids[i]) for i in idx]
            t2 = time.perf_counter()
            # The searcher's own BM25: from held postings when it has them, as a daemon's.
            sparse = [doc for doc, _ in searcher.bm25(q, depth)]
            t3 = time.perf_counter()
            collapse(rrf({"dense": dense, "bm25": sparse}), k)
            t4 = time.perf_counter()
            for key, dt in zip(t, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
                t[key].append(dt * 1000)
    except Exception as exc:  # the breakdown is a diagnostic, never a reason to fail
        bc.log_step(f"skipping the hybrid breakdown: {type(exc).__name__}: {exc}")
        return None
    return {key: bc.percentile(v, 50) for key, v in t.items()}


def profile_hybrid(searcher: Searcher, queries: list[str], k: int) -> list[dict[str, Any]]:
    prof = cProfile.Profile()
    prof.enable()
    for q in queries:
        searcher.search(q, k=k, mode="hybrid")
    prof.disable()
    stats = pstats.Stats(prof, stream=io.StringIO())
    total = max(stats.total_tt, 1e-9)  # type: ignore[attr-defined]
    rows = []
    for (path, line, name), (_, _, tt, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
        label = f"{Path(path).name}:{line}({name})" if line else name
        rows.append({"function": label, "self_share": tt / total, "total_share": ct / total})
    rows.sort(key=lambda r: -r["self_share"])
    return rows[:12]


# ---------------------------------------------------------------------------------- cold


def cold_cli(db: Path, runs: int) -> dict[str, Any]:
    """The first run apart (it may keep the ONNX graph, or build a missing vector file),
    then the median of `runs` more."""
    cmd = [bc.gleambrctl(), "search", CLI_QUERY, "--db", str(db)]
    times = []
    for _ in range(max(1, runs) + 1):
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - started)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    started = time.perf_counter()
    subprocess.run([bc.gleambrctl(), "--help"], capture_output=True, check=False)
    help_s = time.perf_counter() - started
    return {
        "first_seconds": times[0],
        "runs": times[1:],
        "median_seconds": bc.median(times[1:]),
        "help_seconds": help_s,
    }


# ------------------------------------------------------------------------------- report


def checks(r: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def check(name: str, value: float, limit: float, unit: str) -> None:
        target = f"<= {limit:g} {unit}"
        out.append({"name": name, "value": value, "target": target, "ok": value <= limit})

    for size, entry in r["sizes"].items():
        label = _size_label(size)
        hybrid = HYBRID_TARGETS_MS.get(int(size))
        if hybrid is not None:
            check(f"warm hybrid p50 @ {label}", entry["modes"]["hybrid"]["p50_ms"], hybrid, "ms")
        reranked = RERANKED_TARGETS_MS.get(int(size))
        if reranked is not None and "hybrid+reranker" in entry["modes"]:
            value = entry["modes"]["hybrid+reranker"]["p50_ms"]
            check(f"warm hybrid+reranker p50 @ {label}", value, reranked, "ms")
        if int(size) == TARGET_SIZE:
            for q in ("refs", "callers"):
                value = entry["graph"][q]["p50_ms"]
                check(f"warm {q} p50 @ {label}", value, GRAPH_P50_TARGET_MS, "ms")
        cold = COLD_TARGETS_S.get(int(size))
        if cold is not None and "cli" in entry:
            check(f"cold CLI search @ {label} (median)", entry["cli"]["median_seconds"], cold, "s")
        if "ranking" in entry:
            ranking = entry["ranking"]
            out.append(
                {
                    "name": f"same ranking through the vector file @ {label} "
                    f"(dense lists: {len(ranking['dense_lists_differ'])} differ; searches: "
                    f"{len(ranking['differ'])} of {ranking['searches']} differ, "
                    f"{len(ranking['unexplained'])} not by BM25's own jitter on ties; "
                    f"BM25 lists that vary over 5 runs: {ranking['bm25_lists_unstable']} "
                    f"of {ranking['searches'] // len(MODES)})",
                    "value": ranking["max_score_gap"],
                    "target": f"dense score gap <= {SCORE_TOLERANCE:g}, none unexplained",
                    "ok": ranking["ok"],
                }
            )
    return out


def _size_label(size: str) -> str:
    n = int(size)
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


def report(r: dict[str, Any]) -> None:
    if "checks" not in r:
        return
    m = r["machine"]
    rows: list[list[Any]] = []
    for size, e in r["sizes"].items():
        label = _size_label(size)
        for mode, s in e["modes"].items():
            target = result = ""
            limit = HYBRID_TARGETS_MS.get(int(size))
            if mode == "hybrid" and limit is not None:
                target = f"p50 <= {limit:g} ms"
                result = bc.status(s["p50_ms"] <= limit)
            rows.append(
                [
                    label,
                    f"warm {mode}",
                    f"{s['p50_ms']:.1f} ms",
                    f"{s['p95_ms']:.1f} ms",
                    f"{s['max_ms']:.1f} ms",
                    f"{s['best_round_p50_ms']:.1f} ms",
                    target,
                    result,
                ]
            )
        for q in ("refs", "callers", "callees"):
            g = e["graph"][q]
            target = result = ""
            if q != "callees" and int(size) == TARGET_SIZE:
                target = f"p50 <= {GRAPH_P50_TARGET_MS:g} ms"
                result = bc.status(g["p50_ms"] <= GRAPH_P50_TARGET_MS)
            rows.append(
                [
                    label,
                    f"warm {q}" + (" (depth 2)" if q != "refs" else ""),
                    f"{g['p50_ms']:.1f} ms",
                    f"{g['p95_ms']:.1f} ms",
                    f"{g['max_ms']:.1f} ms",
                    "",
                    target,
                    result,
                ]
            )
        if "cli" in e:
            c = e["cli"]
            target = result = ""
            cold = COLD_TARGETS_S.get(int(size))
            if cold is not None:
                target = f"median <= {cold:g} s"
                result = bc.status(c["median_seconds"] <= cold)
            rows.append(
                [
                    label,
                    "cold CLI search",
                    f"{c['median_seconds']:.2f} s",
                    "",
                    f"{max(c['runs']):.2f} s",
                    f"min {min(c['runs']):.2f} s",
                    target,
                    result,
                ]
            )
            if "first_seconds" in c:
                rows.append(
                    [label, "cold CLI, first run", f"{c['first_seconds']:.2f} s"] + [""] * 5
                )
    bc.print_table(
        f"query latency  ({r['queries']} queries x {r['args']['rounds']} rounds per mode, "
        f"k={r['args']['k']}, {m['cpus']} CPUs, "
        f"load avg "
        f"{m['load_average_at_start']} -> {m['load_average_at_end']})",
        ["size", "what", "p50 / median", "p95", "max", "best-round p50", "target", "result"],
        rows,
    )
    detail: list[list[Any]] = []
    for size, e in r["sizes"].items():
        b, parts = e["build"], e["hybrid_parts_p50_ms"] or {}
        detail.append(
            [
                _size_label(size),
                b["chunks"],
                f"{b['replicate_seconds']:.1f} s",
                f"{b['fts_seconds']:.1f} s",
                bc.mb(b["db_bytes"]),
                f"{e['vector_load_seconds']:.2f} s",
                "sql" if not e.get("postings_held") else f"{e['postings_load_seconds']:.2f} s",
                "n/a"
                if b.get("vector_file_seconds") is None
                else f"{b['vector_file_seconds']:.2f} s",
                " / ".join(f"{parts[k]:.1f}" for k in parts) or "n/a",
                f"{e['cli']['help_seconds']:.2f} s" if "cli" in e else "",
                bc.mb(e["peak_rss"]),
                "n/a" if e["others_cpu"] is None else f"{100 * e['others_cpu']:.0f}%",
            ]
        )
    bc.print_table(
        "indexes and where hybrid time goes",
        [
            "size",
            "chunks",
            "replicate",
            "FTS build",
            "db file",
            "vectors load",
            "postings load",
            "vector file write",
            "hybrid p50 ms: embed / cosine / bm25 / fuse+collapse",
            "CLI --help",
            "peak RSS",
            "other CPU",
        ],
        detail,
    )
    for size, e in r["sizes"].items():
        if "profile" not in e:
            continue
        bc.print_table(
            f"cProfile of warm hybrid queries @ {_size_label(size)} (by self time)",
            ["function", "self", "total"],
            [
                [x["function"], f"{100 * x['self_share']:.1f}%", f"{100 * x['total_share']:.1f}%"]
                for x in e["profile"]
            ],
        )
    busy = [
        f"{_size_label(size)} {100 * e['others_cpu']:.0f}%"
        for size, e in r["sizes"].items()
        if (e["others_cpu"] or 0.0) > bc.NOISY_OTHERS_CPU
    ]
    if busy:
        print(
            f"WARNING: other processes kept the CPUs busy during the warm runs ({', '.join(busy)}"
            "); latencies are inflated. Best-round p50 is the closest to a quiet machine."
        )
    print()
    for c in r["checks"]:
        value = f"{c['value']:.2g}" if "ranking" in c["name"] else f"{c['value']:.2f}"
        unit = "" if "ranking" in c["name"] else " ms" if "ms" in c["target"] else " s"
        print(f"{bc.status(c['ok'])}  {c['name']}: {value}{unit} (target {c['target']})")


if __name__ == "__main__":
    sys.exit(main())
