"""The shared embed cache: embeds avoided and wall time, without it (before) and with it (after).

    .venv/bin/python bench/embed_cache.py [--json out.json] [--keep]

Two packages from the devcorpus (../shared/devcorpus) share a set of dependencies, copied
under each one's build/packages/ as `gleam deps download` would put them, and both are
indexed with --include-deps. Phases, each run twice in one sitting with one loaded model:
once with the cache off (IndexOptions.embed_cache=None, today's behaviour) and once with a
fresh cache in the work folder's own GBR_HOME:

1. package A   A's source and the dependencies: a cold cache, so this shows its write cost.
2. package B   B's own source and the same dependencies, into a new index: only B's own
               texts should reach the model.
3. bump        A again after a chunker version bump (CHUNKER_VERSION changed in-process):
               the index is wiped and every file chunked again; the texts did not change,
               so nothing should reach the model.

The machine is usually shared; "other CPU" is how busy the cores were with other processes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import _corpus as bc

from gbr.actors import pipeline
from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.embed.cache import EmbedCache, describe
from gbr.core.embed.cache_config import cache_config

DEVCORPUS = bc.REPO.parent / "shared" / "devcorpus"
PACKAGE_A = "TanklesXL__glint"
PACKAGE_B = "giacomocavalieri__birdie"
DEPS = (
    "gleam-community__ansi",
    "gleam-lang__regexp",
    "bcpeinhardt__simplifile",
    "gleam-lang__time",
    "hayleigh-dot-dev__modem",
    "gleam-community__maths",
)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--json", help="write the results here")
    p.add_argument("--keep", action="store_true", help="keep the work folder")
    p.add_argument("--workdir", type=Path, help="work here (kept)")
    return p.parse_args(argv)


def make_package(work: Path, name: str) -> Path:
    """The devcorpus package `name`, with the shared dependencies under build/packages."""
    dest = work / "packages" / name
    shutil.copytree(DEVCORPUS / name, dest, ignore=shutil.ignore_patterns(".gbr", "build"))
    for dep in DEPS:
        shutil.copytree(
            DEVCORPUS / dep / "src", dest / "build" / "packages" / dep.split("__")[1] / "src"
        )
    return dest


class CacheClock:
    """Seconds spent inside the cache's lookups and stores: its own cost, which the wall
    time of a run on a shared machine is too noisy to show."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._saved = {name: getattr(EmbedCache, name) for name in ("lookup", "store")}

    def __enter__(self) -> CacheClock:
        for name, inner in self._saved.items():
            setattr(EmbedCache, name, self._timed(inner))
        return self

    def _timed(self, inner: Any) -> Any:
        def call(*args: Any) -> Any:
            started = time.perf_counter()
            try:
                return inner(*args)
            finally:
                self.seconds += time.perf_counter() - started

        return call

    def __exit__(self, *exc: object) -> None:
        for name, inner in self._saved.items():
            setattr(EmbedCache, name, inner)


def run_phase(label: str, root: Path, db: Path, cached: bool, model: Any) -> dict[str, Any]:
    bc.log_step(f"{label} ({'cache on' if cached else 'cache off'})")
    cache = cache_config(os.environ) if cached else None
    options = IndexOptions(root=root, db=db, include_deps=True, embed_cache=cache)
    with bc.PeakRss() as rss, CacheClock() as clock:
        seconds, summary = bc.timed(lambda: run_index(options, model))
    return {
        "phase": label,
        "cache": cached,
        "chunks": summary.chunks,
        "embedded": summary.chunks_embedded,
        "cache_hits": summary.cache_hits,
        "seconds": round(seconds, 2),
        "cache_seconds": round(clock.seconds, 3),
        "others_cpu": rss.others_cpu,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results: dict[str, Any] = {"args": vars(args).copy(), "phases": [], "checks": []}

    def run(work: Path) -> None:
        model = bc.load_model()
        a, b = make_package(work, PACKAGE_A), make_package(work, PACKAGE_B)
        for cached in (False, True):
            tag = "on" if cached else "off"
            phases = results["phases"]
            phases.append(run_phase("package A", a, work / f"a-{tag}.duckdb", cached, model))
            phases.append(run_phase("package B", b, work / f"b-{tag}.duckdb", cached, model))
            saved = pipeline.CHUNKER_VERSION
            pipeline.CHUNKER_VERSION = f"{saved}-bench-bump"
            try:
                phases.append(run_phase("bump", a, work / f"a-{tag}.duckdb", cached, model))
            finally:
                pipeline.CHUNKER_VERSION = saved
        results["cache_file"] = describe(cache_config(os.environ))
        by = {(p["phase"], p["cache"]): p for p in results["phases"]}
        b_on, a_on = by[("package B", True)], by[("package A", True)]
        own_b = b_on["chunks"] - b_on["cache_hits"]
        results["checks"] = [
            {"name": "B embeds only its own texts", "ok": b_on["embedded"] == own_b},
            {"name": "bump embeds nothing", "ok": by[("bump", True)]["embedded"] == 0},
            {"name": "A with a cold cache embeds all", "ok": a_on["embedded"] == a_on["chunks"]},
        ]

    def report(res: dict[str, Any]) -> None:
        by = {(p["phase"], p["cache"]): p for p in res["phases"]}
        rows = []
        for phase in ("package A", "package B", "bump"):
            off, on = by[(phase, False)], by[(phase, True)]
            rows.append(
                [
                    phase,
                    on["chunks"],
                    off["embedded"],
                    on["embedded"],
                    off["embedded"] - on["embedded"],
                    f"{off['seconds']:.1f} s",
                    f"{on['seconds']:.1f} s",
                    f"{on['cache_seconds'] * 1000:.0f} ms",
                    f"{(off['others_cpu'] or 0):.0%} / {(on['others_cpu'] or 0):.0%}",
                ]
            )
        bc.print_table(
            "embed cache: before (off) and after (on)",
            [
                "phase",
                "chunks",
                "embedded off",
                "embedded on",
                "avoided",
                "wall off",
                "wall on",
                "in cache",
                "other CPU",
            ],
            rows,
        )
        cache = res.get("cache_file", {})
        print(f"cache file: {cache.get('rows')} vectors, {cache.get('bytes', 0) / 1e6:.1f} MB")
        for check in res["checks"]:
            print(f"{bc.status(check['ok'])}  {check['name']}")

    return bc.bench_main(args, "gbr-embed-cache-", results, run, report)


if __name__ == "__main__":
    sys.exit(main())
