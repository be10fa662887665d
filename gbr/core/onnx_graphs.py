"""ONNX graphs optimised once and kept, so that a cold start skips the optimisation.

onnxruntime optimises a model's graph each time a session is made: half of the 0.5-0.8 s
a cold `search` spent creating the embedder's session (2 cores). Here the first session
saves its optimised graph under the folder it is given (`$GBR_HOME/onnx/` from the command
line), and later sessions load that graph with optimisation off: 0.25 s, and the same
vectors bit for bit (checked when this was measured, and by tests/core/test_onnx_graphs.py).

The saved graph is optimised at the `extended` level, whose output does not depend on the
CPU (the `all` level adds layout changes that onnxruntime says to use only on the machine
that made them). Its name holds the onnxruntime version and the model file's path, size
and modification time, so a new onnxruntime or a changed model gets a graph of its own;
older graphs of the same model are removed when a new one is saved.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gbr.core.telemetry import log

if TYPE_CHECKING:
    import onnxruntime as ort

Options = Callable[[], "ort.SessionOptions"]


def graph_path(folder: Path, model: Path) -> Path:
    """Where the optimised graph of `model` is kept, for this onnxruntime."""
    import onnxruntime as ort

    stat = model.stat()
    version = f"{ort.__version__}|{stat.st_size}|{stat.st_mtime_ns}|extended"
    return folder / f"{_family(model)}-{hashlib.sha256(version.encode()).hexdigest()[:12]}.onnx"


def _family(model: Path) -> str:
    """The part of a kept graph's name shared by every version of one model file."""
    where = hashlib.sha256(str(model.resolve()).encode()).hexdigest()[:8]
    return f"{model.stem}-{where}"


def session(model: Path, folder: Path, options: Options) -> ort.InferenceSession | None:
    """A CPU session for `model` from its kept graph, saving the graph first if need be;
    None when neither works (the caller then optimises as usual)."""
    import onnxruntime as ort

    try:
        kept = graph_path(folder, model)
    except OSError:
        return None
    if kept.is_file():
        opts = options()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        try:
            return ort.InferenceSession(str(kept), opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # damaged: made again below
            log().warning("onnx_graph_unreadable", path=str(kept), error=str(exc)[:200])
            kept.unlink(missing_ok=True)
    return _save(model, kept, options)


def _save(model: Path, kept: Path, options: Options) -> ort.InferenceSession | None:
    import onnxruntime as ort

    try:
        kept.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=kept.stem + ".", suffix=".tmp", dir=kept.parent)
        os.close(fd)
    except OSError as exc:
        log().info("onnx_graph_not_kept", folder=str(kept.parent), error=str(exc))
        return None
    opts = options()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    opts.optimized_model_filepath = tmp
    try:
        made = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
        os.replace(tmp, kept)
    except Exception as exc:
        Path(tmp).unlink(missing_ok=True)
        log().info("onnx_graph_not_kept", folder=str(kept.parent), error=str(exc)[:200])
        return None
    for old in kept.parent.glob(f"{_family(model)}-*.onnx"):
        if old != kept:
            old.unlink(missing_ok=True)
    return made
