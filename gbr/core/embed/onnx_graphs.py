"""ONNX graphs optimised once and kept, so that a cold start skips the optimisation.

onnxruntime optimises a model's graph each time a session is made: half of the 0.5-0.8 s
a cold `search` spent creating the embedder's session (2 cores). Here the first session
saves its optimised graph under the folder it is given (`$GBR_HOME/onnx/` from the command
line), and later sessions load that graph with optimisation off, with the same vectors bit
for bit (tests/core/test_onnx_graphs.py).

The optimised graph of the default int8 model held its weights as float32 (90 MB, four
times the model file; 55 MB since gbr.core.embed.int8_matmul keeps the products' weights int8,
most of it the word-embedding table), and reading them from inside the protobuf cost more
than half of a kept session's creation. So the weights are kept in a data file beside the
graph, which onnxruntime maps instead of parsing: a session in 45-65 ms instead of 135-290
ms, and 80 MB less resident (2 cores, one sitting).

The saved graph is optimised at the `extended` level, whose output does not depend on the
CPU (the `all` level adds layout changes that onnxruntime says to use only on the machine
that made them). Each kept graph is a folder, `<model>-<where>-<version>/` holding
GRAPH and DATA, whose name holds the onnxruntime version and the model file's path, size
and modification time, so a new onnxruntime or a changed model gets a graph of its own;
older graphs of the same model are removed when a new one is saved. The folder is filled
under a temporary name and renamed into place in one step, so a reader sees a whole graph
or none, and of two processes saving at once the second's rename fails and it keeps its
own session.

A kept graph is checked before it is loaded: the folder holds SUMS, the CRC-32 and size of
GRAPH and DATA, taken before it was renamed into place, with each file's stat stamp
(inode, size, modification and change times). A file whose stamp is unchanged since then has
not been written to through the file system, so it costs a stat; any other is read whole and
its CRC-32 compared (30-100 ms for the 56 MB of the default model; the stamp is then
renewed). A graph that fails, or that onnxruntime will not load, is removed and made again
from the model, with one warning (`onnx_graph_damaged`), before it embeds anything: no vector
of a damaged graph reaches an index or the shared cache. A graph kept by an older gbr,
without SUMS, is made again quietly.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import shutil
import tempfile
import time
import zlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gbr.core.environ import ONNX_GRAPHS
from gbr.core.telemetry import log

if TYPE_CHECKING:
    import onnxruntime as ort

Options = Callable[[], "ort.SessionOptions"]

GRAPH = "graph.onnx"
DATA = "graph.onnx.data"  # named inside GRAPH, relative to its folder
SUMS = "sums.json"  # each file's CRC-32, size and stat stamp (see the module's docstring)
# A temporary folder older than this was left by a process that died while saving.
STALE_SECONDS = 3600
GRAPHS_ENV = ONNX_GRAPHS.name


def kept_folder(env: Mapping[str, str]) -> Path | None:
    """Where optimised graphs are kept: GBR_ONNX_GRAPHS, else `$GBR_HOME/onnx` (None: off)."""
    from gbr.core.paths import cache_home

    if ONNX_GRAPHS.off(env):
        return None
    if (setting := ONNX_GRAPHS.path(env)) is not None:
        return setting
    home = cache_home(env)
    return None if home is None else home / "onnx"


def graph_path(folder: Path, model: Path, int8_matmul: bool = False) -> Path:
    """The folder where the optimised graph of `model` is kept, for this onnxruntime."""
    import onnxruntime as ort

    stat = model.stat()
    version = f"{ort.__version__}|{stat.st_size}|{stat.st_mtime_ns}|extended|data"
    if int8_matmul:  # the rewrite's ranges are part of the graph
        from gbr.core.embed.int8_matmul import RANGES_FILE

        version += f"|int8-matmul|{hashlib.sha256(RANGES_FILE.read_bytes()).hexdigest()}"
    return folder / f"{_family(model)}-{hashlib.sha256(version.encode()).hexdigest()[:12]}"


def _family(model: Path) -> str:
    """The part of a kept graph's name shared by every version of one model file."""
    where = hashlib.sha256(str(model.resolve()).encode()).hexdigest()[:8]
    return f"{model.stem}-{where}"


def source(model: Path, int8_matmul: bool) -> str | bytes:
    """What a session is made from: the model's path, or the model rewritten to multiply its
    int8 weights in int8 (gbr.core.embed.int8_matmul)."""
    if not int8_matmul:
        return str(model)
    from gbr.core.embed.int8_matmul import int8_model_bytes

    return int8_model_bytes(str(model))


def session(
    model: Path, folder: Path, options: Options, int8_matmul: bool = False
) -> ort.InferenceSession | None:
    """A CPU session for `model` from its kept graph, saving the graph first if need be;
    None when neither works (the caller then optimises as usual)."""
    import onnxruntime as ort

    try:
        kept = graph_path(folder, model, int8_matmul)
    except OSError:
        return None
    if (kept / GRAPH).is_file() and (kept / SUMS).is_file():
        problem = verify(kept)
        if problem is None:
            opts = options()
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
            try:
                return ort.InferenceSession(
                    str(kept / GRAPH), opts, providers=["CPUExecutionProvider"]
                )
            except Exception as exc:  # damaged: made again below
                problem = f"onnxruntime cannot load it: {str(exc)[:200]}"
        log().warning("onnx_graph_damaged", path=str(kept), problem=problem)
        _remove(kept)
    elif kept.exists():  # no graph, or one kept before its checksums: made again
        log().info("onnx_graph_replaced", path=str(kept))
        _remove(kept)
    return _save(model, kept, options, int8_matmul)


def verify(kept: Path) -> str | None:
    """None when every file SUMS names is as it was saved, else what is wrong."""
    try:
        files = json.loads((kept / SUMS).read_text())["files"]
        if not isinstance(files, dict) or GRAPH not in files:
            return f"{SUMS} names no graph"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"{SUMS} cannot be read ({type(exc).__name__})"
    renewed = False
    for name, want in files.items():
        path = kept / name
        try:
            stamp = _stamp(path)
            if stamp == want["stamp"]:
                continue
            if stamp[1] != want["size"] or _crc32(path) != want["crc32"]:
                return f"{name} fails its checksum"
        except (OSError, KeyError, TypeError) as exc:
            return f"{name} cannot be checked ({type(exc).__name__})"
        want["stamp"] = stamp  # the same bytes, copied or moved: renew the stamp
        renewed = True
    if renewed:
        with contextlib.suppress(OSError):  # not renewed: the next load reads them again
            _write_sums(kept, files)
    return None


def _stamp(path: Path) -> list[int]:
    """What changes whenever a file is written to: a user cannot set the change time."""
    st = path.stat()
    return [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def _crc32(path: Path) -> int:
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return zlib.crc32(b"")
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
            return zlib.crc32(view)


def _sums_of(folder: Path) -> dict[str, Any]:
    return {
        p.name: {"crc32": _crc32(p), "size": p.stat().st_size, "stamp": _stamp(p)}
        for p in sorted(folder.iterdir())
        if p.is_file() and p.name != SUMS
    }


def _write_sums(folder: Path, files: dict[str, Any]) -> None:
    """SUMS through a temporary file renamed over it, so a reader sees an old or a new one."""
    fd, tmp = tempfile.mkstemp(prefix=f".{SUMS}.", dir=folder)
    try:
        with os.fdopen(fd, "w") as out:
            json.dump({"files": files}, out)
        os.replace(tmp, folder / SUMS)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _save(
    model: Path, kept: Path, options: Options, int8_matmul: bool
) -> ort.InferenceSession | None:
    import onnxruntime as ort

    # The leading dot keeps a folder being filled out of the `<family>-*` clean-up below.
    prefix = f".{_family(model)}-"
    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=prefix, suffix=".tmp", dir=kept.parent))
    except OSError as exc:
        log().info("onnx_graph_not_kept", folder=str(kept.parent), error=str(exc))
        return None
    opts = options()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    opts.optimized_model_filepath = str(tmp / GRAPH)
    opts.add_session_config_entry("session.optimized_model_external_initializers_file_name", DATA)
    opts.add_session_config_entry(
        "session.optimized_model_external_initializers_min_size_in_bytes", "1024"
    )
    try:
        made = ort.InferenceSession(
            source(model, int8_matmul), opts, providers=["CPUExecutionProvider"]
        )
    except Exception as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        log().info("onnx_graph_not_kept", folder=str(kept.parent), error=str(exc)[:200])
        return None
    try:
        _write_sums(tmp, _sums_of(tmp))
    except OSError as exc:  # a graph without its checksums is never kept
        shutil.rmtree(tmp, ignore_errors=True)
        log().info("onnx_graph_not_kept", folder=str(kept.parent), error=str(exc)[:200])
        return made
    try:
        tmp.rename(kept)
    except OSError:  # another process put its graph there first: same graph, keep that one
        shutil.rmtree(tmp, ignore_errors=True)
        return made
    for old in kept.parent.glob(f"{_family(model)}-*"):
        if old != kept:  # an older version's folder, or the single-file graph kept before
            _remove(old)
    now = time.time()
    for left in kept.parent.glob(f"{prefix}*.tmp"):
        try:
            if now - left.stat().st_mtime > STALE_SECONDS:
                _remove(left)
        except OSError:
            pass
    return made


def _remove(path: Path) -> None:
    """A kept graph's folder or file, gone; what cannot be removed is left."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
