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
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.evaluation import (  # noqa: E402
    QUERY_KINDS,
    Query,
    Scores,
    bootstrap_interval,
    load_queries,
    per_query,
    score,
)
from gbr.actors.pipeline import IndexOptions, run_index  # noqa: E402
from gbr.core.embed.cache_config import cache_config  # noqa: E402
from gbr.core.embed.embedder import OnnxEmbedder  # noqa: E402
from gbr.core.embed.model_files import resolve_model_files  # noqa: E402
from gbr.core.parse.chunk_text import search_text  # noqa: E402
from gbr.core.rank.priors import Priors  # noqa: E402
from gbr.core.rank.ranker import SILVER_RANKER_PATH, load_ranker  # noqa: E402
from gbr.core.rank.rerank import (  # noqa: E402
    CrossEncoderReranker,
    Reranker,
    load_reranker,
    passage_text,
)
from gbr.core.rank.search import (  # noqa: E402
    NO_RANKING,
    Fusion,
    Ranking,
    Searcher,
    worth_a_second,
)
from gbr.core.rank.second_opinion import mixed  # noqa: E402
from gbr.core.records import (  # noqa: E402
    Chunk,
    Hit,
    Mode,
)
from gbr.core.store import test_words  # noqa: E402
from gbr.core.store.facade import Store  # noqa: E402
from gbr.core.store.fulltext import FtsConfig  # noqa: E402


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
    ranking: Ranking = NO_RANKING  # priors and learned ranker after fusion
    note: str = ""


RERANK_CANDIDATES = 30


_SHIPPED_PRIORS = Ranking.default().priors
# Priors tried after the dev-half miss analysis, each on top of the shipped ones.
ROUND_TWO: dict[str, Priors] = {
    "p+literal1.5": replace(_SHIPPED_PRIORS, literal=1.5),
    "p+literal3": replace(_SHIPPED_PRIORS, literal=3.0),
    "p+howtotype0.85": replace(_SHIPPED_PRIORS, howto_type=0.85),
    "p+howtotype0.7": replace(_SHIPPED_PRIORS, howto_type=0.7),
    "p+howtotype0.5": replace(_SHIPPED_PRIORS, howto_type=0.5),
    "p+widetypes": replace(_SHIPPED_PRIORS, wide_types=True),
    "p+widetypes1.6": replace(_SHIPPED_PRIORS, wide_types=True, type_lean=1.6),
    "p+all": replace(_SHIPPED_PRIORS, literal=2.0, howto_type=0.7, wide_types=True),
    "p+all1.6": replace(
        _SHIPPED_PRIORS, literal=2.0, howto_type=0.7, wide_types=True, type_lean=1.6
    ),
}

# Issue 13: the code graph's centrality (references from other definitions) as a prior.
GRAPH_PRIORS: dict[str, Priors] = {
    **{f"p+central{f}": replace(_SHIPPED_PRIORS, central=f) for f in (1.1, 1.2, 1.4, 1.7)},
    **{
        f"p+pagerank{f}": replace(_SHIPPED_PRIORS, central=f, central_by="pagerank")
        for f in (1.05, 1.1, 1.2, 1.4)
    },
}


def learned_variants(shipped: Ranking) -> list[Variant]:
    """Issue 29: the shipped ranking with a combination learned on the silver train split in
    place of the half-and-half mix, one per file bench/experiments/train_silver_ranker.py
    wrote (ranker-silver.json is `learned`, ranker-silver-all.json `learned-all`)."""
    out = []
    for path in sorted(SILVER_RANKER_PATH.parent.glob(f"{SILVER_RANKER_PATH.stem}*.json")):
        name = "learned" + path.stem.removeprefix(SILVER_RANKER_PATH.stem)  # learned-all, ...
        ranking = replace(shipped, ranker=load_ranker(path))
        out.append(Variant(name, "hybrid", ranking=ranking, note=f"{path.name}: silver train"))
    return out


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
    Variant("hybrid-raw", "hybrid", note="the default fusion, no priors, no ranker"),
    Variant(
        "hybrid",
        "hybrid",
        ranking=Ranking.default(),
        note="the shipped default: fusion and priors (GBR_RANKER adds the learned ranker)",
    ),
    Variant(
        "hybrid+ranker",
        "hybrid",
        ranking=Ranking(priors=Ranking.default().priors, ranker=load_ranker()),
        note="the default plus the learned ranker (GBR_RANKER=on)",
    ),
    *[
        Variant(name, "hybrid", ranking=Ranking(priors=prior), note="priors round two")
        for name, prior in ROUND_TWO.items()
    ],
    Variant(
        "hybrid-first",
        "hybrid",
        ranking=replace(Ranking.default(), second=None),
        note="the default without the second opinion",
    ),
    *learned_variants(Ranking.default()),
    Variant(
        "hybrid-prose-text",
        "hybrid",
        search_text="prose-weighted",
        ranking=Ranking.default(),
        note="the default, BM25 over doc prose and code without /// lines",
    ),
    Variant(
        "hybrid-nostem",
        "hybrid",
        fts=FtsConfig(stemmer="none"),
        ranking=Ranking.default(),
        note="the default, BM25 without a stemmer",
    ),
    *[
        Variant(
            f"hybrid-prosetype{f}",
            "hybrid",
            ranking=Ranking(priors=replace(_SHIPPED_PRIORS, prose_type=f)),
            note="the default, type chunks x f for prose questions",
        )
        for f in (0.85, 0.7)
    ],
    *[
        Variant(name, "hybrid", ranking=Ranking(priors=prior), note="graph centrality prior")
        for name, prior in GRAPH_PRIORS.items()
    ],
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
    summary = run_index(
        IndexOptions(
            root=corpus.root,
            db=db,
            embed_format=embed_format,
            embed_cache=cache_config(os.environ),
            test_words=test_words.from_env(os.environ),
        ),
        model,
    )
    print(
        f"indexed {corpus.root.name} [{embed_format}]: {summary.chunks} new chunks, "
        f"{summary.files_unchanged} files unchanged, {summary.seconds:.1f} s",
        file=sys.stderr,
    )
    return db


def rebuild_search_text(store: Store, variant: str) -> None:
    """Rewrite search_text for every chunk, so BM25 variants need no re-embedding; the
    words tests lend (GBR_TEST_WORDS) stay at its end."""
    cur = store.con.execute(
        "SELECT id, search_text AS was, path, module, package, kind, name, signature, "
        "visibility, start_line, end_line, part, parts, doc, text, header FROM chunks"
    )
    cols = [d[0] for d in cur.description]
    rows = [dict(zip(cols, r, strict=True)) for r in cur.fetchall()]
    updates = []
    for row in rows:
        chunk_id, was = row.pop("id"), row.pop("was")
        lent = was[len(test_words.own_text(was)) :]
        updates.append((search_text(Chunk(**row), variant) + lent, chunk_id))
    store.con.executemany("UPDATE chunks SET search_text = ? WHERE id = ?", updates)


class MemoEmbedder:
    """The model with its query vectors remembered: every variant asks the same questions."""

    def __init__(self, model: OnnxEmbedder) -> None:
        self.model = model
        self.model_id = getattr(model, "model_id", "")
        self._memo: dict[str, Any] = {}

    def embed_batch(self, texts: list[str]) -> Any:
        import numpy as np

        missing = [t for t in texts if t not in self._memo]
        if missing:
            for text, vector in zip(missing, self.model.embed_batch(missing), strict=True):
                self._memo[text] = vector
        return np.stack([self._memo[t] for t in texts])

    def __getattr__(self, name: str) -> Any:
        return getattr(self.model, name)


Results = list[tuple[Query, list[tuple[str, str]]]]


def run_variant(
    variant: Variant,
    corpus: Corpus,
    dbs: dict[str, Path],
    model: Any,
    k: int = 10,
) -> tuple[Results, float]:
    with Store.open(dbs[variant.embed_format]) as store:
        # Variants on the indexed text rewrite it, and put the pipeline's back afterwards.
        custom_text = variant.search_text != "weighted" or variant.fts != FtsConfig()
        if custom_text:
            rebuild_search_text(store, variant.search_text)
            store.refresh_fulltext(variant.fts, test_words.from_env(os.environ))
        searcher = Searcher(store, model, variant.fusion, variant.ranking)
        results = []
        started = time.perf_counter()
        for query in corpus.queries:
            if variant.reranker is None:
                hits = searcher.search(query.query, k=k, mode=variant.mode)
            elif isinstance(variant.reranker, MixedCrossEncoder):
                # Every such variant reorders the same shipped pool: searched once per run.
                key = (str(dbs[variant.embed_format]), query.query)
                if key not in _POOLS:
                    _POOLS[key] = searcher.search(query.query, RERANK_CANDIDATES, variant.mode)
                pool = _POOLS[key]
                hits = variant.reranker.rerank(query.query, pool)[:k]
            else:
                pool = searcher.search(query.query, k=RERANK_CANDIDATES, mode=variant.mode)
                hits = variant.reranker.rerank(query.query, pool)[:k]
            results.append((query, [(h.path, h.name) for h in hits]))
        each = (time.perf_counter() - started) / max(1, len(corpus.queries))
        if custom_text:
            rebuild_search_text(store, "weighted")
            store.refresh_fulltext(lend=test_words.from_env(os.environ))
    return results, each


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
        results, seconds = run_variant(variant, corpus, dbs, model)
        rows = per_query(results)
        report["variants"][variant.name] = {
            "mode": variant.mode,
            "note": variant.note,
            "ms_per_query": round(seconds * 1000, 2),
            "overall": score(results).as_dict(),
            "interval95": bootstrap_interval(rows),
            "per_query": {
                q.id: [round(float(x), 4) for x in row]
                for (q, _), row in zip(results, rows, strict=True)
            },
            "by_kind": {k: s.as_dict() for k, s in by_kind(results).items()},
            "misses": [
                q.id
                for q, hits in results
                if not any((t.file, t.name) in hits[:5] for t in q.targets)
            ],
        }
    return report


# --- devcorpus: real packages written by others, one index per package and one for all ---

DEVCORPUS = REPO.parent / "shared" / "devcorpus"
DEV_QUERIES = REPO / "bench" / "queries" / "devcorpus"
# Defaults are chosen on this half only; the other half is reported as held out.
DEV_HALF = frozenset(
    {
        "gleam-community__maths",
        "gleam-lang__packages",
        "TanklesXL__glint",
        "lpil__pog",
        "gleam-lang__regexp",
        "rawhat__glisten",
        "bcpeinhardt__simplifile",
    }
)
HALVES = ("dev", "held")
LAYOUTS = ("per-package", "all-in-one")


def half_of(package: str) -> str:
    return "dev" if package in DEV_HALF else "held"


@dataclass
class Unit:
    """One index and the queries asked of it; `packages[i]` owns `queries[i]`."""

    name: str
    root: Path
    queries: list[Query]
    packages: list[str]


def devcorpus_units(
    root: Path, queries_dir: Path, halves: tuple[str, ...], layout: str
) -> list[Unit]:
    """Per package: the repository folder alone, as the held-out benchmark indexes it.
    All-in-one: the whole devcorpus in one index, target files re-rooted under their folder.
    """
    files = sorted(f for f in queries_dir.glob("*.jsonl") if half_of(f.stem) in halves)
    missing = [f.stem for f in files if not (root / f.stem).is_dir()]
    if missing:
        raise SystemExit(f"no folder {root}/{missing[0]} for {missing[0]}.jsonl")
    return units_of(root, {f.stem: partial(load_queries, f) for f in files}, layout)


def units_of(
    root: Path, packages: Mapping[str, Callable[[], list[Query]]], layout: str
) -> list[Unit]:
    """`packages` maps each folder under `root` to its queries (files relative to the
    folder). Per package: the folder alone; all-in-one: `root` in one index, with the
    target files re-rooted under their folder."""
    units = []
    for name, load in packages.items():
        queries = load()
        if layout == "all-in-one":
            queries = [reroot(q, f"{name}/") for q in queries]
        units.append(Unit(name, root / name, queries, [name] * len(queries)))
    if layout == "per-package":
        return units
    return [
        Unit(
            "ALL",
            root,
            [q for u in units for q in u.queries],
            [p for u in units for p in u.packages],
        )
    ]


def reroot(query: Query, prefix: str) -> Query:
    targets = tuple(replace(t, file=prefix + t.file) for t in query.targets)
    return replace(query, targets=targets)


def unit_index(
    unit: Unit, embed_format: str, model: Any, out: Path, folder: str = "devcorpus"
) -> Path:
    db = out / folder / f"{unit.name}-{embed_format}.duckdb"
    db.parent.mkdir(parents=True, exist_ok=True)
    summary = run_index(
        IndexOptions(
            root=unit.root,
            db=db,
            embed_format=embed_format,
            embed_cache=cache_config(os.environ),
            test_words=test_words.from_env(os.environ),
        ),
        model,
    )
    if summary.chunks:
        print(f"indexed {unit.name} [{embed_format}]: {summary.chunks} chunks", file=sys.stderr)
    return db


def evaluate_devcorpus(
    root: Path,
    queries_dir: Path,
    halves: tuple[str, ...],
    layouts: tuple[str, ...],
    variants: list[Variant],
    model: Any,
    out: Path,
) -> dict[str, Any]:
    """Every variant on every unit; scores pooled per half, per kind and per package."""
    memo = MemoEmbedder(model)
    report: dict[str, Any] = {"corpus": "devcorpus", "layouts": {}}
    for layout in layouts:
        units = devcorpus_units(root, queries_dir, halves, layout)
        per_half: dict[str, dict[str, Any]] = {h: {} for h in halves}
        for variant in variants:
            print(f"  {layout} {variant.name}", file=sys.stderr)
            tagged, seconds = run_units(units, variant, model, memo, out)
            for half in halves:
                mine = [(pkg, q, h) for pkg, q, h in tagged if half_of(pkg) == half]
                if mine:
                    per_half[half][variant.name] = summarise(variant, mine, seconds / len(tagged))
        report["layouts"][layout] = {
            h: {"queries": _count(v), "variants": v} for h, v in per_half.items() if v
        }
    return report


Tagged = list[tuple[str, Query, list[tuple[str, str]]]]


def run_units(
    units: list[Unit],
    variant: Variant,
    model: Any,
    memo: MemoEmbedder,
    out: Path,
    folder: str = "devcorpus",
) -> tuple[Tagged, float]:
    """One variant over every unit (each indexed first, incrementally): the hits of every
    query tagged with its package, and the seconds spent searching."""
    tagged: Tagged = []
    seconds = 0.0
    for unit in units:
        db = unit_index(unit, variant.embed_format, model, out, folder)
        corpus = Corpus(unit.root, unit.queries)
        results, each = run_variant(variant, corpus, {variant.embed_format: db}, memo)
        seconds += each * len(results)
        tagged += [(pkg, q, h) for pkg, (q, h) in zip(unit.packages, results, strict=True)]
    return tagged, seconds


def _count(variants: dict[str, Any]) -> int:
    return next(iter(variants.values()))["overall"]["n"] if variants else 0


def summarise(variant: Variant, tagged: Tagged, seconds: float) -> dict[str, Any]:
    """eval's figures of one variant; `seconds`: the search time per query."""
    results = [(q, h) for _, q, h in tagged]
    packages: dict[str, Results] = defaultdict(list)
    for pkg, q, h in tagged:
        packages[pkg].append((q, h))
    per_package = {pkg: score(items).as_dict() for pkg, items in sorted(packages.items())}
    rows = per_query(results)
    return {
        "mode": variant.mode,
        "note": variant.note,
        "ms_per_query": round(seconds * 1000, 2),
        "overall": score(results).as_dict(),
        # 95 % bootstrap over queries, and each query's METRICS row, so that two runs can be
        # compared query by query (paired differences).
        "interval95": bootstrap_interval(rows),
        "per_query": {
            f"{pkg}:{q.id}": [round(float(x), 4) for x in row]
            for (pkg, q, _), row in zip(tagged, rows, strict=True)
        },
        "by_kind": {k: s.as_dict() for k, s in by_kind(results).items()},
        "per_package": per_package,
        "worst_package": {m: min(s[m] for s in per_package.values()) for m in ("R@5", "MRR@10")},
        "misses": [
            f"{pkg}:{q.id}"
            for pkg, q, hits in tagged
            if not any((t.file, t.name) in hits[:5] for t in q.targets)
        ],
    }


def print_devcorpus(report: dict[str, Any]) -> None:
    for layout, halves in report["layouts"].items():
        for half, block in halves.items():
            print(f"\ndevcorpus {layout}, {half} half: {block['queries']} queries")
            kinds = sorted({k for row in block["variants"].values() for k in row["by_kind"]})
            print_table(block, [k for k in QUERY_KINDS if k in kinds])
            print_per_package(block)


def print_per_package(block: dict[str, Any]) -> None:
    """R@5/MRR@10 per package, one row per variant."""
    first = next(iter(block["variants"].values()))
    packages = list(first["per_package"])
    if len(packages) < 2:
        return
    short = [p.split("__")[-1][:11] for p in packages]
    header = f"{'R@5/MRR per package':<22}" + "".join(f"{s:>12}" for s in short) + f"{'worst':>12}"
    print(header)
    for name, row in block["variants"].items():
        cells = "".join(
            f"{row['per_package'][p]['R@5']:>6.2f}/{row['per_package'][p]['MRR@10']:<5.2f}"
            for p in packages
        )
        worst = row["worst_package"]
        print(f"{name:<22}{cells}{worst['R@5']:>6.2f}/{worst['MRR@10']:<5.2f}")


def rerank_variant(spec: str) -> Variant:
    """hybrid, then the top 30 reordered by the reranker that `spec` names."""
    llm = None
    if spec == "llm":
        from gbr.core.llm import get_provider

        llm = get_provider(env=os.environ)
    reranker = load_reranker(spec, llm, os.environ)
    assert reranker is not None, f"{spec} names no reranker"
    return Variant(f"hybrid+{spec.split(':')[0]}", "hybrid", reranker=reranker, note=reranker.name)


class MixedCrossEncoder:
    """Issue 29: a cross-encoder over the shipped order's top `n`, its logits mixed with the
    order's own scores as the second opinion mixes (each scaled 0-1 over the pool, `weight`
    to the cross-encoder; 1.0 is its order alone). Questions the second opinion stands aside
    for (an identifier, a verbatim phrase) keep the shipped order, for the same reason."""

    def __init__(
        self,
        model: CrossEncoderReranker,
        n: int,
        weight: float,
        memo: dict[tuple[str, str], float] | None = None,
    ) -> None:
        """`memo`: logits kept by (question, passage), shared by variants of one model, so
        that scoring the same run's variants with other N or W costs no model time."""
        self.model = model
        self.n = n
        self.weight = weight
        self.memo = memo
        self.name = f"{model.name} top {n}, weight {weight}"
        self.timings_ms: list[float] = []  # the model's own time, per question it ran for

    def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        top = list(hits[: self.n])
        if len(top) < 2 or not worth_a_second(query, top):
            return list(hits)
        started = time.perf_counter()
        passages = [passage_text(h, self.model.max_chars_per_hit) for h in top]
        logits = self.logits(query, passages)
        self.timings_ms.append((time.perf_counter() - started) * 1000)
        scores = mixed(np.array([h.score for h in top], dtype=np.float64), logits, self.weight)
        order = sorted(range(len(top)), key=lambda i: -scores[i])  # stable on ties
        return [replace(top[i], score=float(scores[i])) for i in order] + list(hits[self.n :])

    def logits(self, query: str, passages: list[str]) -> np.ndarray:
        if self.memo is None:
            return self.model.score(query, passages).astype(np.float64)
        wanted = [p for p in dict.fromkeys(passages) if (query, p) not in self.memo]
        if wanted:
            found = self.model.score(query, wanted)
            self.memo.update({(query, p): float(v) for p, v in zip(wanted, found, strict=True)})
        return np.array([self.memo[(query, p)] for p in passages], dtype=np.float64)


_MEMOS: dict[tuple[str, int], dict[tuple[str, str], float]] = {}
_POOLS: dict[tuple[str, str], list[Hit]] = {}  # the shipped top 30 by (index, question)


def mixed_cross_encoder(spec: str, memo: bool = False) -> tuple[str, MixedCrossEncoder]:
    """`xe:DIR:N:W[:LEN]`: its name, and MixedCrossEncoder over the top N with weight W and
    the model in DIR (at most LEN tokens a pair; by default the length it was trained with,
    from DIR/training.json as train_cross_encoder.py writes it)."""
    _, folder, n, weight, *length = spec.split(":")
    model_dir = Path(folder)
    record = model_dir / "training.json"
    trained = json.loads(record.read_text())["max_length"] if record.is_file() else 512
    max_length = int(length[0]) if length else trained
    model = CrossEncoderReranker(model_dir, max_length=max_length)
    name = f"xe-{model_dir.name}-n{n}-w{weight}" + (f"-len{max_length}" if length else "")
    shared = _MEMOS.setdefault((str(model_dir), max_length), {}) if memo else None
    return name, MixedCrossEncoder(model, int(n), float(weight), shared)


def cross_encoder_variant(spec: str) -> Variant:
    """The shipped ranking, then the cross-encoder `spec` names (see mixed_cross_encoder)."""
    name, reranker = mixed_cross_encoder(spec, memo=True)
    return Variant(name, "hybrid", reranker=reranker, ranking=Ranking.default(), note=reranker.name)


# The fusion on main before the devcorpus refit, and the one chosen on the dev half.
MAIN_FUSION = Fusion(method="cc", alpha=0.7, code_alpha=0.5, depth=50)
FIT_FUSION = Fusion()
FIT_PRIORS = Ranking.default().priors


def devcorpus_variants() -> list[Variant]:
    """Every configuration tried on the devcorpus: first stage, each prior, the ranker."""
    out = [
        Variant("dense", "dense", note="dense only"),
        Variant("bm25", "bm25", note="BM25 only"),
        Variant("main", "hybrid", fusion=MAIN_FUSION, note="main before issue 10: cc 0.7/0.5"),
        Variant("rrf", "hybrid", fusion=PLAIN_RRF, note="plain RRF k=60, depth 50"),
        Variant("rrf-0.4", "hybrid", fusion=replace(PLAIN_RRF, alpha=0.4, code_alpha=0.4), note=""),
    ]
    for alpha in (0.3, 0.4, 0.5, 0.6):
        for code in (0.3, 0.5):
            fusion = Fusion(alpha=alpha, code_alpha=code)
            out.append(Variant(f"cc-{alpha}/{code}", "hybrid", fusion=fusion, note="convex"))
    for depth in (30, 100):
        fusion = replace(FIT_FUSION, depth=depth)
        out.append(Variant(f"fit-depth{depth}", "hybrid", fusion=fusion, note="chosen fusion"))
    none = Priors(tests="include", aside=1.0)
    priors = {
        "fit": none,
        "+tests0.5": replace(none, tests="demote", aside=0.5),
        "+tests0.3": replace(none, tests="demote", aside=0.3),
        "+tests0.7": replace(none, tests="demote", aside=0.7),
        "+type1.3": replace(none, type_lean=1.3),
        "+type1.6": replace(none, type_lean=1.6),
        "+public0.85": replace(none, private=0.85),
        "+module0.6": replace(none, module_howto=0.6),
        "+module0.3": replace(none, module_howto=0.3),
        "+priors": FIT_PRIORS,
        **ROUND_TWO,
        **GRAPH_PRIORS,
    }
    for name, prior in priors.items():
        out.append(Variant(name, "hybrid", fusion=FIT_FUSION, ranking=Ranking(priors=prior)))
    ranker = load_ranker()
    out += [
        Variant(
            "ranker-alone",
            "hybrid",
            fusion=FIT_FUSION,
            ranking=Ranking(priors=replace(none, tests="demote"), ranker=ranker),
            note="learned ranker, no priors (its own test feature on)",
        ),
        Variant(
            "+priors+ranker",
            "hybrid",
            fusion=FIT_FUSION,
            ranking=Ranking(priors=FIT_PRIORS, ranker=ranker),
        ),
        Variant("shipped", "hybrid", ranking=Ranking.default(), note="what search does now"),
        Variant(
            "shipped-first",
            "hybrid",
            ranking=replace(Ranking.default(), second=None),
            note="shipped without the second opinion (before round four)",
        ),
        *learned_variants(Ranking.default()),
    ]
    for text in ("doc2", "name5", "no-module", "no-body", "prose-weighted", "prose-doc2"):
        out.append(Variant(f"text-{text}", "hybrid", search_text=text, ranking=Ranking.default()))
    return out + retrieval2_variants() + second_opinion_variants()


def second_opinion_variants() -> list[Variant]:
    """Round five of issue 10: the second opinion's weight, pool, what it reads of a hit and
    how it mixes the scores, read per kind of question. The gates (round seven, once each
    text's vector was its own): 0.1-0.3 gained on the dev half in both layouts (0.15:
    per package 0.922/0.808 -> 0.943/0.816 R@5/MRR@10), but lost on the held-out half
    (0.871/0.728 -> 0.865/0.730, one index 0.833/0.672 -> 0.829/0.659) and on examples/
    (0.932/0.815 -> 0.917/0.805), so the stage stays ungated. They share one embed cache (in the
    temp folder), so the second model embeds each text once for all of them."""
    import tempfile

    from gbr.core.embed.cache_config import CacheConfig
    from gbr.core.parse.chunk_text import doc_prose, without_doc_lines
    from gbr.core.rank.second_opinion import (
        SecondOpinion,
        hit_text,
        min_max,
        mixed,
        second_model_files,
    )

    files = second_model_files({})
    if files is None:
        return []
    cache = CacheConfig(Path(tempfile.gettempdir()) / "gbr-eval-second-opinion.sqlite")
    shipped = Ranking.default()

    def stage(
        weight: float, reads: Callable[[Hit], str] = hit_text, mix: Any = mixed
    ) -> SecondOpinion:
        return SecondOpinion(files, cache=cache, weight=weight, reads=reads, mix=mix)  # type: ignore[arg-type]

    def gated(margin: float) -> Any:
        """The first order stands when its top hit leads the next by `margin` (scaled)."""

        def mix(first: np.ndarray, cosines: np.ndarray, weight: float) -> np.ndarray:
            scaled = min_max(first)
            top = np.sort(scaled)[::-1]
            return (
                scaled
                if len(top) > 1 and top[0] - top[1] >= margin
                else mixed(first, cosines, weight)
            )

        return mix

    def z_mix(first: np.ndarray, cosines: np.ndarray, weight: float) -> np.ndarray:
        def z(v: np.ndarray) -> np.ndarray:
            return (v - v.mean()) / v.std() if v.std() > 0 else np.zeros_like(v)

        return (1 - weight) * z(first) + weight * z(cosines)

    def words(name: str) -> str:
        return name.replace("_", " ")

    readings: dict[str, Callable[[Hit], str]] = {
        # the doc's prose whole (examples and tags out), then the code without `///` lines
        "prose": lambda h: (
            f"{h.module} {h.kind} {h.name}: {h.signature}\n{doc_prose(h.doc)}\n"
            f"{without_doc_lines(h.text)}"
        ),
        # name, signature and doc: no body
        "head": lambda h: f"{words(h.name)}: {h.signature}\n{doc_prose(h.doc)}",
        # the name in words first, as a sentence would say it, then today's reading
        "words": lambda h: f"{words(h.name)}\n{hit_text(h)}",
        "code": lambda h: h.text,
    }

    return [
        *[
            Variant(f"so-w{w}", "hybrid", ranking=replace(shipped, second=stage(w)))
            for w in (0.3, 0.5, 0.7, 0.85)
        ],
        *[
            Variant(f"so-pool{n}", "hybrid", ranking=replace(shipped, pool=n, second=stage(0.5)))
            for n in (15, 50)
        ],
        *[
            Variant(f"so-reads-{name}", "hybrid", ranking=replace(shipped, second=stage(0.5, r)))
            for name, r in readings.items()
        ],
        *[
            Variant(
                f"so-gate{g}", "hybrid", ranking=replace(shipped, second=stage(0.5, mix=gated(g)))
            )
            for g in (0.1, 0.15, 0.2, 0.3, 0.5)
        ],
        Variant("so-z", "hybrid", ranking=replace(shipped, second=stage(0.5, mix=z_mix))),
    ]


def retrieval2_variants() -> list[Variant]:
    """Round three of issue 10, from reading the dev half's misses (bench/experiments/misses.py)."""
    shipped = Ranking.default()
    return [
        Variant("dense-prose", "dense", embed_format="prose", note="doc prose, code w/o ///"),
        Variant("prose", "hybrid", embed_format="prose", ranking=shipped, note="shipped + prose"),
        Variant("prose-raw", "hybrid", embed_format="prose", note="prose, no priors"),
        Variant("fts-nostem", "hybrid", fts=FtsConfig(stemmer="none"), ranking=shipped),
        Variant("fts-english", "hybrid", fts=FtsConfig(stemmer="english"), ranking=shipped),
        Variant("fts-nostop", "hybrid", fts=FtsConfig(stopwords="none"), ranking=shipped),
        Variant(
            "fts-nostem-nostop",
            "hybrid",
            fts=FtsConfig(stemmer="none", stopwords="none"),
            ranking=shipped,
        ),
        Variant("bm25-nostem", "bm25", fts=FtsConfig(stemmer="none"), note="BM25 alone"),
        *[
            Variant(
                f"p+prosetype{f}",
                "hybrid",
                ranking=Ranking(priors=replace(shipped.priors, prose_type=f)),
                note="shipped + type chunks for prose questions",
            )
            for f in (0.85, 0.7, 0.5)
        ],
        *[
            Variant(f"norm-{n}", "hybrid", fusion=Fusion(norm=n), ranking=shipped, note="shipped")
            for n in ("z", "max")
        ],
        *[
            Variant(
                f"norm-{n}-{a}/{c}",
                "hybrid",
                fusion=Fusion(norm=n, alpha=a, code_alpha=c),
                ranking=shipped,
                note="shipped priors",
            )
            for n in ("z", "max")
            for a, c in ((0.6, 0.4), (0.5, 0.5), (0.8, 0.6))
        ],
        *[
            Variant(
                f"max-{a}/{c}",
                "hybrid",
                fusion=Fusion(norm="max", alpha=a, code_alpha=c),
                ranking=shipped,
                note="max-scaled fusion, shipped priors",
            )
            for a in (0.7, 0.75, 0.8, 0.85, 0.9)
            for c in (0.5, 0.6, 0.7)
        ],
        *[
            Variant(
                f"max-0.8/0.6-depth{d}",
                "hybrid",
                fusion=Fusion(norm="max", alpha=0.8, code_alpha=0.6, depth=d),
                ranking=shipped,
            )
            for d in (30, 100)
        ],
    ]


def pick(variants: list[Variant], spec: str, parser: argparse.ArgumentParser) -> list[Variant]:
    if spec == "all":
        return variants
    wanted = [n.strip() for n in spec.split(",")]
    made = [cross_encoder_variant(n) for n in wanted if n.startswith("xe:")]
    variants = [*variants, *made]
    wanted = [v.name for v in made] + [n for n in wanted if not n.startswith("xe:")]
    unknown = set(wanted) - {v.name for v in variants}
    if unknown:
        parser.error(f"unknown variants: {', '.join(sorted(unknown))}")
    return [v for v in variants if v.name in wanted]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, default=REPO / "examples" / "bookshelf")
    parser.add_argument("--queries", type=Path, action="append")
    parser.add_argument(
        "--devcorpus",
        type=Path,
        nargs="?",
        const=DEVCORPUS,
        help=f"score the real-code devcorpus [default folder: {DEVCORPUS}]",
    )
    parser.add_argument(
        "--queries-dir",
        type=Path,
        default=DEV_QUERIES,
        help="devcorpus query files, one FOLDER.jsonl per repository",
    )
    parser.add_argument("--half", choices=("dev", "held", "both"), default="dev")
    parser.add_argument("--layout", choices=(*LAYOUTS, "both"), default="both")
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
    model = OnnxEmbedder(resolve_model_files(env=os.environ))
    args.out.mkdir(parents=True, exist_ok=True)
    if args.devcorpus is not None:
        variants = pick(devcorpus_variants(), args.variants, parser)
        variants += [rerank_variant(spec) for spec in args.rerank]
        halves = HALVES if args.half == "both" else (args.half,)
        layouts = LAYOUTS if args.layout == "both" else (args.layout,)
        report = evaluate_devcorpus(
            args.devcorpus, args.queries_dir, halves, layouts, variants, model, args.out
        )
        print_devcorpus(report)
    else:
        query_files = args.queries or [REPO / "bench" / "queries" / "bookshelf.jsonl"]
        corpus = load_corpus(args.corpus, query_files)
        variants = pick(VARIANTS, args.variants, parser)
        variants += [rerank_variant(spec) for spec in args.rerank]
        report = evaluate(
            corpus, variants, model, args.out, lambda n: print(f"  {n}", file=sys.stderr)
        )
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
