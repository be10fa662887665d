"""Where the embedding model's files are, and the id that names the vectors they make."""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gbr.core.embed.model_folder import folder_files
from gbr.core.environ import MODEL_DIR, MODEL_ONNX, NO_ENV, TOKENIZER
from gbr.core.errors import ConfigError
from gbr.core.paths import DATA_DIR

# "-gleam2": all-MiniLM-L6-v2 fine-tuned on the silver benchmark's train split (questions
# in doc sentences, Gleam code without its docs, two of our first stage's mistakes each;
# docs/decisions/0013-silver-embedder-round-two.md; "-gleam1" was 0011's smaller run), its
# weights put into the int8 file of the base export (bench/experiments/graft_int8.py).
# "-i8mm": the file's int8 weights are multiplied in int8 (gbr.core.embed.int8_matmul), which
# moves the vectors a little. Indexes made by an earlier id are re-embedded once, and a new
# calibration of the ranges (bench/experiments/calibrate_int8.py) needs a new id too.
DEFAULT_MODEL_ID = "all-MiniLM-L6-v2-onnx-int8-gleam2-i8mm"
# Every id the default model has had starts so (`status` names an index of an older one).
DEFAULT_FAMILY = "all-MiniLM-L6-v2-onnx-int8"


def _a_default(model_id: object) -> bool:
    """Whether `model_id` is one of the ids gbr's default model has had."""
    return isinstance(model_id, str) and model_id.startswith(DEFAULT_FAMILY)


def outdated_default_model(model_id: object) -> bool:
    """Whether an index was embedded by an earlier default model (gbr's own, not a
    `--model-dir` one): the next `index` re-embeds it, and until then its vectors are a
    near match of the query's rather than the same model's."""
    return _a_default(model_id) and model_id != DEFAULT_MODEL_ID


def same_vector_space(index_model: str | None, query_model: str) -> bool:
    """Whether an index's vectors, made by `index_model`, may be compared with a query
    embedded by `query_model`: the same model, or two of gbr's own defaults (an index of an
    earlier one holds near matches of today's vectors until `index` re-embeds it). An index
    that names no model holds no vectors to compare."""
    if index_model is None or index_model == query_model:
        return True
    return _a_default(index_model) and _a_default(query_model)


@dataclass(frozen=True, slots=True)
class ModelFiles:
    onnx: Path
    tokenizer: Path
    model_id: str
    # Multiply the file's int8 weights in int8 (gbr.core.embed.int8_matmul): the default model's
    # own setting, part of its id; a user's model runs as its file says.
    int8_matmul: bool = False


# The default model ships inside gbr (23 MB, and its tokenizer, 466 KB; Apache-2.0, see
# data/NOTICE): the only package on PyPI that carries the tokenizer also pulls in
# sentence-transformers and a CUDA torch, and the weights are our own fine-tuning.
DEFAULT_ONNX = DATA_DIR / "minilm-gleam-int8.onnx"
DEFAULT_TOKENIZER = DATA_DIR / "minilm-tokenizer.json"


def package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def default_model_files() -> ModelFiles:
    if not DEFAULT_ONNX.is_file():
        raise ConfigError(
            f"the default embedding model ({DEFAULT_ONNX}) is missing from this install; "
            "reinstall gbr (`pip install --force-reinstall gbr`, or `make install` in a "
            "checkout), or set GBR_MODEL_DIR to a folder holding model.onnx and tokenizer.json"
        )
    return ModelFiles(
        onnx=DEFAULT_ONNX,
        tokenizer=DEFAULT_TOKENIZER,
        model_id=DEFAULT_MODEL_ID,
        int8_matmul=True,
    )


def resolve_model_files(
    model_dir: str | os.PathLike[str] | None = None,
    onnx: str | os.PathLike[str] | None = None,
    tokenizer: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] = NO_ENV,
) -> ModelFiles:
    """Explicit paths win, then GBR_MODEL_DIR / GBR_MODEL_ONNX / GBR_TOKENIZER in `env`, then
    the default."""
    model_dir = model_dir or env.get(MODEL_DIR.name)
    onnx = onnx or env.get(MODEL_ONNX.name)
    tokenizer = tokenizer or env.get(TOKENIZER.name)
    if model_dir and not (onnx and tokenizer):
        found_onnx, found_tokenizer = folder_files(
            Path(model_dir), "model", "check --model-dir or GBR_MODEL_DIR"
        )
        onnx = onnx or found_onnx
        tokenizer = tokenizer or found_tokenizer
    if not onnx and not tokenizer:
        files = default_model_files()
    elif not (onnx and tokenizer):
        raise ConfigError(
            "a custom model needs both model.onnx and tokenizer.json; "
            "pass --model-dir DIR or set both GBR_MODEL_ONNX and GBR_TOKENIZER"
        )
    else:
        onnx_path, tok_path = Path(onnx), Path(tokenizer)
        files = ModelFiles(onnx_path, tok_path, _custom_model_id(onnx_path))
    for label, path in (("model", files.onnx), ("tokenizer", files.tokenizer)):
        if not path.is_file():
            raise ConfigError(f"{label} file not found: {path}; check --model-dir or GBR_MODEL_DIR")
    return files


def _custom_model_id(onnx: Path) -> str:
    """Named by content, so swapping the file under the same name forces a re-index."""
    if not onnx.is_file():
        return f"custom:{onnx.name}"
    digest = hashlib.sha256(onnx.read_bytes()).hexdigest()[:16]
    return f"custom:{onnx.parent.name}/{onnx.name}:{digest}"
