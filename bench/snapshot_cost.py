"""What a staged `index` run costs: the copy of the index it writes, by index size.

    .venv/bin/python bench/snapshot_cost.py [--chunks 20000] [--json out.json]

An `index` run without a daemon writes `<index>.next` and renames it over the index, so that
readers keep the last complete index (gbr/core/store/snapshot.py). This measures, on one index of
about --chunks chunks built from renamed copies of the example (real chunks, real FTS index,
random unit vectors: the model's vectors would weigh the same and take an hour here):

1. size       the DuckDB file
2. copy       `snapshot._copy` (copy_file_range) of the file, median of 3
3. no-op run  `run_index(staged=True)` with nothing changed: the pre-check walks and hashes
              the tree and writes nothing (no copy)
4. one edit   `run_index` with one file changed, staged (copy + run + commit) and in place
              (staged=False), median of 3 each: the difference is what staging costs
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import _corpus as bc
import numpy as np

from gbr.actors.pipeline import IndexOptions, _index_meta, run_index
from gbr.core.parse.chunk_text import DEFAULT_EMBED_FORMAT
from gbr.core.parse.chunker import chunk_file, new_parser
from gbr.core.parse.walker import read_file, walk
from gbr.core.records import FileProblem
from gbr.core.store import snapshot
from gbr.core.store.facade import Store, check_root
from gbr.core.store.indexing import embed_now


class RandomVectors:
    """Unit vectors for the bench's synthetic index; token counts from the real model."""

    def __init__(self, model: Any) -> None:
        self.model_id = model.model_id
        self.dim = model.dim
        self.count_tokens = model.count_tokens
        self._rng = np.random.default_rng(7)

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        v = self._rng.standard_normal((len(texts), self.dim)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def build_index(root: Path, db: Path, model: Any) -> int:
    """The index run_index would write for `root`, with random vectors; returns chunks."""
    parser, limits, fake = new_parser(), bc.pipeline_limits(model), RandomVectors(model)
    total = 0
    with Store.open(db) as store:
        store.prepare(**_index_meta(model, DEFAULT_EMBED_FORMAT))
        check_root(store, root, db)
        for found in walk(root):
            if isinstance(found, FileProblem):
                continue
            source = read_file(found)
            if isinstance(source, FileProblem):
                continue
            chunks = chunk_file(source, parser, model.count_tokens, limits)
            if isinstance(chunks, FileProblem):
                continue
            stored = embed_now(chunks, fake)
            store.replace_file(source, stored)
            total += len(stored)
        store.refresh_fulltext()
        store.checkpoint()
    return total


def median_time(fn: Any, times: int = 3) -> float:
    runs = []
    for _ in range(times):
        started = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chunks", type=int, default=20000)
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--workdir", type=Path)
    args = ap.parse_args(argv)
    results: dict[str, Any] = {"checks": []}

    def run(work: Path) -> None:
        model = bc.load_model()
        root = work / "tree"
        corpus = bc.generate_variants(root, args.chunks, model)
        db = root / ".gbr" / "index.duckdb"
        bc.log_step(f"building an index of {corpus.files} files")
        chunks = build_index(root, db, model)
        size = db.stat().st_size
        copy = median_time(lambda: snapshot._copy(db, work / "copy.duckdb"))
        options = IndexOptions(root=root, db=db, staged=True, embed_cache=bc.shared_cache())
        noop_s, noop = bc.timed(lambda: run_index(options, model))
        edited = next(root.rglob("*.gleam"))
        original = edited.read_text()
        n = [0]

        def one_edit(staged: bool) -> None:
            n[0] += 1
            edited.write_text(original + f"\npub fn bench_edit_{n[0]}() {{ {n[0]} }}\n")
            run_index(
                IndexOptions(root=root, db=db, staged=staged, embed_cache=bc.shared_cache()), model
            )

        staged_s = median_time(lambda: one_edit(True))
        in_place_s = median_time(lambda: one_edit(False))
        results.update(
            files=corpus.files,
            chunks=chunks,
            db_bytes=size,
            copy_seconds=copy,
            copy_mb_per_second=size / 1e6 / copy if copy else None,
            noop_run_seconds=noop_s,
            noop_files_unchanged=noop.files_unchanged,
            one_edit_staged_seconds=staged_s,
            one_edit_in_place_seconds=in_place_s,
        )
        results["checks"].append(
            {"name": "no-op run copies nothing", "ok": not snapshot.next_path(db).exists()}
        )

    def report(r: dict[str, Any]) -> None:
        bc.print_table(
            "staged index runs",
            ["files", "chunks", "index", "copy s", "no-op run s", "1 edit staged s", "in place s"],
            [
                [
                    r.get("files"),
                    r.get("chunks"),
                    bc.mb(r.get("db_bytes", 0)),
                    f"{r.get('copy_seconds', 0):.3f}",
                    f"{r.get('noop_run_seconds', 0):.2f}",
                    f"{r.get('one_edit_staged_seconds', 0):.2f}",
                    f"{r.get('one_edit_in_place_seconds', 0):.2f}",
                ]
            ],
        )
        print(f"load average at end: {r['machine']['load_average_at_end']}")

    return bc.bench_main(args, "gbr-snapshot-", results, run, report)


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main())
