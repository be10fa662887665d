"""Precision and recall of the code graph's resolved references against hand-labelled edges.

    .venv/bin/python bench/graph_accuracy.py            # table per file and overall
    .venv/bin/python bench/graph_accuracy.py --json     # the same as JSON
    .venv/bin/python bench/graph_accuracy.py --timing   # also: extraction vs chunking, ms/file

Each file in bench/graph_edges/ labels one source file by hand (read line by line, not made
by running the extractor): its header names the corpus (`examples` is this repository's
examples/, `devcorpus` is ../shared/devcorpus/), the repository folder, the path inside it and
the module; each row is `line<TAB>module.name<TAB>kind`, one per name used on that line: every
call, pipe, capture, function passed as a value, `use`, type, constructor and constant that
the file resolves through its imports or its own definitions. Prelude names (Int, Ok, ...) and
locals are not edges. An edge matches on (path, line, target); the same target twice on one
line counts once. The kind is not part of the match; the `kind` column counts the matched
edges that were also extracted as the labelled kind.

--timing runs over every .gleam file of devcorpus: chunk_file as the index's parser stage
calls it (parse included, real tokenizer), and extract_file_graph on the tree of the same
parse, which is what the graph adds to an index run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gbr.core.graph.extract import extract_file_graph, file_graph  # noqa: E402
from gbr.core.parse.chunker import chunk_file, new_parser  # noqa: E402
from gbr.core.parse.oversize import parse_yielding  # noqa: E402
from gbr.core.records import SourceFile  # noqa: E402

LABELS = REPO / "bench" / "graph_edges"
CORPORA = {"examples": REPO / "examples", "devcorpus": REPO.parent / "shared" / "devcorpus"}
SKIP = {"build", ".gbr", ".git"}

Edge = tuple[int, str]  # (line, module.name)


@dataclass(frozen=True, slots=True)
class Labelled:
    name: str  # the label file's stem
    file: Path  # the source file on disk
    path: str  # as the index would store it: the path inside its repository
    module: str
    edges: frozenset[Edge]
    kinds: dict[Edge, str]  # the labelled kind of each edge


def read_labels(label: Path) -> Labelled:
    header: dict[str, str] = {}
    edges: set[Edge] = set()
    kinds: dict[Edge, str] = {}
    for raw in label.read_text(encoding="utf-8").splitlines():
        if raw.startswith("#"):
            key, sep, value = raw[1:].partition(":")
            if sep and key.strip() in {"corpus", "repo", "path", "module"}:
                header[key.strip()] = value.strip()
        elif raw.strip():
            line, target, *kind = raw.split("\t")
            edge = (int(line), target.strip())
            edges.add(edge)
            kinds[edge] = kind[0].strip() if kind else ""
    file = CORPORA[header["corpus"]] / header["repo"] / header["path"]
    return Labelled(label.stem, file, header["path"], header["module"], frozenset(edges), kinds)


def source(path: str, module: str, data: bytes) -> SourceFile:
    return SourceFile(path, module, "bench", data, "", len(data), 0.0)


def extracted(item: Labelled) -> dict[Edge, set[str]]:
    """Each extracted (line, target), with the kinds it was found as on that line."""
    graph = file_graph(source(item.path, item.module, item.file.read_bytes()), new_parser())
    found: dict[Edge, set[str]] = {}
    for r in graph.references:
        found.setdefault((r.line, f"{r.target_module}.{r.target_name}"), set()).add(r.kind)
    return found


def score(item: Labelled, found: dict[Edge, set[str]]) -> dict[str, Any]:
    expected, got = item.edges, frozenset(found)
    hits = len(expected & got)
    return {
        "expected": len(expected),
        "extracted": len(got),
        "matched": hits,
        # Not part of the match: how many matched edges were also found as the labelled kind.
        "same_kind": sum(item.kinds.get(e, "") in found[e] for e in expected & got),
        "precision": hits / len(got) if got else 1.0,
        "recall": hits / len(expected) if expected else 1.0,
        "missed": sorted(expected - got),
        "wrong": sorted(got - expected),
    }


def accuracy() -> dict[str, Any]:
    rows: dict[str, Any] = {}
    totals = {"expected": 0, "extracted": 0, "matched": 0, "same_kind": 0}
    for label in sorted(LABELS.glob("*.tsv")):
        item = read_labels(label)
        row = score(item, extracted(item))
        rows[item.name] = {"source": str(item.file.relative_to(REPO.parent)), **row}
        for key in totals:
            totals[key] += row[key]
    overall = {
        **totals,
        "precision": totals["matched"] / totals["extracted"] if totals["extracted"] else 1.0,
        "recall": totals["matched"] / totals["expected"] if totals["expected"] else 1.0,
    }
    return {"files": rows, "overall": overall}


def timing() -> dict[str, Any]:
    """ms per devcorpus file: chunking (with its parse) against extraction on the same tree."""
    from gbr.core.embed.embedder import OnnxEmbedder
    from gbr.core.embed.model_files import resolve_model_files

    count_tokens = OnnxEmbedder(resolve_model_files(env=os.environ)).count_tokens
    root = CORPORA["devcorpus"]
    files = sorted(
        p for p in root.rglob("*.gleam") if not SKIP & set(p.relative_to(root).parts[:-1])
    )
    parser = new_parser()
    # Wall clock, and this process's CPU time: on a shared machine the first also counts
    # the time other processes held the cores, the second only ours.
    wall = {"chunk": 0.0, "extract": 0.0}
    cpu = {"chunk": 0.0, "extract": 0.0}
    references = 0
    for file in files:
        data = file.read_bytes()
        src = source(file.relative_to(root).as_posix(), file.stem, data)
        started, started_cpu = time.perf_counter(), time.process_time()
        chunk_file(src, parser, count_tokens)
        wall["chunk"] += time.perf_counter() - started
        cpu["chunk"] += time.process_time() - started_cpu
        tree = parse_yielding(parser, data.removeprefix(b"\xef\xbb\xbf"))
        started, started_cpu = time.perf_counter(), time.process_time()
        graph = extract_file_graph(src, tree.root_node, parser)
        wall["extract"] += time.perf_counter() - started
        cpu["extract"] += time.process_time() - started_cpu
        references += len(graph.references)
    n = len(files)
    return {
        "files": n,
        "references": references,
        "chunk_ms_per_file": 1000 * wall["chunk"] / n,
        "extract_ms_per_file": 1000 * wall["extract"] / n,
        "chunk_cpu_ms_per_file": 1000 * cpu["chunk"] / n,
        "extract_cpu_ms_per_file": 1000 * cpu["extract"] / n,
        "extract_vs_chunk": wall["extract"] / wall["chunk"],
    }


def print_table(report: dict[str, Any]) -> None:
    print(
        f"{'file':36} {'expected':>8} {'got':>5} {'match':>5} {'kind':>5} {'prec':>6} {'recall':>6}"
    )
    for name, row in report["files"].items():
        print(
            f"{name:36} {row['expected']:8} {row['extracted']:5} {row['matched']:5}"
            f" {row['same_kind']:5} {row['precision']:6.3f} {row['recall']:6.3f}"
        )
        for line, target in row["missed"]:
            print(f"    missed  {line}: {target}")
        for line, target in row["wrong"]:
            print(f"    wrong   {line}: {target}")
    o = report["overall"]
    print(
        f"{'overall':36} {o['expected']:8} {o['extracted']:5} {o['matched']:5}"
        f" {o['same_kind']:5} {o['precision']:6.3f} {o['recall']:6.3f}"
    )
    if "timing" in report:
        t = report["timing"]
        print(
            f"\ntiming over {t['files']} devcorpus files ({t['references']} references): "
            f"chunk_file {t['chunk_ms_per_file']:.2f} ms/file "
            f"(CPU {t['chunk_cpu_ms_per_file']:.2f}), "
            f"graph extraction {t['extract_ms_per_file']:.2f} ms/file "
            f"(CPU {t['extract_cpu_ms_per_file']:.2f}; "
            f"{100 * t['extract_vs_chunk']:.0f} % of chunking)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--timing", action="store_true", help="also time extraction vs chunking")
    args = parser.parse_args()
    report = accuracy()
    if args.timing:
        report["timing"] = timing()
    if args.json:
        print(json.dumps(report, indent=2, default=list))
    else:
        print_table(report)


if __name__ == "__main__":
    main()
