"""Shared helpers for the benchmarks: synthetic Gleam corpora, model loading, timing, tables.

Not a test module and not part of `gbr`: the scripts in this folder import it as `_corpus`.
"""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gbr.core.embed.cache_config import CacheConfig, cache_config
from gbr.core.embed.embedder import OnnxEmbedder, PaddingStats
from gbr.core.embed.model_files import resolve_model_files
from gbr.core.parse.chunker import ChunkLimits, TokenCounter, chunk_file, new_parser
from gbr.core.parse.walker import FoundFile, read_file, walk
from gbr.core.records import Chunk, FileProblem, PartialFile

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "examples" / "bookshelf"
BROKEN = "src/bookshelf/broken.gleam"

# ------------------------------------------------------------------------------------ model


def load_model(model_dir: str | None = None) -> OnnxEmbedder:
    """The real embedder, resolved the same way the CLI does (GBR_MODEL_DIR, else default)."""
    return OnnxEmbedder(resolve_model_files(model_dir, env=os.environ))


def reset_stats(model: OnnxEmbedder) -> None:
    model.stats = PaddingStats()


def quiet_telemetry(folder: Path) -> None:
    """Send gbr's structured events to a file so they do not interleave with the tables."""
    from gbr.core import telemetry

    telemetry.configure(folder / "events.jsonl", echo=False)


class EmbedCallRecorder:
    """Wraps `model.embed_batch` on the instance: counts calls, texts and time inside it.

    The pipeline's Embedder actor calls `embed_batch` once per flush, so this shows how
    big its batches are and how much of the wall time the model was actually busy.
    """

    def __init__(self, model: OnnxEmbedder, keep_texts: bool = False) -> None:
        self.model = model
        self.keep_texts = keep_texts
        self.batches: list[list[str]] = []  # the texts of each call, when keep_texts
        self.sizes: list[int] = []
        self.seconds = 0.0
        self._inner = model.embed_batch
        self._lock = threading.Lock()

    def __enter__(self) -> EmbedCallRecorder:
        inner = self._inner

        def embed_batch(texts: Sequence[str]) -> Any:
            started = time.perf_counter()
            try:
                return inner(texts)
            finally:
                with self._lock:
                    self.sizes.append(len(texts))
                    if self.keep_texts:
                        self.batches.append(list(texts))
                    self.seconds += time.perf_counter() - started

        self.model.embed_batch = embed_batch  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        del self.model.embed_batch  # back to the class method


# ----------------------------------------------------------------------------- the corpus

_FN = re.compile(r"^(?:pub\s+)?(?:fn|const)\s+([a-z][a-z0-9_]*)", re.MULTILINE)
_BOOKSHELF = re.compile(r"(?<![A-Za-z0-9_])bookshelf(?![A-Za-z0-9_])")


def example_sources(include_broken: bool = False) -> dict[str, str]:
    """Relative path -> text of every .gleam file in the example package."""
    out: dict[str, str] = {}
    for path in sorted(EXAMPLE.rglob("*.gleam")):
        rel = path.relative_to(EXAMPLE).as_posix()
        if rel.startswith((".gbr/", "build/")):
            continue
        if rel == BROKEN and not include_broken:
            continue
        out[rel] = path.read_text("utf-8")
    return out


def defined_names(sources: Iterable[str]) -> set[str]:
    """Names of top-level functions and constants, the identifiers a variant renames."""
    names: set[str] = set()
    for text in sources:
        names.update(_FN.findall(text))
    return names


def variant_text(text: str, suffix: str, names: set[str]) -> str:
    """The same module with `bookshelf` and every defined name renamed; still valid Gleam.

    Every occurrence of a name is renamed (definitions, calls, labels that happen to share
    the name, words in comments), which keeps the code parseable; it need not type-check.
    """
    text = _BOOKSHELF.sub(f"bookshelf_{suffix}", text)
    if names:
        pattern = re.compile(
            r"(?<![A-Za-z0-9_])(" + "|".join(sorted(map(re.escape, names), key=len)[::-1]) + r")"
            r"(?![A-Za-z0-9_])"
        )
        text = pattern.sub(lambda m: f"{m.group(1)}_{suffix}", text)
    return text


def variant_path(rel: str, suffix: str) -> str:
    """`src/bookshelf/isbn.gleam` -> `src/bookshelf_s3/isbn.gleam` (module names change too)."""
    parts = rel.split("/")
    out = []
    for part in parts:
        stem, dot, ext = part.partition(".")
        stem = re.sub(r"^bookshelf(?=$|_)", f"bookshelf_{suffix}", stem)
        out.append(stem + dot + ext)
    return "/".join(out)


def write_package(folder: Path, name: str, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "gleam.toml").write_text(f'name = "{name}"\nversion = "1.0.0"\n', "utf-8")
    for rel, text in files.items():
        dest = folder / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, "utf-8")


def copy_example(dest: Path) -> Path:
    """The example package verbatim (with broken.gleam, which the pipeline indexes in part)."""
    folder = dest / "bookshelf"
    shutil.copytree(
        EXAMPLE, folder, ignore=shutil.ignore_patterns(".gbr", "build", "*.beam", "*.erl")
    )
    return folder


@dataclass
class Corpus:
    root: Path
    packages: list[Path] = field(default_factory=list)
    files: int = 0
    chunks: int = 0  # as counted by the chunker (parse failures excluded)


def pipeline_limits(model: OnnxEmbedder) -> ChunkLimits:
    """The chunk size run_index uses: the window minus what the embed format reserves."""
    try:
        from gbr.core.parse.chunk_text import chunk_budget

        return ChunkLimits(max_tokens=chunk_budget(model.max_tokens))
    except ImportError:  # older gbr: the whole window minus [CLS] and [SEP]
        return ChunkLimits(max_tokens=model.max_tokens - 2)


def chunk_count(text: str, rel: str, model: OnnxEmbedder, parser: Any, limits: ChunkLimits) -> int:
    """Chunks the parser stage would cut from this text; 0 when it does not parse."""
    from gbr.core.records import SourceFile

    data = text.encode("utf-8")
    source = SourceFile(rel, "m", "p", data, "", len(data), 0.0)
    result = chunk_file(source, parser, model.count_tokens, limits)
    if isinstance(result, FileProblem):
        return 0
    return len(result.chunks) if isinstance(result, PartialFile) else len(result)


def generate_variants(
    root: Path, target_chunks: int, model: OnnxEmbedder, prefix: str = "gen"
) -> Corpus:
    """Renamed copies of the example, file by file, until they hold `target_chunks` chunks.

    Each copy `sN` renames the package, its module folder and every top-level function and
    constant with the suffix `_sN`, so no embedded text repeats and no cache can serve it.
    """
    sources = example_sources(include_broken=False)
    names = defined_names(sources.values())
    parser = new_parser()
    limits = pipeline_limits(model)
    corpus = Corpus(root)
    copy = 0
    while corpus.chunks < target_chunks:
        copy += 1
        suffix = f"s{copy}"
        files: dict[str, str] = {}
        for rel, text in sources.items():
            if corpus.chunks >= target_chunks:
                break
            new_rel = variant_path(rel, suffix)
            new_text = variant_text(text, suffix, names)
            n = chunk_count(new_text, new_rel, model, parser, limits)
            if n == 0:
                raise RuntimeError(f"generated {new_rel} ({suffix}) does not parse")
            files[new_rel] = new_text
            corpus.chunks += n
            corpus.files += 1
        folder = root / f"{prefix}_{suffix}"
        write_package(folder, f"bookshelf_{suffix}", files)
        corpus.packages.append(folder)
    return corpus


def duplicate_packages(root: Path, sources: Sequence[Path], min_files: int) -> list[Path]:
    """Copies of existing packages under new folder and package names, same module names.

    The embedded text of a chunk names its module but not its package or folder, so every
    chunk of a duplicate is served from the embedding cache: a cheap way to grow a tree to
    hundreds of files without paying the model again.
    """
    have = sum(1 for _ in root.rglob("*.gleam"))
    made: list[Path] = []
    i = 0
    while have < min_files:
        src = sources[i % len(sources)]
        i += 1
        dest = root / f"dup{i:03d}_{src.name}"
        shutil.copytree(src, dest)
        toml = dest / "gleam.toml"
        toml.write_text(re.sub(r'name = "([^"]+)"', rf'name = "\1_dup{i}"', toml.read_text()))
        have += sum(1 for _ in dest.rglob("*.gleam"))
        made.append(dest)
    return made


def count_gleam_files(root: Path) -> int:
    return sum(1 for _ in root.rglob("*.gleam"))


# --------------------------------------------------------------------------- measurement


def rss_bytes() -> int:
    try:
        import psutil

        return int(psutil.Process().memory_info().rss)
    except ImportError:  # pragma: no cover - psutil is a dev dependency
        return ru_maxrss_bytes()


def ru_maxrss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


class PeakRss:
    """Samples this process's RSS in a thread; `.peak` is the highest seen while active.

    It also measures how busy the CPUs were with *other* processes during the phase
    (`others_cpu`, a share of all cores), since a shared machine skews every timing.
    `pids` are processes the bench started (a daemon it measures): their CPU is the
    bench's own, not other processes'.
    """

    def __init__(self, interval: float = 0.05, pids: Sequence[int] = ()) -> None:
        self.interval = interval
        self.pids = tuple(pids)
        self.peak = 0
        self.start_rss = 0
        self.others_cpu: float | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._cpu0: tuple[float, float, float] | None = None

    def __enter__(self) -> PeakRss:
        self.start_rss = self.peak = rss_bytes()
        self._cpu0 = _cpu_snapshot(self.pids)
        self._thread = threading.Thread(target=self._loop, name="rss-sampler", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, rss_bytes())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.peak = max(self.peak, rss_bytes())
        end = _cpu_snapshot(self.pids)
        if self._cpu0 is not None and end is not None:
            wall = end[0] - self._cpu0[0]
            system_busy = end[1] - self._cpu0[1]
            mine = end[2] - self._cpu0[2]
            cores = os.cpu_count() or 1
            if wall > 0:
                self.others_cpu = max(0.0, (system_busy - mine) / (wall * cores))


def _cpu_snapshot(pids: Sequence[int] = ()) -> tuple[float, float, float] | None:
    """(wall, busy CPU seconds of the whole system, CPU seconds of this process and `pids`)."""
    try:
        import psutil
    except ImportError:  # pragma: no cover
        return None
    total = psutil.cpu_times()
    busy = sum(getattr(total, name, 0.0) for name in ("user", "nice", "system", "irq", "softirq"))
    mine = 0.0
    for pid in (None, *pids):
        try:
            proc = psutil.Process(pid).cpu_times()
        except psutil.Error:  # a process that already exited adds nothing more
            continue
        mine += proc.user + proc.system
    return time.monotonic(), busy, mine


_IDLE = {
    ("threading.py", "wait"),
    ("queue.py", "get"),
    ("_base.py", "wait"),
    ("threading.py", "_wait_for_tstate_lock"),
}


class StackSampler:
    """A poor man's sampling profiler over all threads (cProfile sees only one thread).

    Every `interval` it looks at each thread's Python stack. A thread parked in a queue
    or event wait counts as idle. For busy samples it counts the innermost frame ("self")
    and every distinct function on the stack ("total"); C calls (ONNX, DuckDB, tokenizers)
    are charged to the Python function that made them.
    """

    def __init__(self, interval: float = 0.01) -> None:
        self.interval = interval
        self.samples = 0
        self.busy: Counter[str] = Counter()
        self.self_hits: Counter[str] = Counter()
        self.total_hits: Counter[str] = Counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> StackSampler:
        self._thread = threading.Thread(target=self._loop, name="stack-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _loop(self) -> None:
        me = threading.get_ident()
        names = {}
        while not self._stop.wait(self.interval):
            self.samples += 1
            for t in threading.enumerate():
                names[t.ident] = t.name
            for ident, frame in sys._current_frames().items():
                if ident == me:
                    continue
                leaf = (os.path.basename(frame.f_code.co_filename), frame.f_code.co_name)
                if leaf in _IDLE:
                    continue
                self.busy[_thread_kind(names.get(ident, "?"))] += 1
                self.self_hits[_label(frame)] += 1
                seen: set[str] = set()
                f: Any = frame
                while f is not None:
                    label = _label(f)
                    if label not in seen:
                        seen.add(label)
                        self.total_hits[label] += 1
                    f = f.f_back

    def report(self, top: int = 15) -> list[dict[str, Any]]:
        """Top functions by total samples, as shares of all busy thread-samples."""
        busy = sum(self.busy.values()) or 1
        rows = []
        for label, hits in self.total_hits.most_common():
            # Only gbr and library frames: drop this folder's scripts, threading, importlib.
            if "/" not in label.split(":", 1)[0] or label.startswith("pykka/"):
                continue
            if label.startswith("gbr/actors/supervisor.py"):
                continue
            rows.append(
                {
                    "function": label,
                    "total_share": hits / busy,
                    "self_share": self.self_hits.get(label, 0) / busy,
                }
            )
            if len(rows) == top:
                break
        return rows


def _thread_kind(name: str) -> str:
    return re.sub(r"-\d+$", "", name)


def _label(frame: Any) -> str:
    path = frame.f_code.co_filename.replace(os.sep, "/")
    for marker in ("/gbr/", "/site-packages/"):
        if marker in path:
            path = ("gbr/" if marker == "/gbr/" else "") + path.split(marker, 1)[1]
            break
    else:
        path = os.path.basename(path)
    return f"{path}:{frame.f_code.co_name}"


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    result = fn()
    return time.perf_counter() - started, result


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def machine() -> dict[str, Any]:
    import platform

    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_at_start": load_average(),
    }


# ---------------------------------------------------------------------------------- output


def status(ok: bool | None) -> str:
    if ok is None:
        return ""
    return "PASS" if ok else "FAIL"


def print_table(title: str, headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(c) for c in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    line = "+-" + "-+-".join("-" * w for w in widths) + "-+"
    print()
    print(title)
    print(line)
    print("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |")
    print(line)
    for row in cells:
        print(
            "| "
            + " | ".join(
                c.rjust(w) if _numeric(c) else c.ljust(w) for c, w in zip(row, widths, strict=True)
            )
            + " |"
        )
    print(line)


def _numeric(cell: str) -> bool:
    return bool(re.fullmatch(r"[-+]?[\d,.]+( ?(s|ms|MB|%|/s|x))?", cell))


def write_json(path: str | None, payload: dict[str, Any]) -> None:
    if not path:
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(payload, indent=2, default=str) + "\n", "utf-8")
    print(f"\nwrote {path}")


def mb(n: float) -> str:
    return f"{n / 1e6:.0f} MB"


def log_step(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def events_after(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The telemetry events (JSON lines) written to `path` after byte `offset`, and the
    offset after the last complete line: a line still being written is left for next time."""
    try:
        with path.open("rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except FileNotFoundError:
        return [], offset
    complete = data[: data.rfind(b"\n") + 1]
    events: list[dict[str, Any]] = []
    for line in complete.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events, offset + len(complete)


def open_read_only(db: Path, attempts: int = 50) -> Any:
    """`Store.open(db, read_only=True)`, retried while the pipeline's connections close.

    `run_index` can return while an actor's `on_stop` is still closing its read-write
    DuckDB connection (pykka sets `actor_stopped` before it calls `on_stop`), and DuckDB
    refuses a read-only connection to a file this process still has open read-write.
    """
    import gc

    from gbr.core.errors import StoreError
    from gbr.core.store.facade import Store

    for attempt in range(attempts):
        try:
            return Store.open(db, read_only=True)
        except StoreError as exc:
            if "different configuration" not in str(exc) or attempt == attempts - 1:
                raise
            gc.collect()
            time.sleep(0.1)
    raise AssertionError("unreachable")


def bench_main(
    args: Any,
    prefix: str,
    results: dict[str, Any],
    run: Callable[[Path], None],
    report: Callable[[dict[str, Any]], None],
) -> int:
    """The frame every bench shares: a work folder (kept with --keep or --workdir), quiet
    telemetry, the machine's load before and after, the report, --json, and an exit code
    that is 1 when any target missed."""
    work = args.workdir or Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    # Every bench starts from an empty shared embed cache of its own (gbr.core.embed.cache):
    # the user's would serve vectors a timed phase is meant to compute, and grow with bench data.
    os.environ["GBR_HOME"] = str(work / "gbr-home")
    quiet_telemetry(work)
    results.setdefault("machine", machine())
    results.setdefault("args", {})["workdir"] = work
    try:
        run(work)
    finally:
        results["machine"]["load_average_at_end"] = load_average()
        if not args.keep and args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    report(results)
    write_json(args.json, results)
    return 0 if all(c["ok"] for c in results["checks"]) else 1


def shared_cache() -> CacheConfig | None:
    """The shared embed cache as the CLI would use it, in the bench's own GBR_HOME (set by
    `run_bench`): library callers get no cache unless they pass one."""
    return cache_config(os.environ)


NOISY_OTHERS_CPU = 0.15  # share of all cores used by other processes during a phase


def gleambrctl() -> str:
    """This venv's CLI, for benches that time it or start a daemon with it."""
    here = Path(sys.executable).parent / "gleambrctl"
    if here.is_file():
        return str(here)
    found = shutil.which("gleambrctl")
    if not found:
        raise SystemExit("gleambrctl not found; run `make install` and use .venv/bin/python")
    return found


def time_fts_refresh(db: Path) -> float:
    """One full `refresh_fulltext`: what a rebuild of the BM25 index costs at this size."""
    from gbr.core.store.facade import Store

    with Store.open(db) as store:
        seconds, _ = timed(store.refresh_fulltext)
    return seconds


# Doc-sentence queries (the silver benchmark, the mined training pairs): a doc shorter than
# this says too little to be a question, and a query is cut where a long first line ends.
MIN_DOC_CHARS = 20
QUERY_CHARS = 200


def first_sentence(prose: str) -> str:
    """The query a doc gives: its first sentence, as CodeSearchNet-style benchmarks take it."""
    return prose.split(". ")[0][:QUERY_CHARS]


def chunks_of(root: Path, count_tokens: TokenCounter, limits: ChunkLimits) -> Iterator[Chunk]:
    """Every chunk `gleambrctl index` would cut under `root` (files that do not parse give
    what the pipeline keeps of them). `limits` should be the pipeline's
    (bench._corpus.pipeline_limits), so that a node is split where indexing splits it."""
    parser = new_parser()
    for found in walk(root):
        if not isinstance(found, FoundFile):
            continue
        source = read_file(found)
        if isinstance(source, FileProblem):
            continue
        result = chunk_file(source, parser, count_tokens, limits)
        if isinstance(result, FileProblem):
            continue
        yield from result.chunks if isinstance(result, PartialFile) else result
