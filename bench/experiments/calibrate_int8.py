"""Fixed input ranges for the default model's int8 products.

They are written to gbr/core/data/minilm-gleam-int8-ranges.json.

    .venv/bin/python bench/experiments/calibrate_int8.py [--devcorpus DIR] [--out FILE] [--check]

gbr.core.embed.int8_matmul quantises the input of each int8 product with a fixed range, so that a
text's vector does not depend on the texts batched beside it. The ranges are the lowest
and highest value each input takes over what the model reads in use: every chunk the real
chunker cuts from `examples/` and the devcorpus dev half (embedded as indexing embeds it,
header and code) and every dev question of both, as a search embeds it. Only
real tokens count: padding is masked out of the attention and the pooling, so a padded
position clipped by the range changes nothing.

`--check` compares the shipped file with a fresh calibration and fails when they differ.
Re-run after changing the default model; its id (gbr.core.embed.model_files) must change too.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from _corpus import REPO, pipeline_limits
from eval import DEV_HALF

from gbr.core.embed.embedder import OnnxEmbedder, length_batches
from gbr.core.embed.int8_matmul import RANGES_FILE, activation_names
from gbr.core.embed.model_files import ModelFiles, resolve_model_files
from gbr.core.parse.chunk_text import embed_text
from gbr.core.parse.chunker import chunk_file, new_parser
from gbr.core.records import FileProblem, PartialFile, SourceFile

DEVCORPUS = REPO.parent / "shared" / "devcorpus"


def chunk_texts(roots: list[Path], model: OnnxEmbedder) -> list[str]:
    parser, limits = new_parser(), pipeline_limits(model)
    texts: list[str] = []
    for root in roots:
        for path in sorted(root.rglob("*.gleam")):
            data = path.read_bytes()
            rel = path.relative_to(root).as_posix()
            source = SourceFile(rel, path.stem, root.name, data, "", len(data), 0.0)
            result = chunk_file(source, parser, model.count_tokens, limits)
            if isinstance(result, FileProblem):
                continue
            chunks = result.chunks if isinstance(result, PartialFile) else result
            texts.extend(embed_text(c) for c in chunks)
    return texts


def questions(files: list[Path]) -> list[str]:
    return [
        json.loads(line)["query"]
        for f in files
        for line in f.read_text().splitlines()
        if line.strip()
    ]


def calibrate(
    model_files: ModelFiles, tokenizer: OnnxEmbedder, texts: list[str]
) -> dict[str, list[float]]:
    """Each int8 product's input, its lowest and highest value over `texts`."""
    import onnx
    import onnxruntime as ort

    graph = onnx.load(str(model_files.onnx))
    names = activation_names(graph)
    for name in names:
        graph.graph.output.append(
            onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
        )
    session = ort.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    ids = tokenizer.tokenize(texts)
    low = dict.fromkeys(names, np.inf)
    high = dict.fromkeys(names, -np.inf)
    for batch in length_batches([len(x) for x in ids], 2048, 64):
        rows = [ids[i] for i in batch]
        width = max(len(r) for r in rows)
        input_ids = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros_like(input_ids)
        for i, row in enumerate(rows):
            input_ids[i, : len(row)], mask[i, : len(row)] = row, 1
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if any(i.name == "token_type_ids" for i in session.get_inputs()):
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        for name, value in zip(names, session.run(names, feeds), strict=True):
            real = value[mask.astype(bool)]
            low[name] = min(low[name], float(real.min()))
            high[name] = max(high[name], float(real.max()))
    return {name: [low[name], high[name]] for name in names}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--devcorpus", type=Path, default=DEVCORPUS)
    p.add_argument("--out", type=Path, default=RANGES_FILE)
    p.add_argument("--check", action="store_true", help="fail when the shipped file differs")
    args = p.parse_args(argv)
    files = resolve_model_files()
    # The model as its file says (no ranges needed yet): it tokenises and counts here.
    model = OnnxEmbedder(ModelFiles(files.onnx, files.tokenizer, "calibration"))
    roots = [
        REPO / "examples" / d.name for d in sorted((REPO / "examples").iterdir()) if d.is_dir()
    ]
    roots += [args.devcorpus / name for name in sorted(DEV_HALF)]
    query_files = sorted((REPO / "bench" / "queries").glob("*.jsonl"))
    query_files += [
        REPO / "bench" / "queries" / "devcorpus" / f"{n}.jsonl" for n in sorted(DEV_HALF)
    ]
    texts = chunk_texts(roots, model) + questions(query_files)
    print(f"{len(texts)} texts from {len(roots)} packages and {len(query_files)} query files")
    ranges = calibrate(files, model, texts)
    payload = {
        "model": files.model_id,
        "texts": len(texts),
        "ranges": {k: [round(lo, 6), round(hi, 6)] for k, (lo, hi) in sorted(ranges.items())},
    }
    if args.check:
        shipped = json.loads(args.out.read_text())
        same = shipped["ranges"] == payload["ranges"]
        print(
            "shipped ranges are current"
            if same
            else "shipped ranges differ: re-run without --check"
        )
        return 0 if same else 1
    lines = [f'  "{k}": {json.dumps(v)}' for k, v in payload["ranges"].items()]
    head = f'{{\n "model": "{payload["model"]}",\n "texts": {payload["texts"]},\n "ranges": {{\n'
    args.out.write_text(head + ",\n".join(lines) + "\n }\n}\n")
    print(f"wrote {len(ranges)} ranges to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
