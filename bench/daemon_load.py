"""The daemon under load: /search throughput and latency by client count, and save-to-searchable.

    .venv/bin/python bench/daemon_load.py [--chunks 10000] [--duration 10] [--clients 1,4,20]
                                          [--saves 10] [--json out.json]

1. corpus   the example package verbatim plus renamed copies of it (`_corpus.generate_variants`)
            until the tree holds about --chunks chunks; `run_index` indexes it in this process
            (the same pipeline as the daemon's first pass, with the model already loaded here).
2. daemon   `gleambrctl serve ROOT --port 0` in a subprocess, on 127.0.0.1; its start-up pass
            finds every file unchanged. Port and pid come from its discovery file.
3. load     for each client count, that many threads (one httpx.Client each) post hybrid
            /search requests back to back for --duration seconds, cycling through the queries
            of bench/queries/*.jsonl: requests/s, p50/p95/p99 latency, and every non-200,
            malformed body or client error.
4. saves    with the daemon idle, append a uniquely named function to one file and poll
            /search for its name every --poll-ms until it is a hit: the time from the write
            to the first such answer, --saves times. The daemon's own figure (watcher batch
            to searchable, from its events) is shown next to it. Then --unpolled-saves more,
            with nobody searching, timed from the write to the daemon's `changes_searchable`
            event (logged just after the swap), which shows what the polling searches cost
            the indexer. Done on the scaled corpus and on a daemon over the plain example
            (--small-saves; 0 skips it).

The clients and the daemon share the machine's cores, and the machine is usually shared
with other work: "other CPU" is the share of all cores that other processes used during a
phase (this script and its daemon excluded). High values mean pessimistic figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _corpus as bc
import httpx
from evaluation import load_queries

from gbr.access.discovery import read_discovery
from gbr.actors.pipeline import IndexOptions, run_index
from gbr.core.llm import provider_env_vars
from gbr.core.parse.chunker import new_parser
from gbr.core.rank.rerank import RERANK_MODEL_DIR_ENV

SAVE_TARGET_S = 2.0  # the target: a saved single-file change searchable within 2 s
SAVE_FILE = "src/bookshelf/loan.gleam"  # in the example package: a large module, many chunks
QUERY_FILES = sorted((bc.REPO / "bench" / "queries").glob("*.jsonl"))
# What a provider key or a user config would change; the daemon starts from none of them.
SCRUBBED_ENV = (*provider_env_vars(), RERANK_MODEL_DIR_ENV, "GBR_TOKEN", "GBR_FAULTS")
HIT_KEYS = {"rank", "path", "module", "name", "kind", "start_line", "end_line", "score"}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument(
        "--chunks",
        type=int,
        default=10_000,
        help="chunks in the whole tree, example included (default 10000; below the\n"
        "example's size, the example alone)",
    )
    p.add_argument("--duration", type=float, default=10.0, help="seconds per client level")
    p.add_argument("--clients", default="1,4,20", help="client counts, comma separated")
    p.add_argument("-k", type=int, default=10, help="hits per search (default 10, as the CLI)")
    p.add_argument("--saves", type=int, default=10, help="timed saves on the scaled corpus")
    p.add_argument(
        "--small-saves",
        type=int,
        default=None,
        help="timed saves on the plain example (default: --saves; 0 skips that daemon)",
    )
    p.add_argument("--poll-ms", type=float, default=20.0, help="search poll interval after a save")
    p.add_argument(
        "--unpolled-saves",
        type=int,
        default=5,
        help="more saves per index, timed by the daemon's own event with nobody\n"
        "searching (default 5): what the polling searches cost the indexer",
    )
    p.add_argument("--save-timeout", type=float, default=60.0, help="give up on one save after")
    p.add_argument("--debounce-ms", type=int, default=200, help="the daemon's --debounce-ms")
    p.add_argument("--workdir", type=Path, default=None, help="where to build (default: a tmp dir)")
    p.add_argument("--keep", action="store_true", help="keep the work dir (and its index)")
    p.add_argument("--json", metavar="FILE", default=None, help="also write the results as JSON")
    args = p.parse_args(argv)
    try:
        args.client_levels = [int(c) for c in args.clients.split(",") if c.strip()]
    except ValueError:
        p.error(f"--clients takes whole numbers separated by commas, not {args.clients!r}")
    if not args.client_levels or min(args.client_levels) < 1:
        p.error("--clients needs at least one count, each at least 1")
    if args.small_saves is None:
        args.small_saves = args.saves
    if args.duration <= 0 or args.poll_ms <= 0:
        p.error("--duration and --poll-ms must be positive")
    if min(args.saves, args.small_saves, args.unpolled_saves) < 0:
        p.error("--saves, --small-saves and --unpolled-saves must be >= 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    results: dict[str, Any] = {
        "args": {k: v for k, v in vars(args).items() if k != "client_levels"},
    }
    return bc.bench_main(
        args, "gbr-bench-daemon-", results, lambda work: run(args, work, results), report
    )


def run(args: argparse.Namespace, work: Path, results: dict[str, Any]) -> None:
    queries = [q.query for path in QUERY_FILES for q in load_queries(path)]
    if not queries:
        raise SystemExit("no queries in bench/queries/*.jsonl")
    results["queries"] = {"files": [p.name for p in QUERY_FILES], "count": len(queries)}

    bc.log_step("loading the model")
    model = bc.load_model()
    model.embed_batch(["fn warm_up() { Nil }"])
    root = work / "corpus"
    results["corpus"] = reuse_or_build_corpus(root, args.chunks, model)
    db = root / ".gbr" / "index.duckdb"
    bc.log_step(f"indexing {results['corpus']['gleam_files']} files (run_index, in process)")
    with bc.PeakRss() as rss:
        summary = run_index(IndexOptions(root=root, db=db, embed_cache=bc.shared_cache()), model)
    with bc.open_read_only(db) as store:  # also waits until the pipeline has let go of it
        chunks = store.counts()["chunks"]  # a reused index wrote none in this run
    results["corpus"] |= {
        "chunks": chunks,
        "chunks_indexed_now": summary.chunks,
        "files_dropped": summary.files_dropped,
        "files_partial": summary.files_partial,
        "index_seconds": summary.seconds,
        "index_others_cpu": rss.others_cpu,
        "db_bytes": db.stat().st_size,
    }

    bc.log_step("starting the daemon on the corpus")
    daemon = Daemon.start(root, work / "corpus-daemon.log", work / "home", args.debounce_ms)
    try:
        results["daemon"] = {"ready_seconds": daemon.ready_seconds, "pid": daemon.pid}
        warm_up(daemon, queries, args.k)
        results["load"] = []
        for clients in args.client_levels:
            bc.log_step(f"load: {clients} client(s) for {args.duration:g} s")
            results["load"].append(load_level(daemon, clients, queries, args))
        results["daemon"]["rss_bytes"] = daemon.rss()
        bc.log_step(f"save-to-searchable on the corpus, {args.saves} saves")
        results["saves"] = {
            "corpus": save_to_searchable(
                daemon, f"bookshelf/{SAVE_FILE}", args.saves, args, results["corpus"]["chunks"]
            )
        }
    finally:
        results["daemon"] = results.get("daemon", {}) | {"exit_code": daemon.stop()}
    results["fts_rebuild_seconds"] = bc.time_fts_refresh(db)

    if args.small_saves:
        shutil.rmtree(work / "small", ignore_errors=True)  # its first pass is part of the run
        small = bc.copy_example(work / "small")
        bc.log_step("starting a daemon on the plain example (its first pass indexes it)")
        plain = Daemon.start(small, work / "small-daemon.log", work / "home", args.debounce_ms)
        try:
            chunks = plain.status()["chunks"]
            bc.log_step(f"save-to-searchable on the plain example ({chunks} chunks)")
            results["saves"]["example"] = save_to_searchable(
                plain, SAVE_FILE, args.small_saves, args, chunks
            )
            results["saves"]["example"]["daemon_ready_seconds"] = plain.ready_seconds
        finally:
            plain.stop()
    results["checks"] = checks(results)


def reuse_or_build_corpus(root: Path, chunks: int, model: Any) -> dict[str, Any]:
    """A corpus a kept --workdir already holds for this size, else a new one.

    A reused tree is indexed again all the same: unchanged files cost a hash each, and
    anything a previous run left half-done (a bench save, a killed run) is caught up.
    """
    marker = root.parent / "corpus.json"
    if marker.is_file() and root.is_dir():
        known = json.loads(marker.read_text("utf-8"))
        if known.get("target_chunks") == chunks:
            bc.log_step(f"reusing the corpus in {root}")
            return known | {"reused": True}
    shutil.rmtree(root, ignore_errors=True)
    bc.log_step(f"generating a corpus of about {chunks} chunks")
    built = build_corpus(root, chunks, model)
    marker.write_text(json.dumps(built), "utf-8")
    return built | {"reused": False}


def build_corpus(root: Path, chunks: int, model: Any) -> dict[str, Any]:
    """The example plus generated variants; chunk counts as the bench's chunker sees them."""
    root.mkdir(parents=True, exist_ok=True)
    example = bc.copy_example(root)
    parser, limits = new_parser(), bc.pipeline_limits(model)
    example_chunks = sum(
        bc.chunk_count(text, rel, model, parser, limits)
        for rel, text in bc.example_sources(include_broken=False).items()
    )
    generated = bc.generate_variants(root, max(0, chunks - example_chunks), model)
    return {
        "root": str(root),
        "example": str(example.relative_to(root)),
        "packages": 1 + len(generated.packages),
        "gleam_files": bc.count_gleam_files(root),
        "target_chunks": chunks,
    }


# ----------------------------------------------------------------------------- the daemon


@dataclass
class Daemon:
    """`gleambrctl serve` in a subprocess; its log goes to a file, so it never blocks."""

    proc: subprocess.Popen[bytes]
    root: Path
    url: str
    log: Path
    ready_seconds: float
    token: str | None = None  # sent as a bearer token when the daemon was started with one

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def events(self) -> Path:
        return self.root / ".gbr" / "events.jsonl"

    @classmethod
    def start(
        cls,
        root: Path,
        log: Path,
        home: Path,
        debounce_ms: int,
        db: Path | None = None,
        token: str | None = None,
    ) -> Daemon:
        """With `db`, the index file outside the tree (`--db`); with `token`, `--token`."""
        env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
        env |= {"GBR_HOME": str(home), "NO_COLOR": "1"}
        cmd = [bc.gleambrctl(), "serve", str(root), "--port", "0"]
        cmd += ["--debounce-ms", str(debounce_ms)]
        if db is not None:
            cmd += ["--db", str(db)]
        if token is not None:
            env["GBR_TOKEN"] = token  # not on the command line, where `ps` shows it
        started = time.perf_counter()
        with log.open("wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        db = db if db is not None else root / ".gbr" / "index.duckdb"

        def published() -> str | None:
            if proc.poll() is not None:
                tail = log.read_text(errors="replace")[-2000:]
                raise SystemExit(f"the daemon exited with {proc.returncode}:\n{tail}")
            try:
                info = read_discovery(db)
            except ValueError:
                return None
            return info.url if info is not None and info.pid == proc.pid else None

        try:
            url = poll(published, "the daemon's discovery file", timeout=300)
            daemon = cls(proc, root, url, log, 0.0, token)
            daemon.wait_idle(timeout=1800)  # a first pass over a fresh tree embeds it all
        except BaseException:
            proc.kill()
            proc.wait(30)
            raise
        daemon.ready_seconds = time.perf_counter() - started
        return daemon

    def client(self) -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.token}"} if self.token else {}
        return httpx.Client(base_url=self.url, timeout=120, trust_env=False, headers=headers)

    def status(self) -> dict[str, Any]:
        with self.client() as client:
            response = client.get("/status")
        response.raise_for_status()
        return response.json()

    def idle(self) -> bool:
        s = self.status()
        return bool(s["ready"] and s["indexing"] is None and s["queue_depth"] == 0)

    def wait_idle(self, timeout: float = 120, settle: float = 0.0) -> None:
        """Idle, and still idle `settle` s later (a watcher batch may be on its way)."""
        poll(self.idle, "the daemon to be idle", timeout)
        if settle:
            time.sleep(settle)
            poll(self.idle, "the daemon to be idle", timeout)

    def rss(self) -> int | None:
        try:
            import psutil

            return int(psutil.Process(self.pid).memory_info().rss)
        except Exception:
            return None

    def cpu_seconds(self) -> float | None:
        try:
            import psutil

            times = psutil.Process(self.pid).cpu_times()
            return times.user + times.system
        except Exception:
            return None

    def stop(self) -> int:
        """SIGTERM (a clean stop with a checkpoint), then a kill if it hangs."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(30)


def poll(check: Callable[[], Any], what: str, timeout: float, every: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except httpx.HTTPError:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


# ----------------------------------------------------------------------------------- load


def body_error(response: httpx.Response, query: str) -> str | None:
    """Why an answer is not a well-formed `search --json` object, or None."""
    if response.status_code != 200:
        return f"HTTP {response.status_code}: {response.text[:160]}"
    try:
        body = response.json()
    except ValueError:
        return f"not JSON: {response.text[:160]}"
    if not isinstance(body, dict) or body.get("query") != query:
        return f"not the answer to this query: {str(body)[:160]}"
    results = body.get("results")
    if not isinstance(results, list) or any(
        not isinstance(h, dict) or not set(h) >= HIT_KEYS for h in results
    ):
        return f"malformed results: {str(results)[:160]}"
    return None


def warm_up(daemon: Daemon, queries: list[str], k: int) -> None:
    """First searches plan DuckDB's FTS macro and page the vectors in: not part of a level."""
    with daemon.client() as client:
        for query in queries[:10]:
            client.post("/search", json={"query": query, "k": k})


def load_level(
    daemon: Daemon, clients: int, queries: list[str], args: argparse.Namespace
) -> dict[str, Any]:
    """`clients` closed-loop clients for args.duration seconds, each with its own connection."""
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[list[str]] = [[] for _ in range(clients)]
    start = threading.Barrier(clients + 1)
    stop_at = [0.0]

    def client_loop(me: int) -> None:
        offset = me * len(queries) // clients
        with daemon.client() as client:
            client.get("/health")  # connect before the clock starts
            start.wait()
            i = 0
            while time.perf_counter() < stop_at[0]:
                query = queries[(offset + i) % len(queries)]
                i += 1
                began = time.perf_counter()
                try:
                    response = client.post("/search", json={"query": query, "k": args.k})
                    problem = body_error(response, query)
                except httpx.HTTPError as exc:
                    problem = f"{type(exc).__name__}: {exc}"
                elapsed = time.perf_counter() - began
                if problem is None:
                    latencies[me].append(elapsed)
                else:
                    errors[me].append(problem)

    threads = [threading.Thread(target=client_loop, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    cpu0 = daemon.cpu_seconds()
    with bc.PeakRss(pids=[daemon.pid]) as rss:
        began = time.perf_counter()
        stop_at[0] = began + args.duration
        start.wait()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - began
    cpu1 = daemon.cpu_seconds()
    ok = sorted(x * 1000 for per in latencies for x in per)
    failed = [e for per in errors for e in per]
    return {
        "clients": clients,
        "seconds": wall,
        "requests": len(ok) + len(failed),
        "ok": len(ok),
        "errors": len(failed),
        "error_samples": failed[:5],
        "qps": len(ok) / wall,
        "p50_ms": bc.percentile(ok, 50),
        "p95_ms": bc.percentile(ok, 95),
        "p99_ms": bc.percentile(ok, 99),
        "max_ms": ok[-1] if ok else float("nan"),
        "per_client_requests": [len(x) + len(e) for x, e in zip(latencies, errors, strict=True)],
        "daemon_cpu_cores": (cpu1 - cpu0) / wall if cpu0 is not None and cpu1 is not None else None,
        "others_cpu": rss.others_cpu,
    }


# ---------------------------------------------------------------------------------- saves


def daemon_lags(events: Path, offset: int) -> tuple[list[float], int]:
    """`changes_searchable` seconds the daemon logged after `offset`, and the new offset."""
    found, offset = bc.events_after(events, offset)
    lags = [float(e["seconds"]) for e in found if e.get("event") == "changes_searchable"]
    return lags, offset


def save_to_searchable(
    daemon: Daemon, rel: str, saves: int, args: argparse.Namespace, chunks: int
) -> dict[str, Any]:
    """Append a new function, then poll /search for its name until it is a hit; `saves` times.

    The file is put back as it was afterwards (and the daemon left idle on it), so a kept
    --workdir does not grow a function per save from one run to the next.
    """
    target = daemon.root / rel
    original = target.read_bytes()
    tag = uuid.uuid4().hex[:8]
    runs: list[dict[str, Any]] = []
    unpolled: list[dict[str, Any]] = []
    try:
        with daemon.client() as client:
            for i in range(saves):
                daemon.wait_idle(settle=0.3)
                runs.append(one_save(daemon, client, target, f"bench_saved_{tag}_{i}", args))
            for i in range(args.unpolled_saves if saves else 0):
                daemon.wait_idle(settle=0.3)
                name = f"bench_unpolled_{tag}_{i}"
                unpolled.append(one_save(daemon, None, target, name, args))
    finally:
        target.write_bytes(original)
        daemon.wait_idle(settle=0.5)
    found_s = [r["seconds"] for r in runs if r["found"]]
    lags = [lag for r in runs for lag in r["daemon_lag_seconds"]]
    quiet = [r["seconds"] for r in unpolled if r["found"]]
    return {
        "file": rel,
        "chunks": chunks,
        "saves": len(runs),
        "found": len(found_s),
        "timeouts": len(runs) - len(found_s),
        "poll_errors": sum(r["poll_errors"] for r in runs),
        "p50_s": bc.percentile(found_s, 50),
        "max_s": max(found_s) if found_s else float("nan"),
        "daemon_lag_p50_s": bc.percentile(lags, 50),
        "daemon_lag_max_s": max(lags) if lags else float("nan"),
        "runs": runs,
        "unpolled": {
            "saves": len(unpolled),
            "timeouts": len(unpolled) - len(quiet),
            "p50_s": bc.percentile(quiet, 50),
            "max_s": max(quiet) if quiet else float("nan"),
            "runs": unpolled,
        },
    }


def one_save(
    daemon: Daemon, client: httpx.Client | None, target: Path, name: str, args: argparse.Namespace
) -> dict[str, Any]:
    """The clock starts just before the write and stops at the first answer that has `name`.

    Without a client nothing searches: the clock stops when the daemon's events file shows
    the batch searchable, read every --poll-ms (a file read costs the daemon nothing).
    """
    offset = daemon.events.stat().st_size if daemon.events.exists() else 0
    polls, found, errors = 0, False, 0
    began = time.perf_counter()
    with target.open("a", encoding="utf-8") as handle:
        handle.write(f"\n/// Saved by the daemon bench.\npub fn {name}() -> Int {{ 1 }}\n")
    while time.perf_counter() - began < args.save_timeout:
        sent = time.perf_counter()
        polls += 1
        if client is None:
            found = bool(daemon_lags(daemon.events, offset)[0])
        else:
            try:
                response = client.post("/search", json={"query": name, "k": args.k})
                if response.status_code == 200:
                    found = any(h["name"] == name for h in response.json()["results"])
                else:
                    errors += 1
            except httpx.HTTPError:
                errors += 1
        if found:
            break
        time.sleep(max(0.0, args.poll_ms / 1000 - (time.perf_counter() - sent)))
    seconds = time.perf_counter() - began
    daemon.wait_idle(settle=0.3)  # the batch's events are all written once it is idle
    lags, _ = daemon_lags(daemon.events, offset)
    return {
        "seconds": seconds,
        "found": found,
        "polls": polls,
        "poll_errors": errors,
        "daemon_lag_seconds": lags,
    }


# --------------------------------------------------------------------------------- report


def checks(r: dict[str, Any]) -> list[dict[str, Any]]:
    out = [
        {
            "name": f"/search errors with {level['clients']} client(s)",
            "value": level["errors"],
            "target": "0",
            "ok": level["errors"] == 0 and level["ok"] > 0,
        }
        for level in r["load"]
    ]
    for label, s in r["saves"].items():
        if not s["saves"]:
            continue
        out.append(
            {
                "name": f"save-to-searchable max, {label} ({s['chunks']} chunks)",
                "value": s["max_s"],
                "target": f"<= {SAVE_TARGET_S:g} s",
                "ok": s["timeouts"] == 0 and s["max_s"] <= SAVE_TARGET_S,
            }
        )
    return out


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def report(r: dict[str, Any]) -> None:
    if "checks" not in r:
        return
    m, c = r["machine"], r["corpus"]
    bc.print_table(
        f"daemon /search under load  ({c['chunks']} chunks in {c['gleam_files']} files, hybrid, "
        f"k={r['args']['k']}, {r['queries']['count']} queries, {m['cpus']} CPUs, load avg "
        f"{m['load_average_at_start']} -> {m['load_average_at_end']})",
        [
            "clients",
            "requests",
            "queries/s",
            "p50",
            "p95",
            "p99",
            "max",
            "errors",
            "daemon CPU",
            "other CPU",
        ],
        [
            [
                x["clients"],
                x["requests"],
                f"{x['qps']:.1f}",
                f"{x['p50_ms']:.1f} ms",
                f"{x['p95_ms']:.1f} ms",
                f"{x['p99_ms']:.1f} ms",
                f"{x['max_ms']:.1f} ms",
                x["errors"],
                "n/a" if x["daemon_cpu_cores"] is None else f"{x['daemon_cpu_cores']:.2f} cores",
                _pct(x["others_cpu"]),
            ]
            for x in r["load"]
        ],
    )
    for x in r["load"]:
        for sample in x["error_samples"]:
            print(f"  error with {x['clients']} client(s): {sample}")
    bc.print_table(
        f"save-to-searchable  (append one function, poll /search every {r['args']['poll_ms']:g} "
        f"ms; daemon --debounce-ms {r['args']['debounce_ms']})",
        [
            "index",
            "file",
            "saves",
            "p50",
            "max",
            "daemon lag p50",
            "timeouts",
            "unpolled p50 / max",
            "target",
            "result",
        ],
        [
            [
                f"{label} ({s['chunks']} chunks)",
                s["file"],
                s["saves"],
                f"{s['p50_s']:.2f} s",
                f"{s['max_s']:.2f} s",
                f"{s['daemon_lag_p50_s']:.2f} s",
                s["timeouts"] + s["unpolled"]["timeouts"],
                f"{s['unpolled']['p50_s']:.2f} s / {s['unpolled']['max_s']:.2f} s"
                if s["unpolled"]["saves"]
                else "",
                f"max <= {SAVE_TARGET_S:g} s",
                bc.status(s["timeouts"] == 0 and s["max_s"] <= SAVE_TARGET_S),
            ]
            for label, s in r["saves"].items()
            if s["saves"]
        ],
    )
    how = "a kept corpus, caught up" if c["reused"] else "corpus indexed in process"
    print(
        f"{how} in {c['index_seconds']:.1f} s "
        f"(other CPU {_pct(c['index_others_cpu'])}); daemon ready on it in "
        f"{r['daemon']['ready_seconds']:.1f} s; one full-text rebuild alone: "
        f"{r['fts_rebuild_seconds']:.2f} s"
    )
    print(
        "daemon lag = the daemon's own 'changes_searchable' figure: from the watcher's batch "
        "(after its debounce) to searchable.\nunpolled = write to that event with nobody "
        "searching; the gap to p50 is what the polling searches cost the indexer."
    )
    noisy = [
        f"{x['clients']} clients {_pct(x['others_cpu'])}"
        for x in r["load"]
        if (x["others_cpu"] or 0.0) > bc.NOISY_OTHERS_CPU
    ]
    if noisy:
        print(
            f"WARNING: other processes kept the CPUs busy ({', '.join(noisy)}); "
            "the figures are pessimistic."
        )
    print()
    for check in r["checks"]:
        value = check["value"]
        shown = f"{value:.2f} s" if isinstance(value, float) else str(value)
        print(f"{bc.status(check['ok'])}  {check['name']}: {shown} (target {check['target']})")


if __name__ == "__main__":
    sys.exit(main())
