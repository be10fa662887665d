"""The silver benchmark's data: splits, doc-stripped copies and doc-sentence queries.

A CodeSearchNet-style benchmark made from code nobody here wrote (../shared/gleamcorpus):
each documented public definition gives one query, the first sentence of its doc comment,
and the copy of its repository that gets indexed has every doc comment blanked out, so the
doc cannot find itself. Blanking keeps each comment's line breaks, so every other line of
the copy sits at the same line number as in the original.

Nothing here writes into the repository but the manifest and the summary: the copies and the
queries are derived from third-party code and stay under a work folder.
"""

from __future__ import annotations

import csv
import hashlib
import json
import shutil
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench._corpus import MIN_DOC_CHARS, chunks_of, first_sentence
from gbr.core.parse.chunk_text import doc_prose
from gbr.core.parse.chunker import ChunkLimits, TokenCounter, new_parser
from gbr.core.rank.priors import is_test
from gbr.core.records import Chunk

SPLITS = ("train", "dev", "test")
# Per repository at most this many queries count in the benchmark, chosen by a hash of their
# place, so that the few large repositories (27k-63k lines) do not decide the averages.
QUERY_CAP = 40
DOC_NODES = ("statement_comment", "module_comment")  # `///` and `////`; `//` stays
LICENCE_PREFIXES = ("LICENSE", "LICENCE", "NOTICE", "COPYING")


def split_of(repo: str) -> str:
    """train / dev / test, 80 / 10 / 10, from the repository's `owner/name` alone: the same
    repository lands in the same split on every machine and whatever else is in the corpus."""
    bucket = int(hashlib.sha256(repo.strip().lower().encode()).hexdigest()[:8], 16) % 100
    return "train" if bucket < 80 else "dev" if bucket < 90 else "test"


def strip_doc_comments(data: bytes, parser: Any = None) -> bytes:
    """The file with every doc comment's text removed and its line breaks kept.

    The grammar finds the comments, so a `///` inside a multi-line string stays."""
    tree = (parser or new_parser()).parse(data)
    spans: list[tuple[int, int]] = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.type in DOC_NODES:
            spans.append((node.start_byte, node.end_byte))
        elif node.child_count:
            stack.extend(node.children)
    out = bytearray()
    at = 0
    for start, end in sorted(spans):
        out += data[at:start]
        out += b"\n" * data.count(b"\n", start, end)
        at = end
    out += data[at:]
    return bytes(out)


def copy_stripped(source: Path, dest: Path, parser: Any = None) -> int:
    """`source` copied to `dest` with the doc comments of its `.gleam` files blanked; how
    many files changed. `dest` is replaced."""
    parser = parser or new_parser()
    if dest.exists():
        shutil.rmtree(dest)
    changed = 0
    for path in sorted(source.rglob("*")):
        if not path.is_file():
            continue
        target = dest / path.relative_to(source)
        target.parent.mkdir(parents=True, exist_ok=True)
        if path.suffix == ".gleam":
            data = path.read_bytes()
            stripped = strip_doc_comments(data, parser)
            changed += stripped != data
            target.write_bytes(stripped)
        else:
            shutil.copyfile(path, target)
    return changed


@dataclass
class RepoQueries:
    """What one repository gives: its queries in benchmark order and why others were left."""

    folder: str
    repo: str
    split: str
    queries: list[dict[str, Any]] = field(default_factory=list)
    dropped: Counter[str] = field(default_factory=Counter)

    @property
    def in_benchmark(self) -> int:
        return sum(1 for q in self.queries if q["in_benchmark"])


def candidate(chunk: Chunk) -> str:
    """Why a chunk gives no query, or "" when it gives one."""
    if chunk.kind == "module" or chunk.part != 0:
        return "not a definition"
    if chunk.visibility != "pub":
        return "private"
    if is_test(chunk.path, chunk.name):
        return "test code"
    if len(doc_prose(chunk.doc)) < MIN_DOC_CHARS:
        return "no doc" if not chunk.doc.strip() else "doc too short"
    return ""


def repo_queries(
    folder: str,
    repo: str,
    original: Iterable[Chunk],
    stripped: Iterable[Chunk],
    cap: int = QUERY_CAP,
) -> RepoQueries:
    """The queries of one repository from its chunks before and after stripping.

    A doc sentence that two definitions of the repository share ("Returns the value.") has
    no single answer and is left out; so is a definition the stripped copy does not index
    as a whole node under the same path and name. The first `cap` in the order of a hash of
    (repository, path, name) are the benchmark's; the rest are kept for training."""
    out = RepoQueries(folder, repo, split_of(repo))
    present = {(c.path, c.name) for c in stripped if c.kind != "module"}
    found: list[tuple[str, Chunk]] = []
    for chunk in original:
        why = candidate(chunk)
        if why:
            if why != "not a definition":
                out.dropped[why] += 1
            continue
        found.append((first_sentence(doc_prose(chunk.doc)), chunk))
    said = Counter(text.lower() for text, _ in found)
    kept: list[tuple[str, str, Chunk]] = []
    for text, chunk in found:
        if said[text.lower()] > 1:
            out.dropped["shared doc sentence"] += 1
        elif (chunk.path, chunk.name) not in present:
            out.dropped["not indexed when stripped"] += 1
        else:
            order = hashlib.sha256(f"{repo}\0{chunk.path}\0{chunk.name}".encode()).hexdigest()
            kept.append((order, text, chunk))
    kept.sort(key=lambda item: item[0])
    for n, (_, text, chunk) in enumerate(kept):
        out.queries.append(
            {
                "id": f"{folder}:{chunk.path}:{chunk.name}",
                "query": text,
                "kind": chunk.kind,
                "targets": [{"file": chunk.path, "name": chunk.name}],
                "repo": folder,
                "in_benchmark": n < cap,
            }
        )
    return out


@dataclass(frozen=True)
class CorpusRepo:
    """One row of the corpus manifest (../shared/gleamcorpus/MANIFEST.tsv)."""

    folder: str
    repo: str
    commit: str
    licence: str
    gleam_files: int
    gleam_lines: int
    documented_defs: int


def read_manifest(corpus: Path) -> list[CorpusRepo]:
    with (corpus / "MANIFEST.tsv").open(newline="") as handle:
        return [
            CorpusRepo(
                row["folder"],
                row["github"],
                row["commit"],
                row["licence"],
                int(row["gleam_files"]),
                int(row["gleam_lines"]),
                int(row["documented_public_defs"]),
            )
            for row in csv.DictReader(handle, delimiter="\t")
        ]


def build(
    corpus: Path,
    work: Path,
    count_tokens: TokenCounter,
    limits: ChunkLimits,
    cap: int = QUERY_CAP,
    only: Iterable[str] = SPLITS,
    progress: Callable[[str], None] | None = None,
) -> list[RepoQueries]:
    """Stripped copies under WORK/stripped/SPLIT/FOLDER and the queries of each split in
    WORK/queries/SPLIT.jsonl (one line per query, `in_benchmark` marking the capped set)."""
    wanted = set(only)
    parser = new_parser()
    made: list[RepoQueries] = []
    for row in read_manifest(corpus):
        split = split_of(row.repo)
        if split not in wanted:
            continue
        source = corpus / row.folder
        dest = work / "stripped" / split / row.folder
        copy_stripped(source, dest, parser)
        made.append(
            repo_queries(
                row.folder,
                row.repo,
                chunks_of(source, count_tokens, limits),
                chunks_of(dest, count_tokens, limits),
                cap,
            )
        )
        if progress is not None:
            progress(f"{split} {row.folder}: {made[-1].in_benchmark}/{len(made[-1].queries)}")
    (work / "queries").mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        if split not in wanted:
            continue
        with (work / "queries" / f"{split}.jsonl").open("w") as out:
            for repo in made:
                if repo.split == split:
                    out.writelines(json.dumps(q) + "\n" for q in repo.queries)
    return made


def load_split(
    work: Path, split: str, benchmark_only: bool = True
) -> dict[str, list[dict[str, Any]]]:
    """The query lines of one split, by repository folder, in file order."""
    path = work / "queries" / f"{split}.jsonl"
    if not path.is_file():
        raise SystemExit(f"no {path}: run `bench/silver.py build` first")
    out: dict[str, list[dict[str, Any]]] = {}
    for line in path.read_text("utf-8").splitlines():
        raw = json.loads(line)
        if raw["in_benchmark"] or not benchmark_only:
            out.setdefault(raw["repo"], []).append(raw)
    return out


def iter_manifest_rows(
    rows: list[CorpusRepo], made: dict[str, RepoQueries]
) -> Iterator[list[object]]:
    """The committed manifest: what the corpus is, where each repository goes, what it gives."""
    yield [
        "repository",
        "commit",
        "licence",
        "gleam_files",
        "gleam_lines",
        "documented_public_defs",
        "split",
        "silver_queries",
        "silver_benchmark_queries",
    ]
    for row in rows:
        repo = made.get(row.folder)
        yield [
            row.repo,
            row.commit,
            row.licence,
            row.gleam_files,
            row.gleam_lines,
            row.documented_defs,
            split_of(row.repo),
            len(repo.queries) if repo else "",
            repo.in_benchmark if repo else "",
        ]
