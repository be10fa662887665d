"""Time to BM25-searchable and the full run of `gleambrctl index`, two checkouts interleaved.

    .venv/bin/python bench/searchable_early.py [--chunks 1000] [--rounds 2]
        [--other /work/main] [--json out.json]

Issue 14: a run writes chunks and the full-text index first and embeds behind, so a fresh
index answers BM25 queries long before its vectors are in. Each round indexes the same fresh
corpus (renamed copies of the example, `_corpus.generate_variants`: no text repeats) with
this checkout's CLI and with the --other checkout's (PYTHONPATH), in alternating order, each
into a new index file with its own empty embed cache. While a run goes, this process polls
the index every 50 ms until it answers: "searchable" is the first moment a read-only open
answers a BM25 query (with every chunk of the run in the index: a part would be an error);
"full" is the run's wall time.

On a checkout without issue 14, the index appears only when the run ends, so its searchable
time is its full time. Ratios are this checkout over the other, per round, then the median.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import _corpus as bc

HERE = bc.REPO


def searchable_now(db: Path) -> int:
    """Chunks a BM25 query can see in the index as readers find it now (0: not yet)."""
    from gbr.core.errors import GbrError
    from gbr.core.store.facade import Store

    if not db.is_file():
        return 0
    try:
        with Store.open(db, read_only=True) as store:
            if not store.bm25("isbn", 5):
                return 0
            return store.counts()["chunks"]
    except GbrError:
        return 0  # renamed or locked under us: try again at the next poll


def one_run(
    tree: Path, corpus: Path, work: Path, label: str, stop_when_searchable: bool = False
) -> dict[str, Any]:
    db = work / f"{label}.duckdb"
    env = {
        **os.environ,
        "PYTHONPATH": str(tree),
        "GBR_HOME": str(work / f"home-{label}"),
        "NO_COLOR": "1",
    }
    command = [bc.gleambrctl(), "index", str(corpus), "--db", str(db), "--json", "--yes"]
    started = time.monotonic()
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    seen: list[tuple[float, int]] = []
    # Polling stops once the index answers: each poll opens it and queries, and 20 polls a
    # second would take CPU from the run they time (it did: the full run looked 2x slower).
    while proc.poll() is None and not (seen and seen[-1][1] > 0):
        seen.append((time.monotonic() - started, searchable_now(db)))
        time.sleep(0.05)
    if stop_when_searchable and seen and seen[-1][1] > 0:
        proc.terminate()  # SIGTERM: the run stops within about a second, keeping its chunks
        proc.communicate(timeout=120)
        return {"label": label, "chunks": seen[-1][1], "searchable": seen[-1][0], "full": None}
    out, err = proc.communicate()
    full = time.monotonic() - started
    if proc.returncode != 0:
        raise SystemExit(f"{label}: exit {proc.returncode}: {err.strip()[-500:]}")
    summary = json.loads(out)
    chunks = int(summary["chunks"])
    searchable = next((t for t, n in seen if n >= chunks), full)
    if seen and seen[-1][1] not in (0, chunks):
        raise SystemExit(f"{label}: readers saw {seen[-1][1]} of {chunks} chunks: a half run")
    return {"label": label, "chunks": chunks, "searchable": searchable, "full": full}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--other", type=Path, default=Path("/work/main"))
    parser.add_argument(
        "--searchable-only",
        action="store_true",
        help="time only this checkout's searchable moment, ending each run there (big sizes)",
    )
    parser.add_argument("--json")
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {"runs": [], "checks": []}

    def run(work: Path) -> None:
        model = bc.load_model()
        corpus = work / "corpus"
        made = bc.generate_variants(corpus, args.chunks, model)
        bc.log_step(f"corpus: {made.files} files, about {made.chunks} chunks")
        if args.searchable_only:
            for r in range(args.rounds):
                outcome = one_run(HERE, corpus, work, f"this-{r}", stop_when_searchable=True)
                outcome.update(round=r + 1, tree="this")
                results["runs"].append(outcome)
                bc.log_step(f"  {outcome}")
            return
        for r in range(args.rounds):
            order = [("this", HERE), ("other", args.other)]
            if r % 2:
                order.reverse()
            for name, tree in order:
                bc.log_step(f"round {r + 1}: {name} ({tree})")
                outcome = one_run(tree, corpus, work, f"{name}-{r}")
                outcome.update(round=r + 1, tree=name)
                results["runs"].append(outcome)
                bc.log_step(f"  {outcome}")

    def report(data: dict[str, Any]) -> None:
        if args.searchable_only:
            times = [x["searchable"] for x in data["runs"]]
            print(
                f"BM25-searchable (this checkout), chunks {data['runs'][0]['chunks']}: "
                + ", ".join(f"{t:.2f} s" for t in times)
            )
            data["checks"].append({"name": "searchable within 10 s", "ok": bc.median(times) <= 10})
            return
        rows = []
        ratios: dict[str, list[float]] = {"searchable": [], "full": []}
        for r in range(1, args.rounds + 1):
            mine = next(x for x in data["runs"] if x["round"] == r and x["tree"] == "this")
            other = next(x for x in data["runs"] if x["round"] == r and x["tree"] == "other")
            for key in ratios:
                ratios[key].append(mine[key] / other[key])
            rows.append(
                [
                    r,
                    mine["chunks"],
                    f"{mine['searchable']:.2f}",
                    f"{other['searchable']:.2f}",
                    f"{mine['full']:.2f}",
                    f"{other['full']:.2f}",
                ]
            )
        bc.print_table(
            "time to BM25-searchable and full run (s)",
            ["round", "chunks", "searchable this", "searchable other", "full this", "full other"],
            rows,
        )
        medians = {k: bc.median(v) for k, v in ratios.items()}
        data["ratios"] = medians
        print(
            f"median ratio this/other: searchable {medians['searchable']:.3f}, "
            f"full {medians['full']:.3f}; load {data['machine'].get('load_average_at_end')}"
        )
        data["checks"].append(
            {"name": "full run no slower (10 % noise)", "ok": medians["full"] < 1.1}
        )

    return bc.bench_main(args, "gbr-searchable-", results, run, report)


if __name__ == "__main__":
    sys.exit(main())
