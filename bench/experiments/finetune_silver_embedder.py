"""Fine-tune the default embedder on the silver train split, with mined hard negatives.

The sibling of finetune_embedder.py (same virtual environment, same export), for the
silver benchmark's train split (bench/silver.py `build` then `negatives --split train`):
each question is the first sentence of a definition's doc, its passage is the definition's
doc-stripped code, and its hard negatives are the other definitions of the same repository
that our own first stage ranked 2-10 for it. Those are the mistakes the shipped search
makes, which the in-batch negatives of 0007 (random code from other repositories) rarely
show the model.

    .venv-train/bin/python bench/experiments/finetune_silver_embedder.py \\
        --negatives /work/data/silver/train-negatives.jsonl \\
        --chunks /work/data/silver/train-chunks.jsonl \\
        --questions 4000 --hard 1 --epochs 1 --out /work/data/s15/minilm-silver
    GBR_MODEL_DIR=/work/data/s15/minilm-silver/final .venv/bin/python bench/silver.py \\
        --work WORK_COPY run --split dev --layout both --variants dense,shipped

The passage is what indexing embeds for a chunk with no doc (chunk_text.embed_text, the
"header" format: the context header, then the code); the chunks file keeps the fields,
so the text is rebuilt from them with the same header_of. It is the whole definition,
cut by the tokenizer at the model's window, where indexing embeds the chunker's first
part: the same text for every definition that fits the window.

Questions of the `--val-repos` (by default every 25th repository) are kept out and scored
before and after each epoch: MRR@10 of each question among the passages of its own
repository (targets and mined negatives), which is what per-repository search asks.
Each epoch writes `epoch-N/` (float model.onnx, tokenizer.json); the last is copied to
`final/`. `--max-minutes` stops an epoch early (and still exports), to keep to a budget
on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch
from finetune_embedder import MAX_TOKENS, Encoder, export, start, tokenizer_at

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from gbr.core.parse.chunk_text import header_of

Key = tuple[str, str, str]


def passages_of(path: Path) -> dict[Key, str]:
    """(repo, path, name) -> the text indexing embeds for that doc-stripped chunk."""
    out: dict[Key, str] = {}
    for line in path.open():
        c = json.loads(line)
        head = header_of(c["module"], c["kind"], c["name"], c["signature"], "")
        out[(c["repo"], c["path"], c["name"])] = f"{head}\n{c['text']}"
    return out


def examples_of(path: Path, passages: dict[Key, str]) -> list[dict[str, Any]]:
    """One row per question whose target text is known: query, positive, candidate negatives."""
    rows = []
    for line in path.open():
        q = json.loads(line)
        targets = [(q["repo"], t["path"], t["name"]) for t in q["target"]]
        known = [t for t in targets if t in passages]
        if not known:
            continue
        positive = passages[known[0]]
        hard = [
            key
            for n in q["negatives"]
            if 2 <= n["rank"] <= 10
            and (key := (q["repo"], n["path"], n["name"])) not in targets
            and key in passages
            and passages[key] != positive
        ]
        rows.append(
            {
                "repo": q["repo"],
                "query": q["query"],
                "key": known[0],
                "targets": targets,
                "hard": hard,
                "pool": [(q["repo"], n["path"], n["name"]) for n in q["negatives"]],
            }
        )
    return rows


def subsample(rows: list[dict[str, Any]], count: int, per_repo: int) -> list[dict[str, Any]]:
    """At most `per_repo` questions of a repository, so one large library does not dominate."""
    by_repo: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_repo[r["repo"]].append(r)
    kept = [
        r for group in by_repo.values() for r in random.sample(group, min(per_repo, len(group)))
    ]
    random.shuffle(kept)
    return kept[:count] if count else kept


@torch.no_grad()
def repo_mrr(encode: Encoder, rows: list[dict[str, Any]], passages: dict[Key, str]) -> float:
    """MRR@10 of each question among every passage its repository's lines name."""
    by_repo: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_repo[r["repo"]].append(r)
    total = 0.0
    for group in by_repo.values():
        keys = sorted({k for r in group for k in [*r["targets"], *r["pool"]] if k in passages})
        vecs = encode.all([passages[k] for k in keys], batch=32)
        queries = encode.all([r["query"] for r in group])
        scores = queries @ vecs.T
        for qi, r in enumerate(group):
            gold = [keys.index(t) for t in r["targets"] if t in keys]
            best = scores[qi, gold].max()
            rank = int((scores[qi] > best).sum()) + 1
            total += 1.0 / rank if rank <= 10 else 0.0
    return total / max(1, len(rows))


def batch_loss(
    encode: Encoder,
    encode_passage: Encoder,
    batch: list[dict[str, Any]],
    passages: dict[Key, str],
    hard: int,
    scale: float,
) -> torch.Tensor:
    """Each question against its positive, the other positives and every hard negative of the
    batch; a column that is one of the question's own targets (a negative of another
    question, or a duplicate) is masked, not counted as wrong."""
    keys = [r["key"] for r in batch]
    for r in batch:
        keys.extend(random.sample(r["hard"], min(hard, len(r["hard"]))))
    q = encode([r["query"] for r in batch])
    p = encode_passage([passages[k] for k in keys])
    scores = q @ p.T * scale
    mask = torch.zeros_like(scores, dtype=torch.bool)
    for i, r in enumerate(batch):
        own = set(r["targets"])
        for j, k in enumerate(keys):
            if j != i and (k in own or passages[k] == passages[r["key"]]):
                mask[i, j] = True
    scores = scores.masked_fill(mask, float("-inf"))
    labels = torch.arange(len(batch))
    back = scores[:, : len(batch)].T  # passage -> question, positives only
    return (
        torch.nn.functional.cross_entropy(scores, labels)
        + torch.nn.functional.cross_entropy(back, labels)
    ) / 2


def int8_weights(src: Path, dst: Path) -> int:
    """Copy the model at `src` with every weight matrix stored as int8, one scale per column,
    and turned back into float by a Cast and a Mul, as the shipped MiniLM file stores them
    (about a quarter of the float file). Returns how many matrices were stored so."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(src / "model.onnx"))
    graph = model.graph
    kept, done = [], 0
    for init in graph.initializer:
        w = numpy_helper.to_array(init)
        if w.dtype != np.float32 or w.ndim != 2 or min(w.shape) < 384:
            kept.append(init)
            continue
        scale = np.maximum(np.abs(w).max(axis=0), 1e-12) / 127.0
        q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
        kept += [
            numpy_helper.from_array(q, f"{init.name}_int8"),
            numpy_helper.from_array(scale.astype(np.float32), f"{init.name}_scale"),
        ]
        cast, mul = f"{init.name}_int8_float", init.name
        graph.node.insert(
            0, helper.make_node("Mul", [cast, f"{init.name}_scale"], [mul], name=f"{mul}/dequant")
        )
        graph.node.insert(
            0,
            helper.make_node(
                "Cast", [f"{init.name}_int8"], [cast], to=onnx.TensorProto.FLOAT, name=f"{mul}/cast"
            ),
        )
        done += 1
    del graph.initializer[:]
    graph.initializer.extend(kept)
    dst.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(dst / "model.onnx"))
    shutil.copy(src / "tokenizer.json", dst / "tokenizer.json")
    return done


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--negatives", type=Path, required=True)
    ap.add_argument("--chunks", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--questions", type=int, default=4000, help="0 takes every question")
    ap.add_argument("--per-repo", type=int, default=120)
    ap.add_argument("--hard", type=int, default=1, help="hard negatives per question (0-3)")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--scale", type=float, default=20.0, help="inverse temperature")
    ap.add_argument("--val-every", type=int, default=25, help="every Nth repository is held out")
    ap.add_argument("--max-minutes", type=float, default=40.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--train-tokens", type=int, default=MAX_TOKENS, help="passage window while training"
    )
    ap.add_argument("--val-max", type=int, default=150, help="held-out questions scored")
    ap.add_argument("--no-before", action="store_true", help="skip scoring the base model")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--int8", type=Path, help="only write an int8-weight copy of this model folder to --out"
    )
    args = ap.parse_args(argv)
    if args.int8:
        print(f"{int8_weights(args.int8, args.out)} matrices stored as int8 in {args.out}")
        return 0
    torch.set_num_threads(args.threads)
    base, model, encode = start(args.seed)
    encode_passage = Encoder(model, tokenizer_at(base, args.train_tokens))

    passages = passages_of(args.chunks)
    rows = examples_of(args.negatives, passages)
    repos = sorted({r["repo"] for r in rows})
    held = set(repos[:: args.val_every])
    val = [r for r in rows if r["repo"] in held][: args.val_max]
    train = subsample([r for r in rows if r["repo"] not in held], args.questions, args.per_repo)
    print(
        f"{len(rows)} questions with a known target; training on {len(train)} from "
        f"{len({r['repo'] for r in train})} repositories, {args.hard} hard negatives each; "
        f"{len(val)} held out from {len(held)} repositories: {', '.join(sorted(held))}",
        flush=True,
    )
    model.eval()
    if not args.no_before:
        print(f"before: val MRR@10 in-repository {repo_mrr(encode, val, passages):.3f}", flush=True)

    params = [p for p in model.parameters()]
    optimiser = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    steps = max(1, args.epochs * -(-len(train) // args.batch))
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimiser, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, 1 - s / steps)
    )
    started = time.monotonic()
    deadline = started + args.max_minutes * 60
    last = args.out / "epoch-0"
    if args.epochs == 0:  # the base model, exported the same way, to compare against
        export(model, base, last)
        (last / "tuned_parameters.pt").unlink(missing_ok=True)
    for epoch in range(1, args.epochs + 1):
        model.train()
        random.shuffle(train)
        losses: list[float] = []
        for i in range(0, len(train), args.batch):
            loss = batch_loss(
                encode, encode_passage, train[i : i + args.batch], passages, args.hard, args.scale
            )
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            losses.append(loss.item())
            if len(losses) % 10 == 0:
                print(
                    f"  epoch {epoch} step {len(losses)}: loss {sum(losses[-10:]) / 10:.3f}, "
                    f"{time.monotonic() - started:.0f} s",
                    flush=True,
                )
            if time.monotonic() > deadline:
                print(f"  stopped at the {args.max_minutes} minute budget", flush=True)
                break
        model.eval()
        last = args.out / f"epoch-{epoch}"
        export(model, base, last)
        (last / "tuned_parameters.pt").unlink(missing_ok=True)
        print(
            f"epoch {epoch}: {len(losses)} steps, loss {sum(losses) / max(1, len(losses)):.3f}, "
            f"{time.monotonic() - started:.0f} s; val MRR@10 in-repository "
            f"{repo_mrr(encode, val, passages):.3f}; saved {last}",
            flush=True,
        )
        if time.monotonic() > deadline:
            break
    shutil.copytree(last, args.out / "final", dirs_exist_ok=True)
    print(f"final model: {args.out / 'final'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
