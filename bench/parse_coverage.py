"""How many Gleam files the chunker indexes whole, in part, or not at all.

    .venv/bin/python bench/parse_coverage.py                 # devcorpus and examples/
    .venv/bin/python bench/parse_coverage.py --corpus DIR    # any folder of .gleam files
    .venv/bin/python bench/parse_coverage.py --json out.json

Each `.gleam` file (outside `build/` and `.gbr/`) goes through `gbr.core.parse.chunker.chunk_file`
with the bundled grammar and the real tokenizer, as the parser stage does, and is counted as
clean, partial (some definitions did not parse: indexed in part) or dropped (nothing
indexed). It also runs a few constructs that older grammars reject, such as lustre's
`pub const default_config: Config(message) = Config(..)`. It runs on older checkouts too,
where no file is partial, which is how the before/after figures of issue 10 were made.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gbr.core.embed.embedder import OnnxEmbedder  # noqa: E402
from gbr.core.embed.model_files import resolve_model_files  # noqa: E402
from gbr.core.parse.chunker import CHUNKER_VERSION, chunk_file, new_parser  # noqa: E402
from gbr.core.records import FileProblem, SourceFile  # noqa: E402

DEVCORPUS = REPO.parent / "shared" / "devcorpus"
EXAMPLES = REPO / "examples"
SKIP = {"build", ".gbr", ".git"}

# Valid Gleam that some grammars reject: a type variable in a constant's annotation.
CONSTRUCTS = {
    "pub const with type variable": (
        "pub type Config(message) {\n  Config(on_change: List(message))\n}\n\n"
        "pub const default_config: Config(message) = Config(\n  on_change: [],\n)\n"
    ),
    "private const with type variable": (
        "pub type Effect(message) {\n  Effect(synchronous: List(message))\n}\n\n"
        "const empty: Effect(message) = Effect(synchronous: [])\n\n"
        "pub fn none() -> Effect(message) {\n  empty\n}\n"
    ),
    "consts with more type variables": (
        "import gleam/option.{type Option, None}\n\n"
        "pub const nothing: Option(a) = None\n\n"
        "pub const failed: Result(a, Nil) = Error(Nil)\n\n"
        "pub const pairs: List(#(k, v)) = []\n"
    ),
}


def gleam_files(root: Path) -> list[Path]:
    return sorted(
        p for p in root.rglob("*.gleam") if not SKIP & set(p.relative_to(root).parts[:-1])
    )


def classify(result: Any) -> tuple[str, int, FileProblem | None]:
    """(clean | partial | dropped, chunks, problem) of one chunk_file result."""
    if isinstance(result, FileProblem):
        return "dropped", 0, result
    if hasattr(result, "problem"):  # PartialFile; absent before partial parsing existed
        return "partial", len(result.chunks), result.problem
    return "clean", len(result), None


def source(rel: str, data: bytes) -> SourceFile:
    return SourceFile(rel, rel.removesuffix(".gleam"), "bench", data, "", len(data), 0.0)


def measure(label: str, items: Iterable[tuple[str, bytes]], model: OnnxEmbedder) -> dict[str, Any]:
    parser = new_parser()
    counts = {"clean": 0, "partial": 0, "dropped": 0}
    chunks = 0
    problems: list[dict[str, Any]] = []
    for rel, data in items:
        outcome, n, problem = classify(chunk_file(source(rel, data), parser, model.count_tokens))
        counts[outcome] += 1
        chunks += n
        if problem is not None:
            problems.append(
                {
                    "file": rel,
                    "outcome": outcome,
                    "line": problem.line,
                    "dropped_lines": [list(r) for r in getattr(problem, "dropped_lines", ())],
                    "reason": problem.reason,
                }
            )
    return {"set": label, "files": sum(counts.values()), **counts, "chunks": chunks,
            "problems": problems}  # fmt: skip


def broken_mid_edit(items: list[tuple[str, bytes]], model: OnnxEmbedder) -> dict[str, Any]:
    """Each file with a function in its middle half, that function broken as if mid-edit
    (a `let` with a stray comma as its first line): how many of the file's other
    definitions are still chunked, against the same file unbroken."""
    parser = new_parser()
    files = kept = expected = dropped_files = 0
    for rel, data in items:
        lines = data.decode("utf-8", "replace").split("\n")
        starts = [i for i, line in enumerate(lines) if line.startswith(("pub fn ", "fn "))]
        middle = [i for i in starts if len(lines) // 4 <= i <= 3 * len(lines) // 4]
        if not middle or not lines[middle[0]].rstrip().endswith("{"):
            continue
        at = middle[0] + 1
        edited = "\n".join([*lines[:at], "  let broken = [1,, 2]", *lines[at:]]).encode()
        clean = chunk_file(source(rel, data), parser, model.count_tokens)
        if not isinstance(clean, list):
            continue
        names = {(c.kind, c.name) for c in clean if c.kind != "module"}
        outcome, _, _ = classify(
            result := chunk_file(source(rel, edited), parser, model.count_tokens)
        )
        got = (
            {(c.kind, c.name) for c in getattr(result, "chunks", [])}
            if outcome != "dropped"
            else set()
        )
        files += 1
        expected += len(names) - 1  # all but the broken function
        kept += len(names & got)
        dropped_files += outcome == "dropped" and len(names) > 1
    return {"files": files, "dropped_whole": dropped_files, "definitions_expected": expected,
            "definitions_kept": kept}  # fmt: skip


def corpus_items(root: Path) -> list[tuple[str, bytes]]:
    return [(str(p.relative_to(root)), p.read_bytes()) for p in gleam_files(root)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", type=Path, default=DEVCORPUS, help="folder of .gleam files")
    ap.add_argument("--examples", type=Path, default=EXAMPLES, help="a second folder")
    ap.add_argument("--json", type=Path, help="write the full report here")
    args = ap.parse_args()
    model = OnnxEmbedder(resolve_model_files(env=os.environ))
    report = []
    edits = {}
    for label, root in (("corpus", args.corpus), ("examples", args.examples)):
        if root.is_dir():
            report.append(measure(f"{label} ({root})", corpus_items(root), model))
            edits[label] = broken_mid_edit(corpus_items(root), model)
        else:
            print(f"skipped {label}: {root} is not a folder", file=sys.stderr)
    snippets = [(f"{name}.gleam", text.encode()) for name, text in CONSTRUCTS.items()]
    report.append(measure("constructs", snippets, model))

    print(f"chunker v{CHUNKER_VERSION}")
    print(f"{'set':<60} {'files':>5} {'clean':>5} {'partial':>7} {'dropped':>7} {'chunks':>6}")
    for row in report:
        print(
            f"{row['set'][:60]:<60} {row['files']:>5} {row['clean']:>5} {row['partial']:>7} "
            f"{row['dropped']:>7} {row['chunks']:>6}"
        )
        for p in row["problems"]:
            print(f"    {p['outcome']:<7} {p['file']}: {p['reason']}")
    print("one function in the middle of each file broken mid-edit:")
    for label, e in edits.items():
        print(
            f"  {label}: {e['files']} files, {e['dropped_whole']} with other definitions "
            "dropped whole, "
            f"{e['definitions_kept']} of {e['definitions_expected']} other definitions kept"
        )
    if args.json:
        args.json.write_text(json.dumps({"sets": report, "mid_edit": edits}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
