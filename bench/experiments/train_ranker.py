"""Train the learned ranker (gbr/core/data/ranker.json) on the dev half of the devcorpus.

    .venv/bin/python bench/experiments/train_ranker.py            # cross-validate, write the file
    .venv/bin/python bench/experiments/train_ranker.py --dry-run  # cross-validate only
    .venv/bin/python bench/experiments/train_ranker.py --dry-run --features small  # a few features

`--features` keeps only some columns (the rest get weight 0, so the file keeps the one
format gbr reads): `small` is dense, BM25, name overlap, kind and the test/private flags,
which may generalise where all 27 over 122 questions did not.

For every dev-half query, the shipped first stage (fusion and priors, bench/eval.py's
FIT_FUSION and FIT_PRIORS) gives the top 30 nodes; each gets the features of
gbr/core/rank/ranker.py and a label (is it one of the query's targets). A pairwise linear model
(logistic loss on feature differences, every target against every other candidate of the
same query, L2 penalty) is fitted with plain gradient descent in NumPy.

Overfitting guard: the L2 strength is chosen by leave-one-repository-out cross-validation
within the dev half (each fold trains on six repositories and scores the seventh), and the
report prints each fold against the un-reranked order. The held-out half is never read
here; bench/eval.py --half held reports it once the file is written.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from eval import (  # noqa: E402
    DEV_QUERIES,
    DEVCORPUS,
    FIT_FUSION,
    FIT_PRIORS,
    LAYOUTS,
    MemoEmbedder,
    devcorpus_units,
    unit_index,
)

from gbr.core.embed.embedder import OnnxEmbedder  # noqa: E402
from gbr.core.embed.model_files import resolve_model_files  # noqa: E402
from gbr.core.rank.priors import effective_policy  # noqa: E402
from gbr.core.rank.ranker import DEFAULT_RANKER_PATH, FEATURES, LinearRanker, features  # noqa: E402
from gbr.core.rank.search import Filter, Ranking, Searcher, pool_candidates  # noqa: E402
from gbr.core.store.facade import Store  # noqa: E402

POOL = 30
LAMBDAS = (0.0003, 0.003, 0.03, 0.3, 1.0, 3.0)
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "all": FEATURES,
    "small": (
        "fused_norm",
        "dense",
        "bm25_norm",
        "name_overlap",
        "name_covered",
        "kind_type",
        "type_q_type",
        "test",
        "private",
    ),
    "tiny": ("fused_norm", "name_overlap", "name_covered", "doc_overlap"),
}


@dataclass
class Group:
    """One query's pool: features, labels (target or not) and how many targets it has."""

    package: str
    x: np.ndarray
    y: np.ndarray
    targets: int


def collect(root: Path, queries_dir: Path, layouts: tuple[str, ...], model: object) -> list[Group]:
    memo = MemoEmbedder(model)  # type: ignore[arg-type]
    groups: list[Group] = []
    for layout in layouts:
        for unit in devcorpus_units(root, queries_dir, ("dev",), layout):
            db = unit_index(unit, "header", model, REPO / "bench" / "out")
            with Store.open(db, read_only=True) as store:
                searcher = Searcher(store, memo, FIT_FUSION, Ranking(priors=FIT_PRIORS))
                for package, query in zip(unit.packages, unit.queries, strict=True):
                    depth = max(FIT_FUSION.depth, POOL)
                    retrieval = searcher.retrieve(query.query, "hybrid", Filter(), depth)
                    intent, found = searcher.candidates(query.query, retrieval, POOL, Filter())
                    if not found:
                        continue
                    tests = effective_policy("demote", query.query)
                    x = features(query.query, intent, tests, pool_candidates(found, retrieval))
                    wanted = {(t.file, t.name) for t in query.targets}
                    y = np.array([(h.path, h.name) in wanted for h, _, _ in found], dtype=bool)
                    groups.append(Group(package, x, y, len(query.targets)))
    return groups


def standardise(groups: list[Group]) -> tuple[np.ndarray, np.ndarray]:
    rows = np.vstack([g.x for g in groups])
    std = rows.std(axis=0)
    return rows.mean(axis=0), np.where(std > 1e-9, std, 1.0)


def pairs(groups: list[Group], mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """x_target - x_other for every (target, other candidate) of every query, standardised;
    each query weighs the same, however many pairs it has."""
    out = [np.zeros((0, len(mean) + 1))]
    for g in groups:
        if g.y.all() or not g.y.any():
            continue
        z = (g.x - mean) / std
        diff = (z[g.y][:, None, :] - z[~g.y][None, :, :]).reshape(-1, z.shape[1])
        # Rows carry their query's weight in a last column, read by fit().
        out.append(np.hstack([diff, np.full((len(diff), 1), 1.0 / len(diff))]))
    return np.vstack(out)


def fit(diffs: np.ndarray, lam: float, steps: int = 3000, lr: float = 0.3) -> np.ndarray:
    """Minimise sum_q w_q sum_pairs log(1 + exp(-w.d)) / Q + lam/2 |w|^2 by gradient descent."""
    d, weight = diffs[:, :-1], diffs[:, -1]
    queries = max(weight.sum(), 1.0)
    w = np.zeros(d.shape[1])
    for _ in range(steps):
        margin = d @ w
        p = 1.0 / (1.0 + np.exp(np.clip(margin, -30, 30)))  # sigmoid(-margin)
        grad = -(d * (weight * p)[:, None]).sum(axis=0) / queries + lam * w
        w -= lr * grad
    return w


def metrics(groups: list[Group], ranker: LinearRanker | None) -> dict[str, float]:
    """R@1, R@5 and MRR@10 of the pools in the ranker's order (or as retrieved)."""
    r1 = r5 = mrr = pool = 0.0
    for g in groups:
        pool += g.y.sum() / g.targets
        order = ranker.order(g.x) if ranker is not None else list(range(len(g.y)))
        hits = g.y[order]
        r1 += hits[:1].sum() / g.targets
        r5 += hits[:5].sum() / g.targets
        first = np.flatnonzero(hits[:10])
        mrr += 1.0 / (first[0] + 1) if len(first) else 0.0
    n = max(1, len(groups))
    return {"n": len(groups), "R@1": r1 / n, "R@5": r5 / n, "MRR@10": mrr / n, "R@30": pool / n}


def train(groups: list[Group], lam: float, keep: np.ndarray | None = None) -> LinearRanker:
    """Fit on the columns `keep` marks (all by default); the others get weight 0, mean 0 and
    std 1, so a ranker over a few features is still a full-width file."""
    mean, std = standardise(groups)
    keep = np.ones(len(FEATURES), dtype=bool) if keep is None else keep
    cols = np.flatnonzero(keep)
    sub = [Group(g.package, g.x[:, cols], g.y, g.targets) for g in groups]
    w = np.zeros(len(FEATURES))
    w[cols] = fit(pairs(sub, mean[cols], std[cols]), lam)
    return LinearRanker(w, np.where(keep, mean, 0.0), np.where(keep, std, 1.0))


def cross_validate(
    groups: list[Group], lam: float, keep: np.ndarray | None = None
) -> dict[str, dict[str, float]]:
    """Leave one repository out: train on the others, score it, for each dev repository."""
    folds = {}
    for package in sorted({g.package for g in groups}):
        train_on = [g for g in groups if g.package != package]
        test_on = [g for g in groups if g.package == package]
        folds[package] = metrics(test_on, train(train_on, lam, keep))
    return folds


def pooled(folds: dict[str, dict[str, float]]) -> dict[str, float]:
    n = sum(f["n"] for f in folds.values())
    metrics = ("R@1", "R@5", "MRR@10", "R@30")
    return {m: sum(f[m] * f["n"] for f in folds.values()) / n for m in metrics}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--devcorpus", type=Path, default=DEVCORPUS)
    parser.add_argument("--queries-dir", type=Path, default=DEV_QUERIES)
    parser.add_argument("--layout", choices=(*LAYOUTS, "both"), default="both")
    parser.add_argument("--out", type=Path, default=DEFAULT_RANKER_PATH)
    parser.add_argument("--dry-run", action="store_true", help="cross-validate, write nothing")
    parser.add_argument(
        "--features", default="all", help=f"{', '.join(FEATURE_SETS)}, or comma-separated names"
    )
    args = parser.parse_args(argv)
    chosen = FEATURE_SETS.get(args.features) or tuple(args.features.split(","))
    unknown = set(chosen) - set(FEATURES)
    if unknown:
        parser.error(f"unknown features: {', '.join(sorted(unknown))}")
    keep = np.array([f in chosen for f in FEATURES])
    layouts = LAYOUTS if args.layout == "both" else (args.layout,)
    model = OnnxEmbedder(resolve_model_files(env=os.environ))
    groups = collect(args.devcorpus, args.queries_dir, layouts, model)
    packages = sorted({g.package for g in groups})
    print(f"{len(groups)} query pools over {len(packages)} dev repositories ({', '.join(layouts)})")
    base = {p: metrics([g for g in groups if g.package == p], None) for p in packages}
    print(f"{'as retrieved':<16}" + _line(pooled(base)))
    best: tuple[float, float] | None = None
    for lam in LAMBDAS:
        folds = cross_validate(groups, lam, keep)
        overall = pooled(folds)
        print(f"{'cv lambda=' + str(lam):<16}" + _line(overall))
        if best is None or overall["MRR@10"] > best[1]:
            best = (lam, overall["MRR@10"])
    assert best is not None
    lam = best[0]
    folds = cross_validate(groups, lam, keep)
    print(f"\nleave-one-repository-out, lambda={lam}:")
    for package in packages:
        print(f"  {package:<28} base {_line(base[package])}   ranked {_line(folds[package])}")
    ranker = train(groups, lam, keep)
    weights = dict(zip(FEATURES, np.round(ranker.weights, 3).tolist(), strict=True))
    print("\nweights (standardised features):")
    for name, w in sorted(weights.items(), key=lambda kv: -abs(kv[1])):
        print(f"  {name:<16}{w:+.3f}")
    if args.dry_run:
        return 0
    cv = pooled(folds)
    data = ranker.as_json(
        trained_on=packages,
        layouts=list(layouts),
        queries=len(groups),
        l2=lam,
        feature_set=args.features,
        pool=POOL,
        cv_leave_one_repo_out={k: round(v, 4) for k, v in cv.items()},
        as_retrieved={k: round(v, 4) for k, v in pooled(base).items()},
        made_by="bench/experiments/train_ranker.py",
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"\nwrote {args.out}")
    return 0


def _line(m: dict[str, float]) -> str:
    return f"R@1 {m['R@1']:.3f}  R@5 {m['R@5']:.3f}  MRR@10 {m['MRR@10']:.3f}  R@30 {m['R@30']:.3f}"


if __name__ == "__main__":
    raise SystemExit(main())
