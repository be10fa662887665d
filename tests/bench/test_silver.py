"""bench/silver.py and bench/_silver_data.py: the silver benchmark's data and its scores."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from bench._corpus import chunks_of, pipeline_limits
from bench._silver_data import (
    QUERY_CAP,
    build,
    copy_stripped,
    load_split,
    repo_queries,
    split_of,
    strip_doc_comments,
)
from bench.eval import MemoEmbedder, run_units
from bench.evaluation import METRICS, bootstrap_interval, repository_interval
from bench.silver import main, score_block, silver_variants, split_units
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.parse.chunker import ChunkLimits
from gbr.core.store.facade import Store

REPO = Path(__file__).resolve().parents[2]
RECREATE = REPO / "bench" / "corpus" / "recreate.sh"

THERMO = """//// Temperatures, and the module's own doc.
import gleam/float

/// Turns a temperature in Celsius into Fahrenheit. Rounds nothing.
pub fn to_fahrenheit(celsius: Float) -> Float {
  celsius *. 1.8 +. 32.0
}

/// Turns a temperature in Fahrenheit back into Celsius.
@deprecated("use convert")
pub fn to_celsius(fahrenheit: Float) -> Float {
  { fahrenheit -. 32.0 } /. 1.8
}

/// Private helpers give no query, documented or not.
fn round_to(x: Float, places: Int) -> Float {
  float.to_precision(x, places)
}

/// Returns the value unchanged, for the pipeline.
pub fn keep(x: Float) -> Float {
  x
}

/// Returns the value unchanged, for the pipeline.
pub fn same(x: Float) -> Float {
  x
}

pub const banner = "
/// this line is a string, not a doc comment
"

/// The scales a reading can be written in, one per country's habit.
pub type Scale {
  /// Water freezes at zero.
  Celsius
  Fahrenheit
}
"""

THERMO_TEST = """/// Checks that freezing water converts to thirty-two degrees.
pub fn freezing_test() {
  to_fahrenheit(0.0)
}
"""

WORDS_ONLY = ChunkLimits()


def words(text: str) -> int:
    return len(text.split())


def write_repo(root: Path, name: str, source: str = THERMO) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "test").mkdir()
    (root / "gleam.toml").write_text(f'name = "{name}"\nversion = "1.0.0"\n')
    (root / "LICENSE").write_text("MIT, for the test\n")
    (root / "src" / f"{name}.gleam").write_text(source)
    (root / "test" / f"{name}_test.gleam").write_text(THERMO_TEST)
    return root


# ------------------------------------------------------------------------------ stripping


def test_stripping_blanks_doc_comments_and_keeps_every_other_line_where_it_was() -> None:
    stripped = strip_doc_comments(THERMO.encode()).decode()

    before, after = THERMO.split("\n"), stripped.split("\n")
    assert len(after) == len(before)
    for old, new in zip(before, after, strict=True):
        if old.lstrip().startswith("///") and "this line is a string" not in old:
            assert new.strip() == "", old
        else:
            assert new == old
    assert "Celsius into Fahrenheit" not in stripped
    assert "Water freezes" not in stripped  # a constructor's doc goes too
    assert "/// this line is a string, not a doc comment" in stripped  # the grammar knows
    assert '@deprecated("use convert")' in stripped


def test_the_stripped_copy_indexes_every_definition_at_its_original_lines(tmp_path: Path) -> None:
    source = write_repo(tmp_path / "corpus" / "thermo", "thermo")
    dest = tmp_path / "copy" / "thermo"

    changed = copy_stripped(source, dest)

    assert changed == 2  # the module and its test file; gleam.toml and LICENSE copied as they are
    assert (dest / "LICENSE").read_text() == "MIT, for the test\n"
    original = {(c.path, c.name): c for c in chunks_of(source, words, WORDS_ONLY)}
    bare = {(c.path, c.name): c for c in chunks_of(dest, words, WORDS_ONLY)}
    assert set(bare) == set(original)
    for key, chunk in bare.items():
        if chunk.kind != "module":
            assert chunk.doc == ""
            assert chunk.end_line == original[key].end_line
    fahrenheit = bare[("src/thermo.gleam", "to_fahrenheit")]
    lines = (dest / "src" / "thermo.gleam").read_text().split("\n")
    assert lines[fahrenheit.start_line - 1].startswith("pub fn to_fahrenheit")
    assert lines[fahrenheit.start_line - 1] == THERMO.split("\n")[fahrenheit.start_line - 1]


# -------------------------------------------------------------------------------- queries


def test_each_documented_public_definition_outside_tests_gives_its_first_sentence(
    tmp_path: Path,
) -> None:
    source = write_repo(tmp_path / "corpus" / "thermo", "thermo")
    dest = tmp_path / "copy" / "thermo"
    copy_stripped(source, dest)

    made = repo_queries(
        "someone__thermo",
        "someone/thermo",
        chunks_of(source, words, WORDS_ONLY),
        chunks_of(dest, words, WORDS_ONLY),
    )

    by_name = {q["targets"][0]["name"]: q for q in made.queries}
    assert set(by_name) == {"to_fahrenheit", "to_celsius", "Scale"}
    assert by_name["to_fahrenheit"]["query"] == "Turns a temperature in Celsius into Fahrenheit"
    assert by_name["to_fahrenheit"]["targets"] == [
        {"file": "src/thermo.gleam", "name": "to_fahrenheit"}
    ]
    assert by_name["Scale"]["kind"] == "type"
    assert made.dropped["test code"] == 1 and made.dropped["private"] == 1
    assert made.dropped["shared doc sentence"] == 2  # keep and same: no single answer
    assert made.dropped["no doc"] == 1  # banner
    assert {q["repo"] for q in made.queries} == {"someone__thermo"}
    assert made.split == split_of("someone/thermo")


def test_the_cap_keeps_the_same_queries_whatever_order_the_chunks_come_in(tmp_path: Path) -> None:
    source = "\n".join(
        f"/// Gives back the number {n} spelled as digits.\n"
        f"pub fn number_{n}() -> Int {{\n  {n}\n}}\n"
        for n in range(12)
    )
    root = write_repo(tmp_path / "many", "many", source)
    chunks = list(chunks_of(root, words, WORDS_ONLY))

    first = repo_queries("o__many", "o/many", chunks, chunks, cap=5)
    again = repo_queries("o__many", "o/many", list(reversed(chunks)), chunks, cap=5)

    chosen = [q["id"] for q in first.queries if q["in_benchmark"]]
    assert len(chosen) == 5 and first.in_benchmark == 5
    assert chosen == [q["id"] for q in again.queries if q["in_benchmark"]]
    assert len(first.queries) == 12  # the rest stay, marked, for training


# ---------------------------------------------------------------------------------- split


def test_the_split_is_by_repository_name_deterministic_and_near_80_10_10() -> None:
    names = [f"owner{n}/package_{n}" for n in range(4000)]

    counts = Counter(split_of(n) for n in names)

    assert split_of("ghivert/sketch") == split_of("GHIVERT/Sketch ") == split_of("ghivert/sketch")
    bucket = int(hashlib.sha256(b"ghivert/sketch").hexdigest()[:8], 16) % 100
    assert split_of("ghivert/sketch") == (
        "train" if bucket < 80 else "dev" if bucket < 90 else "test"
    )
    assert 0.77 < counts["train"] / 4000 < 0.83
    assert 0.08 < counts["dev"] / 4000 < 0.12
    assert 0.08 < counts["test"] / 4000 < 0.12


# ------------------------------------------------------------------------------- interval


def test_the_interval_of_a_known_sample_is_where_the_normal_approximation_puts_it() -> None:
    hits = np.array([1.0, 0.0] * 200)  # 400 queries, half found
    rows = np.stack([hits, hits, np.ones(400), hits / 2], axis=1)

    interval = bootstrap_interval(rows, samples=4000, seed=1)

    lo, hi = interval["R@1"]
    assert 0.44 < lo < 0.46 and 0.54 < hi < 0.56  # 0.5 -+ 1.96 * sqrt(0.25 / 400) = 0.049
    assert interval["R@10"] == (1.0, 1.0)
    assert interval["MRR@10"][0] == pytest.approx(lo / 2, abs=0.002)
    assert bootstrap_interval(rows, samples=4000, seed=1) == interval  # seeded: reproducible
    assert set(interval) == set(METRICS)
    assert all(np.isnan(v).all() for v in bootstrap_interval(np.empty((0, 4))).values())


def test_resampling_repositories_widens_the_interval_when_repositories_differ() -> None:
    found = np.array([1.0] * 100 + [0.0] * 100)  # one repository all found, one all missed
    rows = np.stack([found] * 4, axis=1)
    repos = ["good"] * 100 + ["bad"] * 100

    by_query = bootstrap_interval(rows)["R@5"]
    by_repo = repository_interval(rows, repos)["R@5"]
    even = repository_interval(np.stack([np.tile([1.0, 0.0], 100)] * 4, axis=1), repos)["R@5"]

    assert by_query[1] - by_query[0] < 0.2
    assert by_repo == (0.0, 1.0)  # two repositories: a resample is either, or both
    assert even == (0.5, 0.5)  # repositories alike: only the question sample is noise


# ------------------------------------------------------------------------ end to end, real


@pytest.fixture
def tiny_corpus(tmp_path: Path) -> Path:
    """Two repositories and a manifest, as ../shared/gleamcorpus lays them out."""
    corpus = tmp_path / "gleamcorpus"
    write_repo(corpus / "someone__thermo", "thermo")
    write_repo(
        corpus / "other__lights",
        "lights",
        "/// The colours a traffic light shows, in the order it shows them.\n"
        "pub type Light {\n  Red\n  Amber\n  Green\n}\n\n"
        "/// Moves a traffic light on to its next colour.\n"
        "pub fn next(light: Light) -> Light {\n"
        "  case light {\n    Red -> Green\n    Green -> Amber\n    Amber -> Red\n  }\n}\n",
    )
    rows = [
        "folder\tgithub\tcommit\tlicence\tgleam_files\tgleam_lines\tdocumented_public_defs",
        "someone__thermo\tsomeone/thermo\t" + "a" * 40 + "\tMIT\t2\t40\t6",
        "other__lights\tother/lights\t" + "b" * 40 + "\tMIT\t2\t20\t2",
    ]
    (corpus / "MANIFEST.tsv").write_text("\n".join(rows) + "\n")
    return corpus


def test_build_then_run_scores_the_doc_sentences_against_code_without_docs(
    tiny_corpus: Path, tmp_path: Path, model: OnnxEmbedder
) -> None:
    work = tmp_path / "work"
    made = build(tiny_corpus, work, model.count_tokens, pipeline_limits(model))
    splits = {m.folder: m.split for m in made}
    assert splits == {
        "someone__thermo": split_of("someone/thermo"),
        "other__lights": split_of("other/lights"),
    }
    split = splits["someone__thermo"]
    assert set(load_split(work, split)) >= {"someone__thermo"}

    memo = MemoEmbedder(model)
    shipped = next(v for v in silver_variants() if v.name == "shipped-first")
    per_repo, _ = run_units(
        split_units(work, split, "per-package"), shipped, model, memo, work, split
    )
    one, _ = run_units(split_units(work, split, "all-in-one"), shipped, model, memo, work, split)

    assert len(per_repo) == len(one) == sum(len(m.queries) for m in made if m.split == split)
    assert {h[0] for _, _, hits in one for h in hits} & {"someone__thermo/src/thermo.gleam"}
    block = score_block(shipped, per_repo, 1.0)
    assert block["overall"]["R@10"] == 1.0  # a handful of chunks: every target is in the top 10
    assert block["interval95"]["R@10"] == (1.0, 1.0)
    assert block["interval95_by_repository"]["R@10"] == (1.0, 1.0)
    assert set(block["ranks"]) == {q.id for _, q, _ in per_repo}
    assert all(1 <= rank <= 10 for rank in block["ranks"].values())
    with Store.open(work / split / "someone__thermo-header.duckdb") as store:
        docs = store.con.execute("SELECT count(*) FROM chunks WHERE doc <> ''").fetchone()
        texts = " ".join(r[0] for r in store.con.execute("SELECT text FROM chunks").fetchall())
    assert docs == (0,) and "Celsius into Fahrenheit" not in texts


def test_negatives_are_the_first_stage_hits_that_are_not_the_target(
    tiny_corpus: Path, tmp_path: Path, model: OnnxEmbedder
) -> None:
    work = tmp_path / "work"
    made = build(tiny_corpus, work, model.count_tokens, pipeline_limits(model))
    split = next(m.split for m in made if m.folder == "someone__thermo")
    out = tmp_path / "negatives" / "x-negatives.jsonl"

    assert main(["--work", str(work), "negatives", "--split", split, "--out", str(out)]) == 0

    lines = [json.loads(line) for line in out.read_text().splitlines()]
    thermo = [r for r in lines if r["repo"] == "someone__thermo"]
    assert len(thermo) == 3
    chunks = {
        (r["repo"], r["path"], r["name"]): r
        for r in map(json.loads, (out.parent / "x-chunks.jsonl").read_text().splitlines())
    }
    for row in thermo:
        target = (row["target"][0]["path"], row["target"][0]["name"])
        assert target not in {(n["path"], n["name"]) for n in row["negatives"]}
        assert row["target_rank"] is not None  # four definitions: the target is in the top 30
        assert [n["rank"] for n in row["negatives"]] == sorted(n["rank"] for n in row["negatives"])
        assert ("someone__thermo", *target) in chunks
        for n in row["negatives"]:
            assert ("someone__thermo", n["path"], n["name"]) in chunks
    fahrenheit = chunks[("someone__thermo", "src/thermo.gleam", "to_fahrenheit")]
    assert "celsius *. 1.8" in fahrenheit["text"] and "///" not in fahrenheit["text"]


def test_run_writes_both_layouts_and_table_prints_a_row_for_each(
    tiny_corpus: Path, tmp_path: Path, model: OnnxEmbedder, capsys: pytest.CaptureFixture[str]
) -> None:
    work = tmp_path / "work"
    made = build(tiny_corpus, work, model.count_tokens, pipeline_limits(model))
    split = next(m.split for m in made if m.folder == "other__lights")
    out = tmp_path / "run.json"

    assert main(["--work", str(work), "run", "--split", split, "--variants", "bm25,dense",
                 "--json", str(out)]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["table", str(out)]) == 0

    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith(f"| {split}")]
    layouts = json.loads(out.read_text())["splits"][split]
    assert set(layouts) == {"per-package", "all-in-one"}
    assert len(rows) == 4  # two layouts x two variants
    queries = sum(len(m.queries) for m in made if m.split == split)
    assert all(f" | {queries} | " in row for row in rows)
    assert all(row.count("[") == 4 for row in rows)  # every metric with its interval


def test_run_before_build_stops_with_the_command_to_run(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as stop:
        main(["--work", str(tmp_path / "nothing"), "run", "--split", "dev"])
    assert "run `bench/silver.py build` first" in str(stop.value)


def test_the_default_cap_is_the_documented_one() -> None:
    assert QUERY_CAP == 40  # docs/retrieval-silver.md and the manifest's summary say 40


# ------------------------------------------------------------------------------- recreate


def _git(*args: str, cwd: Path) -> str:
    who = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env = {**os.environ, **who, "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    ).stdout.strip()


def test_recreate_fetches_the_pinned_commit_and_keeps_only_the_listed_files(tmp_path: Path) -> None:
    remote = write_repo(tmp_path / "remotes" / "someone" / "thermo", "thermo")
    (remote / "README.md").write_text("not kept\n")
    _git("init", "-q", cwd=remote)
    _git("add", ".", cwd=remote)
    _git("commit", "-qm", "pinned", cwd=remote)
    pinned = _git("rev-parse", "HEAD", cwd=remote)
    kept = ["LICENSE", "gleam.toml", "src/thermo.gleam"]  # the test file and README left out
    listed = "".join(
        f"{hashlib.sha256((remote / k).read_bytes()).hexdigest()}  someone__thermo/{k}\n"
        for k in kept
    )
    (remote / "src" / "thermo.gleam").write_text("pub fn later() { 1 }\n")
    _git("commit", "-qam", "later", cwd=remote)  # the pinned commit is no longer the tip
    kit = tmp_path / "kit"
    kit.mkdir()
    shutil.copy(RECREATE, kit / "recreate.sh")
    (kit / "MANIFEST.tsv").write_text(
        f"repository\tcommit\tlicence\nsomeone/thermo\t{pinned}\tMIT\n"
    )
    (kit / "FILES.sha256").write_text(listed)
    dest = tmp_path / "recreated"

    done = subprocess.run(
        ["sh", str(kit / "recreate.sh"), str(dest)],
        env={**os.environ, "GIT_BASE": f"file://{tmp_path / 'remotes'}"},
        capture_output=True,
        text=True,
    )

    assert done.returncode == 0, done.stderr
    files = sorted(
        p.relative_to(dest / "someone__thermo").as_posix()
        for p in (dest / "someone__thermo").rglob("*")
        if p.is_file() and p.name != ".recreated"
    )
    assert files == kept
    assert (dest / "someone__thermo" / "src" / "thermo.gleam").read_text() == THERMO
    assert "files verified" in done.stdout


def test_recreate_fails_when_a_file_is_not_what_the_list_says(tmp_path: Path) -> None:
    remote = write_repo(tmp_path / "remotes" / "someone" / "thermo", "thermo")
    _git("init", "-q", cwd=remote)
    _git("add", ".", cwd=remote)
    _git("commit", "-qm", "pinned", cwd=remote)
    kit = tmp_path / "kit"
    kit.mkdir()
    shutil.copy(RECREATE, kit / "recreate.sh")
    pinned = _git("rev-parse", "HEAD", cwd=remote)
    (kit / "MANIFEST.tsv").write_text(f"repository\tcommit\nsomeone/thermo\t{pinned}\n")
    (kit / "FILES.sha256").write_text("0" * 64 + "  someone__thermo/gleam.toml\n")

    done = subprocess.run(
        ["sh", str(kit / "recreate.sh"), str(tmp_path / "out")],
        env={**os.environ, "GIT_BASE": f"file://{tmp_path / 'remotes'}"},
        capture_output=True,
        text=True,
    )

    assert done.returncode != 0
    assert "FAILED" in done.stdout + done.stderr


def test_compare_gives_the_paired_difference_of_two_variants(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """B found q2 (missed by A), lost q1's first place and lifted q3 into the top 5."""
    block = {
        "a": {"ranks": {"q1": 1, "q2": 0, "q3": 6}},
        "b": {"ranks": {"q1": 2, "q2": 1, "q3": 3}},
    }
    run = tmp_path / "run.json"
    run.write_text(json.dumps({"splits": {"test": {"per-package": block}}}))
    assert main(["compare", str(run), "a", "b"]) == 0
    row = capsys.readouterr().out.splitlines()[-1]
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:2] == ["test", "per-package"] and cells[3] == "3"
    means = [float(c.split()[0]) for c in cells[4:]]
    # R@1: -1 +1 0; R@5: 0 +1 +1; R@10: 0 +1 0; MRR: -1/2 +1 (1/3 - 1/6)
    assert means == pytest.approx([0.0, 0.667, 0.333, (-0.5 + 1 + 1 / 3 - 1 / 6) / 3], abs=1e-3)
