"""What a cross-encoder costs per question on its own: wall and CPU time to score a pool.

    nice -n 15 .venv/bin/python bench/experiments/cross_encoder_cost.py \\
        /work/data/s15/ce-l2 /work/data/s15/ce-l6-untrained --pools 10,15,30 --lengths 128,256

Each question is a silver train question with the passages of its first-stage pool
(`train-negatives.jsonl`, `train-chunks.jsonl`), read as `passage_text` builds them, and
scored as CrossEncoderReranker scores them in search. The machine is shared, so wall time
swings with the load; CPU time (this process, every thread) moves much less, and on a
quiet machine wall time is about CPU time over the cores used. Only the architecture
matters here (layers, tokens, pairs), so an untrained export costs what a trained one does.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from gbr.core.rank.rerank import CrossEncoderReranker, passage_text  # noqa: E402
from gbr.core.records import Hit  # noqa: E402

DATA = Path("/work/data/silver")


def pools(count: int, depth: int) -> list[tuple[str, list[str]]]:
    """The first `count` train questions (of every 50th line) with `depth` passages each."""
    texts: dict[tuple[str, str, str], str] = {}
    with (DATA / "train-chunks.jsonl").open() as f:
        for line in f:
            r = json.loads(line)
            hit = Hit(
                0,
                r["path"],
                r["module"],
                r["name"],
                r["kind"],
                0,
                0,
                0.0,
                r["text"],
                signature=r.get("signature") or "",
            )
            texts[(r["repo"], r["path"], r["name"])] = passage_text(hit, 2000)
    out = []
    with (DATA / "train-negatives.jsonl").open() as f:
        for n, line in enumerate(f):
            if n % 50:
                continue
            r = json.loads(line)
            found = [texts.get((r["repo"], x["path"], x["name"])) for x in r["negatives"]]
            passages = [p for p in found if p][:depth]
            if len(passages) == depth:
                out.append((r["query"], passages))
            if len(out) == count:
                break
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", type=Path, nargs="+", help="cross-encoder folders")
    ap.add_argument("--pools", default="10,15,30", help="pairs per question")
    ap.add_argument("--lengths", default="128,256", help="tokens per pair at most")
    ap.add_argument("--questions", type=int, default=40)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.pools.split(",")]
    questions = pools(args.questions, max(sizes))
    rows = []
    for length in (int(s) for s in args.lengths.split(",")):
        loaded = []
        for folder in args.models:
            started = time.perf_counter()
            loaded.append((folder, CrossEncoderReranker(folder, max_length=length)))
            load_ms = (time.perf_counter() - started) * 1000
            print(f"{folder.name}: session ready in {load_ms:.0f} ms", flush=True)
        for size in sizes:
            for folder, model in loaded:
                model.score(questions[0][0], questions[0][1][:size])  # first run: allocations
                wall, cpu = [], []
                for query, passages in questions:
                    w, c = time.perf_counter(), time.process_time()
                    model.score(query, passages[:size])
                    wall.append((time.perf_counter() - w) * 1000)
                    cpu.append((time.process_time() - c) * 1000)
                row = {
                    "model": folder.name,
                    "max_length": length,
                    "pairs": size,
                    "wall_p50_ms": round(statistics.median(wall), 1),
                    "cpu_p50_ms": round(statistics.median(cpu), 1),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
