"""Retrieval quality on a labelled query set: every mode and variant, overall and per kind.

    .venv/bin/python bench/eval.py                       # bookshelf, its dev queries
    .venv/bin/python bench/eval.py --corpus examples \\
        --queries bench/queries/bookshelf.jsonl --queries bench/queries/relay.jsonl
    .venv/bin/python bench/eval.py --variants hybrid,bm25 --json out.json --png out.png

The corpus is indexed through the real pipeline into bench/out/ (incremental, so a second
run only pays for the queries). Variants that change what is indexed (the embedded text,
the BM25 text or tokenizer) get their own index file or a rebuilt full-text index.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gbr.actors.pipeline import IndexOptions, run_index  # noqa: E402
from gbr.core.chunk_text import search_text  # noqa: E402
from gbr.core.embedder import OnnxEmbedder  # noqa: E402
from gbr.core.evaluation import QUERY_KINDS, Query, Scores, load_queries, score  # noqa: E402
from gbr.core.model_files import resolve_model_files  # noqa: E402
from gbr.core.records import Chunk  # noqa: E402
from gbr.core.rerank import Reranker, load_reranker  # noqa: E402
from gbr.core.search import Fusion, Mode, Searcher  # noqa: E402
from gbr.core.store import FtsConfig, Store  # noqa: E402


@dataclass(frozen=True)
class Variant:
    """One retrieval configuration to score."""

    name: str
    mode: Mode
    embed_format: str = "header"
    search_text: str = "weighted"
    fts: FtsConfig = field(default_factory=FtsConfig)
    fusion: Fusion = field(default_factory=Fusion)
    reranker: Reranker | None = None  # reorders the top RERANK_CANDIDATES hybrid hits
    note: str = ""


RERANK_CANDIDATES = 30


PLAIN_RRF = Fusion(method="rrf", alpha=0.5, code_alpha=0.5, rrf_k=60, depth=50)
VARIANTS: list[Variant] = [
    Variant("dense", "dense", note="code with a module/name/signature header"),
    Variant("dense-plain", "dense", embed_format="plain", note="raw code only"),
    Variant("bm25", "bm25", note="weighted search text, porter, stop words, code tokens"),
    Variant("bm25-plain-text", "bm25", search_text="plain", note="body identifiers only"),
    Variant("bm25-nostem", "bm25", fts=FtsConfig(stemmer="none"), note="no stemmer"),
    Variant("bm25-nostop", "bm25", fts=FtsConfig(stopwords="none"), note="no stop words"),
    Variant(
        "bm25-prose-tokens",
        "bm25",
        fts=FtsConfig(ignore=r"(\.|[^a-z])+"),
        note="DuckDB default tokenizer",
    ),
    Variant(
        "hybrid-plain-inputs",
        "hybrid",
        embed_format="plain",
        search_text="plain",
        fusion=PLAIN_RRF,
        note="plain RRF over un-enriched texts (the peer baseline)",
    ),
    Variant("rrf", "hybrid", fusion=PLAIN_RRF, note="plain RRF, k=60, depth 50"),
    Variant("rrf-k10", "hybrid", fusion=replace(PLAIN_RRF, rrf_k=10), note="RRF k=10"),
    Variant("rrf-k30", "hybrid", fusion=replace(PLAIN_RRF, rrf_k=30), note="RRF k=30"),
    Variant("rrf-depth20", "hybrid", fusion=replace(PLAIN_RRF, depth=20), note="20 each"),
    Variant("rrf-depth100", "hybrid", fusion=replace(PLAIN_RRF, depth=100), note="100 each"),
    Variant(
        "rrf-dense2x",
        "hybrid",
        fusion=replace(PLAIN_RRF, alpha=2 / 3, code_alpha=2 / 3),
        note="weighted RRF, dense weight twice BM25's",
    ),
    Variant(
        "rrf-bm25-1.5x",
        "hybrid",
        fusion=replace(PLAIN_RRF, alpha=0.4, code_alpha=0.4),
        note="weighted RRF, BM25 weight 1.5x dense's",
    ),
    Variant(
        "rrf-aware",
        "hybrid",
        fusion=replace(PLAIN_RRF, alpha=0.6, code_alpha=1 / 3),
        note="identifiers: BM25 x2; sentences: dense x1.5",
    ),
    Variant("cc-0.5", "hybrid", fusion=Fusion(alpha=0.5, code_alpha=0.5), note="convex, equal"),
    Variant("cc-0.7", "hybrid", fusion=Fusion(alpha=0.7, code_alpha=0.7), note="convex, 0.7 dense"),
    Variant("cc-0.8", "hybrid", fusion=Fusion(alpha=0.8, code_alpha=0.8), note="convex, 0.8 dense"),
    Variant(
        "cc-0.8-aware",
        "hybrid",
        fusion=Fusion(alpha=0.8, code_alpha=0.5),
        note="convex 0.8, identifiers 0.5",
    ),
    Variant("cc-aware-depth20", "hybrid", fusion=Fusion(depth=20), note="default with 20 each"),
    Variant("cc-aware-depth100", "hybrid", fusion=Fusion(depth=100), note="default with 100 each"),
    Variant("hybrid", "hybrid", note="the shipped default: convex 0.7, identifiers 0.5"),
]


@dataclass
class Corpus:
    root: Path
    queries: list[Query]


def load_corpus(root: Path, query_files: list[Path]) -> Corpus:
    """Queries name files relative to their package; re-root them in a multi-package tree."""
    queries: list[Query] = []
    for path in query_files:
        package = path.stem
        prefix = f"{package}/" if (root / package / "gleam.toml").is_file() else ""
        queries += load_queries(path, prefix)
    return Corpus(root.resolve(), queries)


def index_for(corpus: Corpus, embed_format: str, model: OnnxEmbedder, out: Path) -> Path:
    tag = hashlib.sha1(str(corpus.root).encode()).hexdigest()[:8]
    db = out / f"eval-{corpus.root.name}-{tag}-{embed_format}.duckdb"
    summary = run_index(IndexOptions(root=corpus.root, db=db, embed_format=embed_format), model)
    print(
        f"indexed {corpus.root.name} [{embed_format}]: {summary.chunks} new chunks, "
        f"{summary.files_unchanged} files unchanged, {summary.seconds:.1f} s",
        file=sys.stderr,
    )
    return db


def rebuild_search_text(store: Store, variant: str) -> None:
    """Rewrite search_text for every chunk, so BM25 variants need no re-embedding."""
    cur = store.con.execute(
        "SELECT id, path, module, package, kind, name, signature, visibility, start_line, "
        "end_line, part, parts, doc, text, header FROM chunks"
    )
    cols = [d[0] for d in cur.description]
    rows = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    updates = []
    for row in rows:
        chunk_id = row.pop("id")
        updates.append((search_text(Chunk(**row), variant), chunk_id))
    store.con.executemany("UPDATE chunks SET search_text = ? WHERE id = ?", updates)


def run_variant(
    variant: Variant, corpus: Corpus, dbs: dict[str, Path], model: OnnxEmbedder, k: int = 10
) -> tuple[list[tuple[Query, list[tuple[str, str]]]], float]:
    with Store.open(dbs[variant.embed_format]) as store:
        rebuild_search_text(store, variant.search_text)
        store.refresh_fulltext(variant.fts)
        searcher = Searcher(store, model, variant.fusion)
        results = []
        started = time.perf_counter()
        for query in corpus.queries:
            if variant.reranker is None:
                hits = searcher.search(query.query, k=k, mode=variant.mode)
            else:
                pool = searcher.search(query.query, k=RERANK_CANDIDATES, mode=variant.mode)
                hits = variant.reranker.rerank(query.query, pool)[:k]
            results.append((query, [(h.path, h.name) for h in hits]))
        per_query = (time.perf_counter() - started) / max(1, len(corpus.queries))
        # Leave the index as the pipeline writes it.
        rebuild_search_text(store, "weighted")
        store.refresh_fulltext()
    return results, per_query


def by_kind(results: list[tuple[Query, list[tuple[str, str]]]]) -> dict[str, Scores]:
    groups: dict[str, list[tuple[Query, list[tuple[str, str]]]]] = defaultdict(list)
    for item in results:
        groups[item[0].kind].append(item)
    return {kind: score(items) for kind, items in sorted(groups.items())}


def print_table(report: dict[str, Any], kinds: list[str]) -> None:
    header = f"{'variant':<22}{'R@1':>7}{'R@5':>7}{'R@10':>7}{'MRR@10':>8}{'P@5':>7}{'ms/q':>7}"
    header += "".join(f"  R@5 {k:<10}" for k in kinds)
    print(header)
    print("-" * len(header))
    for name, row in report["variants"].items():
        s = row["overall"]
        line = (
            f"{name:<22}{s['R@1']:>7.3f}{s['R@5']:>7.3f}{s['R@10']:>7.3f}{s['MRR@10']:>8.3f}"
            f"{s['P@5']:>7.3f}{row['ms_per_query']:>7.1f}"
        )
        line += "".join(f"  {row['by_kind'].get(k, {}).get('R@5', 0.0):<14.3f}" for k in kinds)
        print(line)


def write_png(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["variants"])
    metrics = ["R@1", "R@5", "R@10", "MRR@10"]
    fig, ax = plt.subplots(figsize=(max(8, len(names) * 0.9), 4.8))
    width = 0.8 / len(metrics)
    for i, metric in enumerate(metrics):
        values = [report["variants"][n]["overall"][metric] for n in names]
        ax.bar([x + i * width for x in range(len(names))], values, width, label=metric)
    ax.set_xticks([x + 0.4 - width / 2 for x in range(len(names))], names, rotation=35, ha="right")
    ax.set_ylim(0, 1)
    ax.set_ylabel("score")
    ax.set_title(f"gbr retrieval on {report['corpus']} ({report['queries']} queries)")
    ax.legend(ncols=len(metrics), loc="lower right")
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def evaluate(
    corpus: Corpus,
    variants: list[Variant],
    model: OnnxEmbedder,
    out: Path,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    dbs = {fmt: index_for(corpus, fmt, model, out) for fmt in {v.embed_format for v in variants}}
    report: dict[str, Any] = {
        "corpus": corpus.root.name,
        "queries": len(corpus.queries),
        "variants": {},
    }
    for variant in variants:
        progress(variant.name)
        results, per_query = run_variant(variant, corpus, dbs, model)
        report["variants"][variant.name] = {
            "mode": variant.mode,
            "note": variant.note,
            "ms_per_query": round(per_query * 1000, 2),
            "overall": score(results).as_dict(),
            "by_kind": {k: s.as_dict() for k, s in by_kind(results).items()},
            "misses": [
                q.id
                for q, hits in results
                if not any((t.file, t.name) in hits[:5] for t in q.targets)
            ],
        }
    return report


def rerank_variant(spec: str) -> Variant:
    """hybrid, then the top 30 reordered by the reranker that `spec` names."""
    llm = None
    if spec == "llm":
        from gbr.core.llm import get_provider

        llm = get_provider()
    reranker = load_reranker(spec, llm)
    assert reranker is not None, f"{spec} names no reranker"
    return Variant(f"hybrid+{spec.split(':')[0]}", "hybrid", reranker=reranker, note=reranker.name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, default=REPO / "examples" / "bookshelf")
    parser.add_argument("--queries", type=Path, action="append")
    parser.add_argument("--variants", default="all", help="comma-separated names, or all")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    parser.add_argument("--json", type=Path, help="write the figures as JSON here")
    parser.add_argument("--png", type=Path, help="bar chart [default: OUT/eval-CORPUS.png]")
    parser.add_argument(
        "--rerank",
        action="append",
        default=[],
        metavar="SPEC",
        help="add a variant reranking the top 30 hybrid hits: llm (the configured provider)\n"
        "or cross-encoder:DIR; repeatable",
    )
    args = parser.parse_args(argv)

    query_files = args.queries or [REPO / "bench" / "queries" / "bookshelf.jsonl"]
    corpus = load_corpus(args.corpus, query_files)
    wanted = {n.strip() for n in args.variants.split(",")} if args.variants != "all" else None
    variants = [v for v in VARIANTS if wanted is None or v.name in wanted]
    unknown = (wanted or set()) - {v.name for v in VARIANTS}
    if unknown:
        parser.error(f"unknown variants: {', '.join(sorted(unknown))}")
    variants += [rerank_variant(spec) for spec in args.rerank]
    model = OnnxEmbedder(resolve_model_files())
    args.out.mkdir(parents=True, exist_ok=True)
    report = evaluate(corpus, variants, model, args.out, lambda n: print(f"  {n}", file=sys.stderr))
    kinds = [k for k in QUERY_KINDS if any(q.kind == k for q in corpus.queries)]
    print(f"\n{report['corpus']}: {report['queries']} queries")
    print_table(report, kinds)
    png = args.png or args.out / f"eval-{report['corpus']}.png"
    write_png(report, png)
    print(f"\nchart: {png}")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
        print(f"json: {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
