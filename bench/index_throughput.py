"""Index throughput: end-to-end `run_index` against the raw ONNX ceiling, plus a no-op re-index.

    .venv/bin/python bench/index_throughput.py [--chunks 3000] [--json out.json] [--profile]

Phases, all with the real OnnxEmbedder and one loaded model:

1. corpus   the example package verbatim plus renamed copies of it (`_corpus.generate_variants`)
            until the copies hold --chunks chunks; every embedded text is distinct.
2. e2e      `run_index` into a fresh DuckDB, as `index` and the daemon run it: walk, parse,
            write the chunks and FTS (searchable: `seconds_searchable`), then the vectors
            behind, checkpoint.
3. ceiling  exactly the texts run_index embedded (recorded at its `embed_batch` calls and
            checked against the DB's embed hashes) through one `model.embed_batch` call:
            tokenize + ONNX, sorted by length over the whole set. Ratio = ceiling / e2e time.
4. graph    the code graph's share of e2e: every file chunked again (one parse, as the
            parser stage does), and its graph extracted from that tree, each timed; the e2e
            run above already built and wrote the graph (it is always on).
5. no-op    duplicate packages grow the tree to --noop-files files (served from the
            embedding cache), one run indexes them, then --noop-runs runs find nothing to do.
            A no-op run parses nothing, so the graph may add nothing to it.

The machine is usually shared; "other CPU" is how busy the cores were with other processes
during a phase, as a share of all cores. High values mean the timings are pessimistic.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path
from typing import Any

import _corpus as bc

from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.store.indexing import embed_key

RATIO_TARGET = 0.85
NOOP_TARGET_S = 2.0
GRAPH_SHARE_TARGET = 0.05  # of a full index run's wall time


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--chunks",
        type=int,
        default=3000,
        help="chunks in the generated part of the corpus (default 3000)",
    )
    p.add_argument(
        "--noop-files", type=int, default=500, help=".gleam files for the no-op re-index"
    )
    p.add_argument("--noop-runs", type=int, default=3, help="timed no-op runs (median reported)")
    p.add_argument(
        "--ceiling-runs",
        type=int,
        default=1,
        help="repeat the ceiling and keep the fastest (default 1; each costs ~the e2e time)",
    )
    p.add_argument("--skip-noop", action="store_true", help="skip the no-op re-index phase")
    p.add_argument("--batch-chunks", type=int, default=None, help="IndexOptions.batch_chunks")
    p.add_argument("--parsers", type=int, default=None, help="IndexOptions.parsers")
    p.add_argument("--profile", action="store_true", help="sample all threads during e2e")
    p.add_argument(
        "--replay",
        action="store_true",
        help="also re-run the pipeline's own embed_batch calls serially, alone\n"
        "(separates batching/padding cost from concurrency cost; doubles the model time)",
    )
    p.add_argument("--workdir", type=Path, default=None, help="where to build (default: a tmp dir)")
    p.add_argument("--keep", action="store_true", help="keep the work dir afterwards")
    p.add_argument("--json", metavar="FILE", default=None, help="also write the results as JSON")
    return p.parse_args(argv)


def options(args: argparse.Namespace, root: Path, db: Path) -> IndexOptions:
    opts = IndexOptions(root=root, db=db, embed_cache=bc.shared_cache())
    if args.batch_chunks:
        opts.batch_chunks = args.batch_chunks
    if args.parsers:
        opts.parsers = args.parsers
    return opts


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results: dict[str, Any] = {"args": dict(vars(args))}
    return bc.bench_main(
        args, "gbr-bench-index-", results, lambda work: run(args, work, results), report
    )


def run(args: argparse.Namespace, work: Path, results: dict[str, Any]) -> None:
    bc.log_step("loading the model")
    model = bc.load_model()
    model.embed_batch(["fn warm_up() { Nil }"] * 4)  # first-run allocations belong to no phase
    results["model"] = {
        "id": model.model_id,
        "batch_tokens": model.batch_tokens,
        "max_batch": model.max_batch,
    }

    # ------------------------------------------------------------------ corpus
    root = work / "corpus"
    root.mkdir()
    bc.log_step("generating the corpus")
    bc.copy_example(root)
    generated = bc.generate_variants(root, args.chunks, model)
    results["corpus"] = {
        "root": str(root),
        "packages": 1 + len(generated.packages),
        "gleam_files": bc.count_gleam_files(root),
        "generated_files": generated.files,
        "generated_chunks": generated.chunks,
    }

    # --------------------------------------------------------------------- e2e
    db = work / "index.duckdb"
    bc.log_step(f"e2e: run_index over {results['corpus']['gleam_files']} files")
    bc.reset_stats(model)
    sampler = bc.StackSampler() if args.profile else None
    with (
        bc.PeakRss() as rss,
        bc.EmbedCallRecorder(model, keep_texts=True) as calls,
        sampler or contextlib.nullcontext(),
    ):
        started = time.perf_counter()
        summary = run_index(options(args, root, db), model)
        e2e_s = time.perf_counter() - started
    e2e_stats = model.stats
    with bc.open_read_only(db) as store:
        db_chunks = store.counts()["chunks"]
        db_hashes = {
            h for (h,) in store.con.execute("SELECT embed_hash FROM chunks").fetchall() if h
        }
        db_tokens = store.con.execute("SELECT sum(tokens) FROM chunks").fetchone()[0] or 0
        # The verbatim example lives under bookshelf/, everything else was generated.
        db_generated = store.con.execute(
            "SELECT count(*) FROM chunks WHERE NOT starts_with(path, 'bookshelf/')"
        ).fetchone()[0]
    results["e2e"] = {
        "seconds": e2e_s,
        "summary_seconds": summary.seconds,
        "seconds_searchable": summary.seconds_searchable,
        "chunks": summary.chunks,
        "chunks_in_db": db_chunks,
        "generated_chunks_in_db": int(db_generated),
        "chunks_embedded": summary.chunks_embedded,
        "chunks_cached": summary.chunks_cached,
        "files_indexed": summary.files_indexed,
        "files_dropped": summary.files_dropped,
        "chunks_per_s": summary.chunks / e2e_s,
        "tokens_in_db": int(db_tokens),
        "padding_real": e2e_stats.real,
        "padding_padded": e2e_stats.padded,
        "padding_waste": e2e_stats.waste,
        "embed_calls": len(calls.sizes),
        "embed_call_mean_texts": (sum(calls.sizes) / len(calls.sizes)) if calls.sizes else 0,
        "embed_call_min_texts": min(calls.sizes, default=0),
        "embed_call_max_texts": max(calls.sizes, default=0),
        "model_busy_s": calls.seconds,
        "model_busy_share": calls.seconds / e2e_s,
        "peak_rss": rss.peak,
        "rss_growth": rss.peak - rss.start_rss,
        "others_cpu": rss.others_cpu,
    }
    if sampler is not None:
        results["profile"] = {
            "thread_busy_samples": dict(sampler.busy),
            "samples": sampler.samples,
            "top": sampler.report(),
        }

    # ----------------------------------------------------------------- ceiling
    # Exactly the texts run_index embedded: recorded at its embed_batch calls, so whatever
    # the chunker and the embed format do, the ceiling runs the same inputs.
    texts = [t for batch in calls.batches for t in batch]
    if not texts:
        raise SystemExit(
            "run_index embedded nothing through model.embed_batch, so there is no ceiling "
            "to compare with; has the Embedder stage stopped calling embed_batch?"
        )
    try:
        same: bool | None = {embed_key(model.model_id, t) for t in texts} == db_hashes
    except Exception:  # embed_key changed shape: the cross-check is informative only
        same = None
    tokenize_s, token_ids = bc.timed(lambda: model.tokenize(texts))
    n_tokens = sum(len(x) for x in token_ids)
    del token_ids
    bc.log_step(f"ceiling: model.embed_batch over the same {len(texts)} texts")
    ceiling_runs: list[float] = []
    for _ in range(max(1, args.ceiling_runs)):
        bc.reset_stats(model)
        with bc.PeakRss() as rss:
            seconds, _ = bc.timed(lambda: model.embed_batch(texts))
        ceiling_runs.append(seconds)
    ceiling_s = min(ceiling_runs)  # the ceiling is the best the model can do
    ceil_stats = model.stats
    results["ceiling"] = {
        "seconds": ceiling_s,
        "runs": ceiling_runs,
        "texts": len(texts),
        "distinct_texts": len(set(texts)),
        "texts_match_db": same,
        "texts_equal_embedded": len(texts) == summary.chunks_embedded,
        "tokens_truncated": n_tokens,
        "tokenize_seconds": tokenize_s,
        "chunks_per_s": len(texts) / ceiling_s,
        "tokens_per_s": n_tokens / ceiling_s,
        "padding_real": ceil_stats.real,
        "padding_padded": ceil_stats.padded,
        "padding_waste": ceil_stats.waste,
        "peak_rss": rss.peak,
        "others_cpu": rss.others_cpu,
    }
    # Same texts in both phases, so the throughput ratio is the ratio of the times.
    results["ratio"] = ceiling_s / e2e_s

    if args.replay:
        bc.log_step(f"replay: the pipeline's {len(calls.batches)} embed_batch calls, serially")
        bc.reset_stats(model)
        replay_s, _ = bc.timed(lambda: [model.embed_batch(b) for b in calls.batches])
        results["replay"] = {
            "seconds": replay_s,
            "calls": len(calls.batches),
            "padding_waste": model.stats.waste,
            "vs_ceiling": replay_s / ceiling_s,
            "e2e_model_busy_vs_replay": results["e2e"]["model_busy_s"] / replay_s,
        }
        calls.batches.clear()

    # ------------------------------------------------------------------- graph
    bc.log_step("graph: chunking and graph extraction timed apart")
    results["graph"] = graph_cost(root, db, model, e2e_s)

    # ------------------------------------------------------------------- no-op
    if not args.skip_noop:
        made = bc.duplicate_packages(root, generated.packages, args.noop_files)
        files = bc.count_gleam_files(root)
        bc.log_step(f"no-op: indexing {len(made)} duplicate packages ({files} files in all)")
        with bc.PeakRss() as rss:
            started = time.perf_counter()
            grow = run_index(options(args, root, db), model)
            grow_s = time.perf_counter() - started
        runs: list[dict[str, Any]] = []
        for i in range(max(1, args.noop_runs)):
            bc.log_step(f"no-op: run {i + 1}/{args.noop_runs}")
            noop_sampler = bc.StackSampler(0.005) if args.profile else None
            with noop_sampler or contextlib.nullcontext():
                started = time.perf_counter()
                again = run_index(options(args, root, db), model)
                noop_s = time.perf_counter() - started
            if noop_sampler is not None:
                results["noop_profile"] = {
                    "thread_busy_samples": dict(noop_sampler.busy),
                    "samples": noop_sampler.samples,
                    "top": noop_sampler.report(20),
                }
            runs.append(
                {
                    "seconds": noop_s,
                    "files_seen": again.files_seen,
                    "files_unchanged": again.files_unchanged,
                    "files_indexed": again.files_indexed,
                    "files_dropped": again.files_dropped,
                    "chunks_embedded": again.chunks_embedded,
                }
            )
        with bc.open_read_only(db) as store:
            total_chunks = store.counts()["chunks"]
        fts_s = bc.time_fts_refresh(db)
        results["noop"] = {
            "gleam_files": files,
            "chunks_in_db": total_chunks,
            "cached_run_seconds": grow.seconds,
            "cached_run_wall": grow_s,
            "cached_run_files_indexed": grow.files_indexed,
            "cached_run_chunks_embedded": grow.chunks_embedded,
            "cached_run_chunks_cached": grow.chunks_cached,
            "cached_run_peak_rss": rss.peak,
            "runs": runs,
            "median_seconds": bc.median([r["seconds"] for r in runs]),
            "first_seconds": runs[0]["seconds"],
            "fts_refresh_seconds": fts_s,
        }
    results["max_rss"] = bc.ru_maxrss_bytes()
    results["checks"] = checks(results)


def graph_cost(root: Path, db: Path, model: Any, e2e_s: float) -> dict[str, Any]:
    """Seconds spent chunking every file, extracting its graph from the same tree, and
    writing its graph rows (into a scratch in-memory DuckDB, as the store's hook does)."""
    import duckdb

    from gbr.core.graph import store as graph_tables
    from gbr.core.graph.extract import extract_file_graph
    from gbr.core.parse.chunker import ChunkLimits, chunk_file, new_parser
    from gbr.core.parse.walker import FoundFile, WalkOptions, read_file, walk
    from gbr.core.records import SourceFile

    parser, limits = new_parser(), ChunkLimits()
    scratch = duckdb.connect(":memory:")
    scratch.execute("CREATE TABLE files(content_hash VARCHAR)")
    graph_tables.prepare(scratch, {}, wiped=True)
    chunk_s = extract_s = write_s = 0.0
    refs = files = 0
    for found in walk(root, WalkOptions()):
        source = read_file(found) if isinstance(found, FoundFile) else found
        if not isinstance(source, SourceFile):
            continue
        trees: list[Any] = []
        started = time.perf_counter()
        chunk_file(source, parser, model.count_tokens, limits, on_tree=trees.append)
        middle = time.perf_counter()
        graph = extract_file_graph(source, trees[0], parser) if trees else None
        extracted = time.perf_counter()
        graph_tables.replace(scratch, source.path, graph)
        chunk_s += middle - started
        extract_s += extracted - middle
        write_s += time.perf_counter() - extracted
        refs += len(graph.references) if graph else 0
        files += 1
    with bc.open_read_only(db) as store:
        rows = {
            t: store.con.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("graph_symbols", "graph_imports", "graph_refs")
        }
    return {
        "files": files,
        "chunk_seconds": chunk_s,
        "extract_seconds": extract_s,
        "write_seconds": write_s,
        "references_extracted": refs,
        "rows_in_db": rows,
        "share_of_e2e": (extract_s + write_s) / e2e_s,
    }


def checks(r: dict[str, Any]) -> list[dict[str, Any]]:
    out = [
        {
            "name": "e2e / ceiling chunks/s",
            "value": r["ratio"],
            "target": f">= {RATIO_TARGET}",
            "ok": r["ratio"] >= RATIO_TARGET,
        },
        {
            "name": "ceiling texts == texts embedded by run_index",
            "value": r["ceiling"]["texts_equal_embedded"] and r["ceiling"]["texts_match_db"],
            "target": "True",
            "ok": bool(r["ceiling"]["texts_equal_embedded"] and r["ceiling"]["texts_match_db"]),
        },
        {
            "name": "generated corpus chunks",
            "value": r["e2e"]["generated_chunks_in_db"],
            "target": f">= {r['args']['chunks']}",
            "ok": r["e2e"]["generated_chunks_in_db"] >= r["args"]["chunks"],
        },
    ]
    if "graph" in r:
        g = r["graph"]
        out.append(
            {
                "name": "graph extraction + writes, % of e2e wall",
                "value": 100 * g["share_of_e2e"],
                "target": f"<= {100 * GRAPH_SHARE_TARGET:g}%",
                "ok": g["share_of_e2e"] <= GRAPH_SHARE_TARGET and g["rows_in_db"]["graph_refs"] > 0,
            }
        )
    if "noop" in r:
        n = r["noop"]
        out.append(
            {
                "name": f"no-op re-index ({n['gleam_files']} files)",
                "value": n["median_seconds"],
                "target": f"<= {NOOP_TARGET_S} s",
                "ok": n["median_seconds"] <= NOOP_TARGET_S and n["gleam_files"] >= 500,
            }
        )
        out.append(
            {
                "name": "no-op embeds and indexes nothing",
                "value": all(x["chunks_embedded"] == 0 for x in n["runs"]),
                "target": "True",
                "ok": all(x["chunks_embedded"] == 0 and x["files_indexed"] == 0 for x in n["runs"]),
            }
        )
    return out


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def report(r: dict[str, Any]) -> None:
    if "checks" not in r:
        return
    c, e, k = r["corpus"], r["e2e"], r["ceiling"]
    rows: list[list[Any]] = []

    def row(phase: str, metric: str, value: Any) -> None:
        rows.append([phase, metric, value, "", ""])

    row("corpus", "packages / .gleam files", f"{c['packages']} / {c['gleam_files']}")
    row("corpus", "chunks indexed (example + generated)", e["chunks"])
    row("corpus", "  generated, as indexed", e["generated_chunks_in_db"])
    row("corpus", "  generated, as the bench's chunker count", c["generated_chunks"])
    row("corpus", "embedded texts / distinct", f"{k['texts']} / {k['distinct_texts']}")
    row("corpus", "tokens embedded", k["tokens_truncated"])
    row("e2e", "run_index wall", f"{e['seconds']:.1f} s")
    row("e2e", "chunks/s", f"{e['chunks_per_s']:.1f}")
    row("e2e", "files indexed / dropped", f"{e['files_indexed']} / {e['files_dropped']}")
    row("e2e", "padding waste", pct(e["padding_waste"]))
    row(
        "e2e",
        "embed_batch calls (texts min/mean/max)",
        f"{e['embed_calls']} ({e['embed_call_min_texts']}/"
        f"{e['embed_call_mean_texts']:.0f}/{e['embed_call_max_texts']})",
    )
    row("e2e", "model busy (embed_batch time / wall)", pct(e["model_busy_share"]))
    row("e2e", "peak RSS", bc.mb(e["peak_rss"]))
    row("e2e", "other processes' CPU", pct(e["others_cpu"]))
    row(
        "ceiling",
        "embed_batch wall (tokenize + ONNX)",
        ", ".join(f"{x:.1f} s" for x in k["runs"]),
    )
    row("ceiling", "chunks/s", f"{k['chunks_per_s']:.1f}")
    row("ceiling", "tokens/s", f"{k['tokens_per_s']:.0f}")
    row("ceiling", "tokenize alone", f"{k['tokenize_seconds']:.2f} s")
    row("ceiling", "padding waste", pct(k["padding_waste"]))
    row("ceiling", "peak RSS", bc.mb(k["peak_rss"]))
    row("ceiling", "other processes' CPU", pct(k["others_cpu"]))
    if "replay" in r:
        p = r["replay"]
        row("replay", "pipeline's batches, serially alone", f"{p['seconds']:.1f} s")
        row("replay", "  / ceiling (batching + padding cost)", f"{p['vs_ceiling']:.2f} x")
        row("replay", "  padding waste", pct(p["padding_waste"]))
        row(
            "replay",
            "e2e embed_batch time / replay (concurrency)",
            f"{p['e2e_model_busy_vs_replay']:.2f} x",
        )
    if "graph" in r:
        g = r["graph"]
        row("graph", "chunk_file, all files (one parse each)", f"{g['chunk_seconds']:.2f} s")
        row("graph", "graph extraction from those trees", f"{g['extract_seconds']:.2f} s")
        row("graph", "graph rows written (scratch DuckDB)", f"{g['write_seconds']:.2f} s")
        row(
            "graph",
            "rows: symbols / imports / refs",
            " / ".join(str(v) for v in g["rows_in_db"].values()),
        )
    if "noop" in r:
        n = r["noop"]
        row("no-op", ".gleam files / chunks", f"{n['gleam_files']} / {n['chunks_in_db']}")
        row("no-op", "cached run (new files, vectors from cache)", f"{n['cached_run_wall']:.1f} s")
        row(
            "no-op",
            "  its files indexed / chunks embedded",
            f"{n['cached_run_files_indexed']} / {n['cached_run_chunks_embedded']}",
        )
        row("no-op", "runs", ", ".join(f"{x['seconds']:.2f} s" for x in n["runs"]))
        row("no-op", "  refresh_fulltext alone (once)", f"{n['fts_refresh_seconds']:.2f} s")
    row("process", "max RSS (ru_maxrss)", bc.mb(r["max_rss"]))
    for check in r["checks"]:
        value = check["value"]
        if isinstance(value, float):
            value = f"{value:.2f}" + (" s" if "s" in check["target"].split()[-1] else "")
        rows.append(["TARGET", check["name"], value, check["target"], bc.status(check["ok"])])
    m = r["machine"]
    bc.print_table(
        f"index throughput  (model {r['model']['id']}, {m['cpus']} CPUs, load avg "
        f"{m['load_average_at_start']} -> {m['load_average_at_end']})",
        ["phase", "metric", "value", "target", "result"],
        rows,
    )
    noisy = [
        f"{phase} {pct(r[phase]['others_cpu'])}"
        for phase in ("e2e", "ceiling")
        if (r[phase]["others_cpu"] or 0.0) > bc.NOISY_OTHERS_CPU
    ]
    if noisy:
        print(
            f"WARNING: other processes kept the CPUs busy ({', '.join(noisy)}); the ratio "
            "compares phases that ran under different load. Re-run on a quiet machine."
        )
    for key, title in (("profile", "e2e"), ("noop_profile", "last no-op run")):
        if key not in r:
            continue
        p = r[key]
        busy = ", ".join(f"{k} {v}" for k, v in sorted(p["thread_busy_samples"].items()))
        bc.print_table(
            f"{title} hot spots (share of busy thread-samples; {p['samples']} ticks; {busy})",
            ["function", "total", "self"],
            [[x["function"], pct(x["total_share"]), pct(x["self_share"])] for x in p["top"]],
        )


if __name__ == "__main__":
    sys.exit(main())
