"""The graph as `index` builds it: the real grammar, extractor, pipeline and DuckDB file,
then kept per file by incremental runs (a changed file's edges replaced, a deleted one's gone)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.conftest import CTL

CALLER = """import bookshelf/isbn

pub fn check(code: String) -> Bool {
  isbn.is_valid(code)
}

pub fn clean(code: String) -> String {
  code |> isbn.parse |> fn(_) { code }
}
"""


def ctl(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([CTL, *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def callers(root: Path, name: str) -> list[str]:
    done = ctl("callers", name, "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    return [f"{c['module']}.{c['name']}" for c in json.loads(done.stdout)["callers"]]


def test_index_builds_the_graph_and_keeps_it_per_file(small_example: Path):
    root = small_example
    (root / "src" / "bookshelf" / "checker.gleam").write_text(CALLER)
    assert ctl("index", ".", "--json", cwd=root).returncode == 0
    assert "bookshelf/checker.check" in callers(root, "isbn.is_valid")
    assert "bookshelf/checker.clean" in callers(root, "bookshelf/isbn.parse")
    refs = json.loads(ctl("refs", "isbn.parse", "--json", cwd=root).stdout)
    pipe = [r for r in refs["references"] if r["path"] == "src/bookshelf/checker.gleam"]
    assert [(r["line"], r["kind"]) for r in pipe] == [(8, "pipe")]

    # A changed file replaces its own edges, and only those.
    (root / "src" / "bookshelf" / "checker.gleam").write_text(
        CALLER.replace("isbn.is_valid(code)", 'code == ""')
    )
    assert ctl("index", ".", "--json", cwd=root).returncode == 0
    assert "bookshelf/checker.check" not in callers(root, "isbn.is_valid")
    assert "bookshelf/checker.clean" in callers(root, "bookshelf/isbn.parse")
    assert "bookshelf/isbn.is_valid" in callers(root, "bookshelf/isbn.parse")

    # A deleted file takes its edges and definitions along.
    (root / "src" / "bookshelf" / "checker.gleam").unlink()
    assert ctl("index", ".", "--json", cwd=root).returncode == 0
    assert "bookshelf/checker.clean" not in callers(root, "bookshelf/isbn.parse")
    gone = ctl("refs", "bookshelf/checker.check", cwd=root)
    assert gone.returncode == 1 and "no definition or reference" in gone.stderr


def test_an_external_target_resolves_when_the_dependency_is_indexed(make_package):
    root = make_package(
        {
            "src/app.gleam": "import shout/loud\n\npub fn greet() -> String {\n"
            '  loud.shout("hi")\n}\n',
            "build/packages/shout/gleam.toml": 'name = "shout"\nversion = "1.0.0"\n',
            "build/packages/shout/src/shout/loud.gleam": "pub fn shout(s: String) -> String {\n"
            "  s\n}\n",
        }
    )
    assert ctl("index", ".", "--no-include-deps", cwd=root).returncode == 0
    before = json.loads(ctl("refs", "shout/loud.shout", "--json", cwd=root).stdout)
    assert before["target"]["internal"] is False and before["definitions"] == []
    assert ctl("index", ".", "--include-deps", cwd=root).returncode == 0
    after = json.loads(ctl("refs", "loud.shout", "--json", cwd=root).stdout)
    assert after["target"]["internal"] is True
    assert after["definitions"][0]["path"].endswith("shout/src/shout/loud.gleam")
    assert [(r["path"], r["line"]) for r in after["references"]] == [("src/app.gleam", 4)]
