"""Mine (doc comment -> code) pairs to fine-tune the embedder (experiments/finetune_embedder.py).

    # the dev half and examples/, for training:
    .venv/bin/python bench/experiments/mine_doc_pairs.py --out bench/out/pairs.jsonl
    # the held-out half, to look at only:
    .venv/bin/python bench/experiments/mine_doc_pairs.py --out held.jsonl --half held

Every documented definition (whole nodes, not the parts of a split one, no module chunks)
gives one line: `query` is the first sentence of its doc prose, `passage` is the text gbr
would embed for it with the doc taken out of both the header and the code (so the model has
to match a description to code, not the doc to itself), and `full` is what gbr embeds.
Chunks come from the real walker and chunker, so the pairs look like what is indexed.

Only the devcorpus dev half and examples/ are read by default: the held-out half stays
unseen by anything that is trained.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from bench._corpus import pipeline_limits  # noqa: E402
from bench.eval import DEV_HALF, DEVCORPUS, half_of  # noqa: E402
from gbr.core.embed.embedder import OnnxEmbedder  # noqa: E402
from gbr.core.embed.model_files import resolve_model_files  # noqa: E402
from gbr.core.parse.chunk_text import doc_prose, embed_text, without_doc_lines  # noqa: E402
from gbr.core.parse.chunker import ChunkLimits, TokenCounter, chunk_file, new_parser  # noqa: E402
from gbr.core.parse.walker import FoundFile, read_file, walk  # noqa: E402
from gbr.core.rank.priors import is_test  # noqa: E402
from gbr.core.records import Chunk, FileProblem, PartialFile  # noqa: E402

MIN_DOC_CHARS = 20
QUERY_CHARS = 200


def pair_of(repo: str, chunk: Chunk) -> dict[str, object] | None:
    """The training line of one chunk, or None when it has no usable doc."""
    if chunk.kind == "module" or chunk.part != 0:
        return None
    doc = doc_prose(chunk.doc)
    if len(doc) < MIN_DOC_CHARS:
        return None
    bare = replace(chunk, doc="", text=without_doc_lines(chunk.text))
    return {
        "repo": repo,
        "path": chunk.path,
        "name": chunk.name,
        "kind": chunk.kind,
        "query": doc.split(". ")[0][:QUERY_CHARS],
        "passage": embed_text(bare),
        "full": embed_text(chunk),
        "test": is_test(chunk.path, chunk.name),
    }


def mine(root: Path, count_tokens: TokenCounter, limits: ChunkLimits) -> list[dict[str, object]]:
    """`limits` should be the pipeline's (bench._corpus.pipeline_limits), so that a node
    is split where `gleambrctl index` splits it."""
    parser = new_parser()
    rows = []
    for found in walk(root):
        if not isinstance(found, FoundFile):
            continue
        source = read_file(found)
        if isinstance(source, FileProblem):
            continue
        result = chunk_file(source, parser, count_tokens, limits)
        if isinstance(result, FileProblem):
            continue
        chunks = result.chunks if isinstance(result, PartialFile) else result
        rows += [p for c in chunks if (p := pair_of(root.name, c)) is not None]
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--devcorpus", type=Path, default=DEVCORPUS)
    ap.add_argument("--half", choices=("dev", "held"), default="dev")
    ap.add_argument("--no-examples", action="store_true", help="leave examples/ out")
    args = ap.parse_args(argv)
    roots = sorted(
        p for p in args.devcorpus.iterdir() if p.is_dir() and half_of(p.name) == args.half
    )
    if args.half == "dev" and not args.no_examples:
        roots += sorted(p for p in (REPO / "examples").iterdir() if p.is_dir())
    if args.half == "dev" and {p.name for p in roots} & DEV_HALF != DEV_HALF:
        raise SystemExit(f"{args.devcorpus} lacks some of the dev half's repositories")
    model = OnnxEmbedder(resolve_model_files())
    limits = pipeline_limits(model)
    rows = [row for root in roots for row in mine(root, model.count_tokens, limits)]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")
    counts = Counter(str(r["repo"]) for r in rows)
    print(f"{len(rows)} pairs -> {args.out}: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
