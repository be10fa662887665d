"""The silver benchmark: doc-sentence queries over doc-stripped public Gleam code (issue 29).

    .venv/bin/python bench/silver.py build                  # copies, queries, manifest
    nice -n 15 .venv/bin/python bench/silver.py run --split dev,test --json OUT.json
    nice -n 15 .venv/bin/python bench/silver.py negatives   # train split, for a reranker

`build` reads ../shared/gleamcorpus, checks it against the held-out fingerprints and the
devcorpus, writes the doc-stripped copies and the queries of each split under the work
folder (default /work/data/silver, never the repository: they are derived from others'
code) and the manifest and summary under bench/corpus/. `run` scores variants through the
same code path as `bench/eval.py --devcorpus` (its units, indexes and `run_variant`), one
index per repository and one for the whole split, with a 95 % bootstrap interval over
queries. `negatives` writes, for every train query, the top 30 hits of our own first stage
that are not its target.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._corpus import load_model, pipeline_limits  # noqa: E402
from bench._silver_data import (  # noqa: E402
    QUERY_CAP,
    SPLITS,
    build,
    iter_manifest_rows,
    load_split,
    read_manifest,
)
from bench.eval import (  # noqa: E402
    DEVCORPUS,
    LAYOUTS,
    MemoEmbedder,
    Tagged,
    Unit,
    Variant,
    cross_encoder_variant,
    devcorpus_variants,
    learned_variants,
    pick,
    run_units,
    summarise,
    unit_index,
    units_of,
)
from bench.evaluation import (  # noqa: E402
    METRICS,
    Query,
    bootstrap_interval,
    per_query,
    query_of,
    relevant,
    repository_interval,
)
from gbr.core.rank.search import Ranking, Searcher  # noqa: E402
from gbr.core.store.facade import Store  # noqa: E402

CORPUS = REPO.parent / "shared" / "gleamcorpus"
HELDOUT_CHECK = REPO.parent / "shared" / "heldout" / "check.py"
WORK = Path("/work/data/silver")
NEGATIVES = 30


def silver_variants() -> list[Variant]:
    """The shipped ranking and its first stage; any devcorpus variant can be named too."""
    shipped = Ranking.default(os.environ)
    return [
        Variant("shipped", "hybrid", ranking=shipped, note="what search does now"),
        Variant("shipped-first", "hybrid", ranking=replace(shipped, second=None)),
        Variant("hybrid-raw", "hybrid", note="fusion alone, no priors"),
        Variant("dense", "dense"),
        Variant("bm25", "bm25"),
        *learned_variants(shipped),  # with the shared cache, as `shipped`
    ]


# ------------------------------------------------------------------------------- build


def corpus_checks(corpus: Path) -> dict[str, Any]:
    """The held-out check over every file, each repository's name through `--repo`, and
    the devcorpus's repositories (by owner/name and by name alone, for forks)."""
    rows = read_manifest(corpus)
    files = subprocess.run(
        [sys.executable, str(HELDOUT_CHECK), str(corpus)], capture_output=True, text=True
    )
    held_files = [line for line in files.stdout.splitlines() if line.startswith("held-out file")]
    held_repos = [
        r.repo
        for r in rows
        if subprocess.run(
            [sys.executable, str(HELDOUT_CHECK), "--repo", r.repo], capture_output=True
        ).returncode
    ]
    dev = [r["github"].lower() for r in _tsv(DEVCORPUS / "MANIFEST.tsv")]
    dev_names = {d.split("/")[-1] for d in dev}
    return {
        "heldout_check_files": {"exit": files.returncode, "held_out_files": len(held_files)},
        "heldout_check_repos": {"checked": len(rows), "held_out": held_repos},
        "devcorpus_overlap": {
            "devcorpus_repos": len(dev),
            "same_owner_name": [r.repo for r in rows if r.repo.lower() in dev],
            "same_name": [r.repo for r in rows if r.repo.split("/")[-1].lower() in dev_names],
        },
    }


def _tsv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle, delimiter="\t"))


def cmd_build(args: argparse.Namespace) -> int:
    checks = corpus_checks(args.corpus)
    bad = (
        checks["heldout_check_files"]["held_out_files"]
        + len(checks["heldout_check_repos"]["held_out"])
        + len(checks["devcorpus_overlap"]["same_name"])
    )
    if bad:
        print(json.dumps(checks, indent=2))
        raise SystemExit("the corpus holds held-out or devcorpus code; drop it first")
    model = load_model()
    started = time.perf_counter()
    made = build(
        args.corpus,
        args.work,
        model.count_tokens,
        pipeline_limits(model),
        args.cap,
        progress=lambda line: print(line, file=sys.stderr),
    )
    rows = read_manifest(args.corpus)
    by_folder = {m.folder: m for m in made}
    args.manifest.parent.mkdir(parents=True, exist_ok=True)
    with args.manifest.open("w") as out:
        for cells in iter_manifest_rows(rows, by_folder):
            out.write("\t".join(map(str, cells)) + "\n")
    summary: dict[str, Any] = {"corpus": str(args.corpus), "query_cap": args.cap, **checks}
    for split in SPLITS:
        mine = [m for m in made if m.split == split]
        dropped: Counter[str] = Counter()
        for m in mine:
            dropped += m.dropped
        summary[split] = {
            "repositories": len(mine),
            "gleam_lines": sum(r.gleam_lines for r in rows if r.folder in {m.folder for m in mine}),
            "queries": sum(len(m.queries) for m in mine),
            "benchmark_queries": sum(m.in_benchmark for m in mine),
            "by_kind": dict(
                Counter(q["kind"] for m in mine for q in m.queries if q["in_benchmark"])
            ),
            "left_out": dict(dropped.most_common()),
        }
    summary["seconds"] = round(time.perf_counter() - started, 1)
    args.summary.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({s: summary[s] for s in SPLITS}, indent=2))
    print(f"wrote {args.manifest}, {args.summary}; copies and queries under {args.work}")
    return 0


# --------------------------------------------------------------------------------- run


def split_units(work: Path, split: str, layout: str) -> list[Unit]:
    """The units of `bench/eval.py` over one split's stripped copies."""
    lines = load_split(work, split)
    loaders = {folder: partial(queries_of, raw) for folder, raw in lines.items()}
    return units_of(work / "stripped" / split, loaders, layout)


def queries_of(lines: list[dict[str, Any]]) -> list[Query]:
    return [query_of(line) for line in lines]


def score_block(variant: Variant, tagged: Tagged, seconds: float) -> dict[str, Any]:
    """eval's summary of one variant, plus the bootstrap interval of each metric."""
    block = summarise(variant, tagged, seconds / max(1, len(tagged)))
    rows = per_query([(q, h) for _, q, h in tagged])
    block["interval95"] = bootstrap_interval(rows)
    block["interval95_by_repository"] = repository_interval(rows, [pkg for pkg, _, _ in tagged])
    # Where each query's target came (0: not in the top 10), to compare variants query by query.
    block["ranks"] = {q.id: first_rank(q, h) for _, q, h in tagged}
    per_repo = Counter(pkg for pkg, _, _ in tagged)
    block["repositories"] = len(per_repo)
    block["most_queries_per_repository"] = max(per_repo.values(), default=0)
    return block


def cmd_run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    splits = args.split.split(",")
    for split in splits:
        load_split(args.work, split)  # stops with what to run when `build` has not been run
    os.environ["GBR_HOME"] = str(args.work / "gbr-home")  # the shared embed cache, kept here
    variants = _variants(args.variants, parser)
    model = load_model()
    memo = MemoEmbedder(model)
    report: dict[str, Any] = {"splits": {}}
    for split in splits:
        for layout in LAYOUTS if args.layout == "both" else (args.layout,):
            units = split_units(args.work, split, layout)
            block: dict[str, Any] = {}
            for variant in variants:
                started = time.perf_counter()
                print(
                    f"[{time.strftime('%H:%M:%S')}] {split} {layout} {variant.name}",
                    file=sys.stderr,
                )
                tagged, seconds = run_units(units, variant, model, memo, args.work / "index", split)
                block[variant.name] = score_block(variant, tagged, seconds)
                block[variant.name]["wall_seconds"] = round(time.perf_counter() - started, 1)
                print(table_line(split, layout, variant.name, block[variant.name]), flush=True)
            report["splits"].setdefault(split, {})[layout] = block
            if args.json:
                _write(args.json, report)
    return 0


def first_rank(query: Query, hits: list[tuple[str, str]]) -> int:
    return next((n for n, ok in enumerate(relevant(query, hits), start=1) if ok), 0)


def table_line(split: str, layout: str, name: str, block: dict[str, Any]) -> str:
    """One row of the markdown table: each metric with its interval."""
    overall, interval = block["overall"], block["interval95"]
    cells = [f"{overall[m]:.3f} [{interval[m][0]:.3f}, {interval[m][1]:.3f}]" for m in METRICS]
    return f"| {split} | {layout} | {name} | {overall['n']} | " + " | ".join(cells) + " |"


TABLE_HEAD = (
    "| split | layout | variant | queries | "
    + " | ".join(f"{m} [95 % CI]" for m in METRICS)
    + " |\n|"
    + " --- |" * (4 + len(METRICS))
)


def cmd_table(args: argparse.Namespace) -> int:
    """The markdown table of a `run --json` file, every split, layout and variant."""
    report = json.loads(args.json.read_text())
    print(TABLE_HEAD)
    for split, layouts in report["splits"].items():
        for layout, block in layouts.items():
            for name, row in block.items():
                print(table_line(split, layout, name, row))
    return 0


def rank_rows(ranks: list[int]) -> np.ndarray:
    """METRICS per query from where its (single) target came, 0 for outside the top 10."""
    r = np.array(ranks, dtype=np.float64)
    found = r > 0
    rr = np.divide(1.0, r, out=np.zeros_like(r), where=found)
    return np.stack([r == 1, found & (r <= 5), found, rr], axis=1).astype(np.float64)


def cmd_compare(args: argparse.Namespace) -> int:
    """Variant B against variant A of one run, query by query: the mean difference of each
    metric with a 95 % bootstrap interval over queries of the paired differences (narrower
    than comparing the two intervals, since both variants answer the same queries)."""
    report = json.loads(args.json.read_text())
    print(
        f"| split | layout | {args.b} - {args.a} | queries | "
        + " | ".join(f"{m} [95 % CI]" for m in METRICS)
        + " |\n|"
        + " --- |" * (4 + len(METRICS))
    )
    for split, layouts in report["splits"].items():
        for layout, block in layouts.items():
            if args.a not in block or args.b not in block:
                continue
            a, b = block[args.a]["ranks"], block[args.b]["ranks"]
            ids = sorted(a)
            diff = rank_rows([b[i] for i in ids]) - rank_rows([a[i] for i in ids])
            interval = bootstrap_interval(diff)
            cells = [
                f"{diff[:, n].mean():+.3f} [{interval[m][0]:+.3f}, {interval[m][1]:+.3f}]"
                for n, m in enumerate(METRICS)
            ]
            print(f"| {split} | {layout} | | {len(ids)} | " + " | ".join(cells) + " |")
    return 0


def _variants(spec: str, parser: argparse.ArgumentParser) -> list[Variant]:
    own = {v.name: v for v in silver_variants()}
    names = [n.strip() for n in spec.split(",")]
    own.update({n: cross_encoder_variant(n) for n in names if n.startswith("xe:")})
    others = [n for n in names if n not in own]
    found = (
        {v.name: v for v in pick(devcorpus_variants(), ",".join(others), parser)} if others else {}
    )
    return [own.get(n) or found[n] for n in names]


def _write(path: Path, payload: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")


# --------------------------------------------------------------------------- negatives


def mine_negatives(
    unit: Unit, db: Path, searcher_model: Any, ranking: Ranking, depth: int = NEGATIVES
) -> tuple[list[dict[str, Any]], dict[tuple[str, str], dict[str, Any]]]:
    """For each query of a one-repository unit: the first stage's top `depth` hits that are
    not its target (with their rank and score), where the target ranked, and the text of
    every hit and target once."""
    lines: list[dict[str, Any]] = []
    texts: dict[tuple[str, str], dict[str, Any]] = {}
    with Store.open(db) as store:
        searcher = Searcher(store, searcher_model, ranking=ranking)
        for query in unit.queries:
            hits = searcher.search(query.query, k=depth, mode="hybrid")
            wanted = {(t.file, t.name) for t in query.targets}
            target_rank = next((h.rank for h in hits if (h.path, h.name) in wanted), None)
            for h in hits:
                texts.setdefault(
                    (h.path, h.name),
                    {"kind": h.kind, "module": h.module, "signature": h.signature, "text": h.text},
                )
            lines.append(
                {
                    "id": query.id,
                    "repo": unit.name,
                    "query": query.query,
                    "kind": query.kind,
                    "target": [{"path": t.file, "name": t.name} for t in query.targets],
                    "target_rank": target_rank,
                    "negatives": [
                        {"path": h.path, "name": h.name, "rank": h.rank, "score": round(h.score, 6)}
                        for h in hits
                        if (h.path, h.name) not in wanted
                    ],
                }
            )
    return lines, texts


def target_texts(db: Path, queries: list[Query]) -> dict[tuple[str, str], dict[str, Any]]:
    """The indexed (doc-stripped) code of each target, whole node, parts joined."""
    wanted = {(t.file, t.name) for q in queries for t in q.targets}
    out: dict[tuple[str, str], dict[str, Any]] = {}
    with Store.open(db) as store:
        rows = store.con.execute(
            "SELECT path, name, kind, module, signature, part, text FROM chunks "
            "WHERE kind <> 'module' ORDER BY path, name, part"
        ).fetchall()
    for path, name, kind, module, signature, _part, text in rows:
        if (path, name) in wanted:
            entry = out.setdefault(
                (path, name), {"kind": kind, "module": module, "signature": signature, "text": ""}
            )
            entry["text"] += text if not entry["text"] else "\n" + text
    return out


def cmd_negatives(args: argparse.Namespace) -> int:
    os.environ["GBR_HOME"] = str(args.work / "gbr-home")
    lines = load_split(args.work, args.split, benchmark_only=False)
    loaders = {folder: partial(queries_of, raw) for folder, raw in lines.items()}
    units = units_of(args.work / "stripped" / args.split, loaders, "per-package")
    # Smallest first: embedding is most of the cost, so an unfinished run has mined the most
    # queries it could.
    units.sort(key=lambda u: (sum(f.stat().st_size for f in u.root.rglob("*.gleam")), u.name))
    model = load_model()
    memo = MemoEmbedder(model)
    # The reranker reorders the shipped top 30; the second opinion only reorders that pool,
    # so the first stage with the shipped priors gives the same 30 without its cost.
    ranking = replace(Ranking.default(), second=None)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    texts_path = args.out.with_name(args.out.stem.replace("negatives", "chunks") + ".jsonl")
    found = total = 0
    with args.out.open("w") as out, texts_path.open("w") as texts_out:
        for n, unit in enumerate(units, start=1):
            db = unit_index(unit, "header", model, args.work / "index", args.split)
            rows, texts = mine_negatives(unit, db, memo, ranking)
            texts = {**texts, **target_texts(db, unit.queries)}
            out.writelines(json.dumps(r) + "\n" for r in rows)
            texts_out.writelines(
                json.dumps({"repo": unit.name, "path": p, "name": nm, **t}) + "\n"
                for (p, nm), t in texts.items()
            )
            found += sum(1 for r in rows if r["target_rank"] is not None)
            total += len(rows)
            print(
                f"[{time.strftime('%H:%M:%S')}] {n}/{len(units)} {unit.name}: {len(rows)} queries,"
                f" target in the top {NEGATIVES} for {found}/{total} so far",
                file=sys.stderr,
                flush=True,
            )
    print(f"wrote {args.out} and {texts_path}: {total} queries, target found for {found}")
    return 0


# -------------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--work", type=Path, default=WORK, help=f"[default: {WORK}]")
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="stripped copies, queries per split, manifest")
    b.add_argument("--corpus", type=Path, default=CORPUS)
    b.add_argument("--cap", type=int, default=QUERY_CAP, help="benchmark queries per repository")
    b.add_argument("--manifest", type=Path, default=REPO / "bench" / "corpus" / "MANIFEST.tsv")
    b.add_argument(
        "--summary", type=Path, default=REPO / "bench" / "corpus" / "silver-summary.json"
    )
    r = sub.add_parser("run", help="score variants on splits, both layouts")
    r.add_argument("--split", default="dev", help="comma-separated: dev,test (train works too)")
    r.add_argument("--layout", choices=(*LAYOUTS, "both"), default="both")
    r.add_argument("--variants", default="shipped", help="comma-separated names")
    r.add_argument("--json", type=Path, help="write the figures as JSON here")
    n = sub.add_parser("negatives", help="hard negatives of one split for a reranker")
    n.add_argument("--split", default="train")
    n.add_argument("--out", type=Path, default=WORK / "train-negatives.jsonl")
    t = sub.add_parser("table", help="the markdown table of a run's JSON")
    t.add_argument("json", type=Path)
    c = sub.add_parser("compare", help="variant B minus variant A of a run, paired")
    c.add_argument("json", type=Path)
    c.add_argument("a", help="the variant compared against, e.g. shipped")
    c.add_argument("b", help="the variant compared, e.g. learned")
    args = parser.parse_args(argv)
    if args.command == "build":
        return cmd_build(args)
    if args.command == "run":
        return cmd_run(args, parser)
    if args.command == "table":
        return cmd_table(args)
    if args.command == "compare":
        return cmd_compare(args)
    return cmd_negatives(args)


if __name__ == "__main__":
    raise SystemExit(main())
