"""Two `eval.py --json` runs, query by query: B - A for each metric, with its interval.

    .venv/bin/python bench/eval_compare.py A.json B.json [--variant shipped] [--variant-b NAME]

For a change that is not a search variant (an index-time setting such as GBR_TEST_WORDS),
the same variant is run twice, once per setting, each into its own `--out`; this pairs their
queries. Each run's JSON holds every query's R@1, R@5, R@10 and MRR@10 (`per_query`); the
interval is the 95 % percentile bootstrap over queries of the paired differences
(`bench.evaluation.bootstrap_interval`), narrower than comparing the two runs' intervals
since both answer the same queries. Works for `--devcorpus` runs (every layout and half)
and for `--corpus` runs alike.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.evaluation import METRICS, bootstrap_interval  # noqa: E402


def blocks(report: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(label, variants) of each table in a run: one per layout and half, or the one."""
    if "layouts" in report:
        for layout, halves in report["layouts"].items():
            for half, block in halves.items():
                yield f"{layout} {half}", block["variants"]
    else:
        yield str(report.get("corpus", "")), report["variants"]


def paired(a: dict[str, list[float]], b: dict[str, list[float]]) -> np.ndarray:
    """B's rows minus A's, for the queries both answered."""
    ids = sorted(set(a) & set(b))
    return np.array([b[i] for i in ids], dtype=np.float64) - np.array(
        [a[i] for i in ids], dtype=np.float64
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", type=Path, help="the run compared against")
    parser.add_argument("b", type=Path, help="the run compared")
    parser.add_argument("--variant", default="shipped", help="the variant of run A")
    parser.add_argument("--variant-b", default=None, help="of run B [default: --variant]")
    args = parser.parse_args(argv)
    name_b = args.variant_b or args.variant
    a, b = (json.loads(path.read_text()) for path in (args.a, args.b))
    print(
        f"| table | {name_b} (B) - {args.variant} (A) | queries | changed | "
        + " | ".join(f"{m} [95 % CI]" for m in METRICS)
        + " |\n|"
        + " --- |" * (4 + len(METRICS))
    )
    b_blocks = dict(blocks(b))
    for label, variants in blocks(a):
        if label not in b_blocks or args.variant not in variants or name_b not in b_blocks[label]:
            continue
        rows_a, rows_b = variants[args.variant], b_blocks[label][name_b]
        if "per_query" not in rows_a or "per_query" not in rows_b:
            print(f"| {label} | no per-query rows: run eval.py again | | | |")
            continue
        diff = paired(rows_a["per_query"], rows_b["per_query"])
        interval = bootstrap_interval(diff)
        changed = int(np.count_nonzero(np.any(diff != 0, axis=1)))
        cells = [
            f"{diff[:, n].mean():+.3f} [{interval[m][0]:+.3f}, {interval[m][1]:+.3f}]"
            for n, m in enumerate(METRICS)
        ]
        print(f"| {label} | | {len(diff)} | {changed} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
