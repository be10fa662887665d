"""Learn how to combine the ranking features on the silver train split (issue 29, item 3).

    S=bench/experiments/train_silver_ranker.py
    nice -n 15 .venv/bin/python $S collect --split train --cap 30 # the committed files: 120 of 172
    nice -n 15 .venv/bin/python $S collect --split dev            #   repositories, then stopped
    nice -n 15 .venv/bin/python $S collect --split devcorpus-dev
    .venv/bin/python $S fit --out gbr/core/data/ranker-silver-chosen.json   # every feature set
    .venv/bin/python $S time --db INDEX --ranker gbr/core/data/ranker-silver-chosen.json

`collect` runs each query of a silver split (bench/silver.py build) through the shipped
search up to the ranking stage, on the split's per-repository indexes, and keeps every
pool the learned combination would reorder: the top 30 after priors, each hit's FEATURES
(gbr/core/rank/ranker.py) with the second model's cosine, read through
`Searcher.combined`, the method search itself calls, and which hit is the target. The
other hits of the pool are the hard negatives: our own first stage's, from the same
repository. Pools are kept as a pickle beside the silver data (never in git).

`collect --split devcorpus-dev` does the same for the devcorpus dev half (hand-written
questions over code with its docs). `fit` trains a pairwise logistic model (every target
against every other hit of its pool, each query weighing the same, L2 penalty;
train_ranker.py's objective, solved by Newton's method) on the train pools, for each
feature set and penalty, scores each on the dev pools against the pool as retrieved and
the shipped half-and-half mix, and writes the one with the best silver dev MRR@10 among
those that lose neither R@5 nor MRR@10 on the devcorpus dev half's pools (when collected).
The test split and the held-out half are never read here: `bench/silver.py run --split
test` and `bench/eval.py --devcorpus --half held` score the written file once, as the
`learned*` variant named after it (bench/eval.py `learned_variants`). `time` compares warm
search with and without a file. docs/decisions/0009-learned-combination.md has the figures.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import pickle
import subprocess
import sys
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench" / "experiments"))

from train_ranker import Group, metrics, pairs, standardise  # noqa: E402

from bench._corpus import load_model  # noqa: E402
from bench._silver_data import load_split  # noqa: E402
from bench.eval import (  # noqa: E402
    DEV_QUERIES,
    DEVCORPUS,
    MemoEmbedder,
    devcorpus_units,
    unit_index,
    units_of,
)
from bench.silver import WORK, queries_of  # noqa: E402
from gbr.core.rank.ranker import FEATURES, SILVER_RANKER_PATH, LinearRanker, load_ranker  # noqa: E402
from gbr.core.rank.search import Ranking, Searcher  # noqa: E402
from gbr.core.records import NO_FILTER  # noqa: E402
from gbr.core.store.facade import Store  # noqa: E402

POOL = 30
DEVCORPUS_DEV = "devcorpus-dev"  # `collect --split devcorpus-dev`: where people ask
LAMBDAS = (0.0001, 0.001, 0.01, 0.1, 1.0)
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    # What the shipped mix reads, so it is the baseline the model must beat with its own weights.
    "mix": ("fused_span", "second_span"),
    # The lists' and both models' scores alone: what the shipped mix reads, and more of it.
    "scores": tuple(f for f in FEATURES if f.split("_")[0] in {"fused", "dense", "bm25", "second"}),
    "all": FEATURES,
    # Without what silver's own choice of targets gives away: a query is a public, non-test
    # definition's doc, its copy has no docs, no module chunk is a target. People also ask
    # for private helpers and modules, so weights learned on these would not carry over.
    "fair": tuple(
        f
        for f in FEATURES
        if f
        not in {
            "private",
            "test",
            "example",
            "kind_module",
            "howto_module",
            "has_doc",
            "doc_overlap",
        }
    ),
    # The scores and the query's words in the name, signature and module: no kinds, whose
    # weights on silver mostly say "never a module chunk".
    "words": tuple(
        f
        for f in FEATURES
        if f.split("_")[0] in {"fused", "dense", "bm25", "second", "name", "sig", "module"}
    ),
}


class Mix:
    """The shipped stage on a pool: half the first order's score, half the second model's,
    each scaled over the pool (gbr/core/rank/second_opinion.py `mixed`)."""

    def order(self, x: np.ndarray) -> list[int]:
        s = x[:, FEATURES.index("fused_span")] + x[:, FEATURES.index("second_span")]
        return sorted(range(len(s)), key=lambda i: -s[i])


def picked(queries: list[Any], cap: int | None) -> list[Any]:
    """At most `cap` of a repository's queries, chosen by a hash of their id (stable)."""
    if cap is None or len(queries) <= cap:
        return queries
    return sorted(queries, key=lambda q: hashlib.sha1(q.id.encode()).hexdigest())[:cap]


def collect(work: Path, split: str, cap: int | None, log: Any, save: Any = None) -> list[Group]:
    """Each query's pool as the shipped search would hand it to the learned combination;
    `save(groups)` is called every few repositories, so a stopped run keeps what it made."""
    os.environ["GBR_HOME"] = str(work / "gbr-home")  # the second model's cached vectors
    if split == DEVCORPUS_DEV:  # the hand-written dev half, its code with its docs
        units = devcorpus_units(DEVCORPUS, DEV_QUERIES, ("dev",), "per-package")
        index_folder, index_name = work / "eval-out", "devcorpus"
    else:
        lines = load_split(work, split, benchmark_only=split != "train")
        loaders = {folder: partial(queries_of, raw) for folder, raw in lines.items()}
        units = units_of(work / "stripped" / split, loaders, "per-package")
        index_folder, index_name = work / "index", split
    model = load_model()
    memo = MemoEmbedder(model)
    ranking = Ranking.default(os.environ)
    groups: list[Group] = []
    asked = 0
    for n, unit in enumerate(units, start=1):
        db = unit_index(unit, "header", model, index_folder, index_name)
        with Store.open(db, read_only=True) as store:
            searcher = Searcher(store, memo, ranking=ranking)
            for query in picked(unit.queries, cap):
                asked += 1
                wanted = {(t.file, t.name) for t in query.targets}
                group = pool_of(searcher, query.query, wanted, unit.name)
                if group is not None:
                    groups.append(group)
        print(
            f"[{time.strftime('%H:%M:%S')}] {n}/{len(units)} {unit.name}: "
            f"{len(groups)} pools of {asked} queries",
            file=log,
            flush=True,
        )
        if save is not None and n % 20 == 0:
            save(groups)
    return groups


def pool_of(
    searcher: Searcher, query: str, wanted: set[tuple[str, str]], package: str
) -> Group | None:
    """The pool `searcher.search(query)` would hand the learned combination, labelled by
    `wanted` (path, name); None where the combination would not run."""
    retrieval = searcher.retrieve(query, "hybrid", NO_FILTER, max(searcher.fusion.depth, POOL))
    intent, found = searcher.candidates(query, retrieval, POOL)
    combined = searcher.combined(query, intent, retrieval, found[:POOL])
    if combined is None:
        return None
    hits, x = combined
    y = np.array([(h.path, h.name) in wanted for h in hits], dtype=bool)
    return Group(package, x, y, len(wanted))


def fit(diffs: np.ndarray, lam: float, steps: int = 30) -> np.ndarray:
    """train_ranker.py's objective (pairwise logistic loss, each query weighing the same, L2
    penalty), minimised by Newton's method: the loss is convex and has ~30 weights, so a
    few steps over the Hessian reach what thousands of gradient steps would, in seconds
    over the ~150k pairs of the silver train pools."""
    d, weight = diffs[:, :-1], diffs[:, -1]
    queries = max(weight.sum(), 1.0)
    w = np.zeros(d.shape[1])
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(np.clip(d @ w, -30, 30)))  # sigmoid(-margin)
        grad = -(d.T @ (weight * p)) / queries + lam * w
        hessian = (d.T * (weight * p * (1 - p))) @ d / queries + lam * np.eye(len(w))
        step = np.linalg.solve(hessian + 1e-9 * np.eye(len(w)), grad)
        w -= step
        if float(np.abs(step).max()) < 1e-6:
            break
    return w


def train(groups: list[Group], lam: float, columns: tuple[str, ...]) -> LinearRanker:
    cols = [FEATURES.index(f) for f in columns]
    sub = [replace(g, x=g.x[:, cols]) for g in groups]
    mean, std = standardise(sub)
    weights = fit(pairs(sub, mean, std), lam)
    return LinearRanker(weights, mean, std, columns=columns)


def cmd_collect(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    out = args.work / f"pools-{args.split}.pkl"

    def save(groups: list[Group]) -> None:
        out.write_bytes(pickle.dumps({"features": FEATURES, "groups": groups, "cap": args.cap}))

    groups = collect(args.work, args.split, args.cap, sys.stderr, save)
    save(groups)
    found = sum(1 for g in groups if g.y.any())
    print(
        f"wrote {out}: {len(groups)} pools, target in {found}, "
        f"{time.perf_counter() - started:.0f} s"
    )
    return 0


def load_pools(work: Path, split: str) -> tuple[list[Group], int | None]:
    """A split's pools and the --cap they were collected with."""
    data = pickle.loads((work / f"pools-{split}.pkl").read_bytes())
    if tuple(data["features"]) != FEATURES:
        raise SystemExit(f"pools-{split}.pkl holds other features: collect it again")
    return data["groups"], data["cap"]


def cmd_fit(args: argparse.Namespace) -> int:
    (train_on, cap), (dev, _) = load_pools(args.work, "train"), load_pools(args.work, "dev")
    print(f"train: {len(train_on)} pools over {len({g.package for g in train_on})} repositories")
    print(f"dev:   {len(dev)} pools over {len({g.package for g in dev})} repositories\n")
    people = args.work / f"pools-{DEVCORPUS_DEV}.pkl"
    asked = load_pools(args.work, DEVCORPUS_DEV)[0] if people.is_file() else []
    print(f"{'as retrieved':<24}{_line(metrics(dev, None))}{_also(asked, None)}")
    print(f"{'shipped mix (0.5/0.5)':<24}{_line(metrics(dev, Mix()))}{_also(asked, Mix())}")
    mix = metrics(asked, Mix()) if asked else {}  # type: ignore[arg-type]
    best: tuple[float, str, float, LinearRanker] | None = None
    sets = args.features.split(",")
    for name in sets:
        for lam in LAMBDAS:
            ranker = train(train_on, lam, FEATURE_SETS[name])
            dev_m = metrics(dev, ranker)
            print(f"{name + ' l2=' + str(lam):<24}{_line(dev_m)}{_also(asked, ranker)}", flush=True)
            # With the devcorpus dev half's pools: only a fit that loses nothing there
            # against the shipped mix may be chosen (silver alone chose weights that lost).
            kept = not asked or all(metrics(asked, ranker)[m] >= mix[m] for m in ("R@5", "MRR@10"))
            if kept and (best is None or dev_m["MRR@10"] > best[0]):
                best = (dev_m["MRR@10"], name, lam, ranker)
    if best is None:
        print("\nno fit kept the devcorpus dev half's figures; nothing written")
        return 1
    _, name, lam, ranker = best
    print(f"\nchosen on dev: {name}, l2={lam}")
    for f, w in sorted(
        zip(ranker.columns, ranker.weights, strict=True), key=lambda kv: -abs(kv[1])
    ):
        print(f"  {f:<16}{w:+.3f}")
    if args.out is None:
        return 0
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    data = ranker.as_json(
        made_by="bench/experiments/train_silver_ranker.py collect --split train --cap "
        f"{cap} && collect --split dev"
        + (f" && collect --split {DEVCORPUS_DEV}" if asked else "")
        + f" && fit --features {args.features} --out {args.out.name}",
        commit=commit,
        data={
            "corpus": "bench/corpus/MANIFEST.tsv (silver train split, docs stripped)",
            "train_pools": len(train_on),
            "train_repositories": len({g.package for g in train_on}),
            "dev_pools": len(dev),
            "pool": POOL,
        },
        feature_set=name,
        l2=lam,
        dev={k: round(v, 4) for k, v in metrics(dev, ranker).items()},
        dev_shipped_mix={k: round(v, 4) for k, v in metrics(dev, Mix()).items()},  # type: ignore[arg-type]
        devcorpus_dev_pools={k: round(v, 4) for k, v in metrics(asked, ranker).items()},
        devcorpus_dev_pools_shipped_mix={k: round(v, 4) for k, v in mix.items()},
    )
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


def cmd_time(args: argparse.Namespace) -> int:
    """Warm hybrid search with the shipped ranking and with `--ranker` in its place,
    alternating query by query on one index, so machine noise falls on both alike."""
    questions = [json.loads(line)["query"] for line in args.queries.read_text().splitlines()]
    model = load_model()
    shipped = Ranking.default({})
    learned = replace(shipped, ranker=load_ranker(args.ranker))
    with Store.open(args.db, read_only=True) as store:
        both = (Searcher(store, model, ranking=shipped), Searcher(store, model, ranking=learned))
        for question in questions:  # warm: vectors, the second model's memo
            for searcher in both:
                searcher.search(question)
        seconds: tuple[list[float], list[float]] = ([], [])
        for _ in range(args.rounds):
            for question in questions:
                for searcher, times in zip(both, seconds, strict=True):
                    started = time.perf_counter()
                    searcher.search(question)
                    times.append(time.perf_counter() - started)
    p50 = [1000 * float(np.median(times)) for times in seconds]
    print(f"warm hybrid p50: shipped {p50[0]:.1f} ms, {args.ranker.name} {p50[1]:.1f} ms")
    return 0


def _also(asked: list[Group], ranker: Any) -> str:
    """The devcorpus dev half's pools too, when collected: the questions people ask."""
    if not asked:
        return ""
    m = metrics(asked, ranker)
    return f"   | devcorpus dev: R@5 {m['R@5']:.3f}  MRR@10 {m['MRR@10']:.3f}"


def _line(m: dict[str, float]) -> str:
    return f"R@1 {m['R@1']:.3f}  R@5 {m['R@5']:.3f}  MRR@10 {m['MRR@10']:.3f}  R@30 {m['R@30']:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--work", type=Path, default=WORK, help=f"[default: {WORK}]")
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("collect", help="the pools of one split")
    c.add_argument("--split", default="train")
    c.add_argument("--cap", type=int, help="at most this many queries per repository")
    f = sub.add_parser("fit", help="train on the train pools, choose on the dev pools")
    f.add_argument("--features", default=",".join(FEATURE_SETS))
    f.add_argument("--out", type=Path, help="write the chosen ranker here")
    t = sub.add_parser("time", help="warm search, shipped against a ranker file, one index")
    t.add_argument("--db", type=Path, required=True, help="an index, e.g. of examples/")
    t.add_argument("--ranker", type=Path, default=SILVER_RANKER_PATH)
    t.add_argument("--queries", type=Path, default=REPO / "bench" / "queries" / "bookshelf.jsonl")
    t.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    commands = {"collect": cmd_collect, "fit": cmd_fit, "time": cmd_time}
    return commands[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
