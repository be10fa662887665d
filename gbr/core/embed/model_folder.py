"""A model folder as people bring it: an ONNX export beside its tokenizer.

Exports come in two layouts: `model.onnx` at the top (optimum's own), or under `onnx/` (the
Hugging Face hub's Transformers.js repositories). Both the embedder's `--model-dir` and
`ask --reranker DIR` read a folder through here, so a folder that works for one is found
the same way by the other, and a bad one is refused in one line that names what is missing.
"""

from __future__ import annotations

from pathlib import Path

from gbr.core.errors import ConfigError

MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
# Where a hub export keeps its graph, after the top of the folder.
ONNX_SUBFOLDER = "onnx"


def onnx_file(folder: Path) -> Path:
    """The folder's model file: `model.onnx`, else `onnx/model.onnx` (which may not exist)."""
    top = folder / MODEL_FILE
    if top.is_file():
        return top
    nested = folder / ONNX_SUBFOLDER / MODEL_FILE
    return nested if nested.is_file() else top


def folder_files(folder: Path, what: str, fix: str) -> tuple[Path, Path]:
    """(model, tokenizer) of `folder`, or one ConfigError naming the folder or file that is
    missing. `what` names the model in the message ("model", "cross-encoder"); `fix` says
    where the folder came from (a flag or a variable)."""
    folder = folder.expanduser()
    if not folder.is_dir():
        raise ConfigError(f"{what} folder not found: {folder}; {fix}")
    onnx = onnx_file(folder)
    tokenizer = folder / TOKENIZER_FILE
    missing = [p.name for p in (onnx, tokenizer) if not p.is_file()]
    if missing:
        raise ConfigError(
            f"{what} folder {folder} has no {' and no '.join(missing)}; it needs "
            f"{MODEL_FILE} (or {ONNX_SUBFOLDER}/{MODEL_FILE}) and {TOKENIZER_FILE}; {fix}"
        )
    return onnx, tokenizer
