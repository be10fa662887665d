"""`gleambrctl refs | callers | callees | graph`: output, --json, exit codes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from gbr.core.embed.embedder import OnnxEmbedder
from tests.conftest import invoke
from tests.graph.sample import sample_store


@pytest.fixture(scope="module")
def sample_package(tmp_path_factory: pytest.TempPathFactory, model: OnnxEmbedder) -> Path:
    """The sample's package and index, made once; each test reads a copy."""
    root = tmp_path_factory.mktemp("graph-cli") / "web"
    path = root / ".gbr" / "index.duckdb"
    path.parent.mkdir(parents=True)
    (root / "gleam.toml").write_text('name = "web"\nversion = "1.0.0"\n')
    sample_store(path, model, root=root).close()
    return root


@pytest.fixture
def db(tmp_path: Path, sample_package: Path) -> Path:
    shutil.copytree(sample_package, tmp_path / "web")
    return tmp_path / "web" / ".gbr" / "index.duckdb"


def ctl(*args: str) -> subprocess.CompletedProcess:
    """The command through typer's runner, in this process: output and exit code are the
    point here, not the process."""
    return invoke(*args)


def test_refs_groups_positions_by_file(db: Path):
    done = ctl("refs", "cookie.set_cookie", "--db", str(db))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "web/cookie.set_cookie"
    assert "defined at src/web/cookie.gleam:3:8 function" in lines[1]
    assert "src/web/handler.gleam:4:3  call in web/handler.handle" in lines
    assert "src/web/handler.gleam:9:3  pipe in web/handler.respond" in lines
    assert lines[-1] == "2 references in 1 file"


def test_refs_json_is_the_daemons_object_stamped(db: Path):
    done = ctl("refs", "set_cookie", "--db", str(db), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["package"] == "web" and data["schema_version"]
    assert data["target"] == {"module": "web/cookie", "name": "set_cookie", "internal": True}
    assert [r["line"] for r in data["references"]] == [4, 9]


def test_an_unknown_name_is_one_line_with_a_hint_and_exit_1(db: Path):
    done = ctl("callers", "set_cooky", "--db", str(db))
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "error: no definition or reference named 'set_cooky'; did you mean set_cookie?"
    ]


def test_an_ambiguous_name_lists_the_candidates_and_exits_2(db: Path):
    done = ctl("refs", "sign", "--db", str(db), "--json")
    assert done.returncode == 2
    assert "web/cookie.sign, web/util.sign; pass one of them qualified" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_callers_with_depth_and_callees_json(db: Path):
    done = ctl("callers", "cookie.sign", "--depth", "2", "--db", str(db))
    assert done.returncode == 0, done.stderr
    assert "web/cookie.set_cookie" in done.stdout
    assert "  web/handler.respond  ← web/cookie.set_cookie" in done.stdout
    assert "    src/web/handler.gleam:9:3  pipe" in done.stdout
    data = json.loads(ctl("callees", "respond", "--db", str(db), "--json").stdout)
    assert [(c["name"], c["internal"]) for c in data["callees"]] == [
        ("set_cookie", True),
        ("handle", True),
    ]


def test_a_bad_depth_is_bad_usage(db: Path):
    done = ctl("callers", "set_cookie", "--depth", "0", "--db", str(db))
    assert done.returncode == 2


def test_graph_prints_dot_or_mermaid(db: Path):
    dot = ctl("graph", "--db", str(db))
    assert dot.returncode == 0, dot.stderr
    assert '"web/handler" -> "web/cookie";' in dot.stdout
    mermaid = ctl("graph", "set_cookie", "--format", "mermaid", "--db", str(db))
    assert mermaid.returncode == 0, mermaid.stderr
    assert mermaid.stdout.startswith("flowchart LR")
    assert '["web/handler.respond"]' in mermaid.stdout
    module = json.loads(ctl("graph", "cookie", "--db", str(db), "--json").stdout)
    assert module["kind"] == "imports" and module["focus"] == "web/cookie"
    bad = ctl("graph", "--format", "svg", "--db", str(db))
    assert bad.returncode == 2 and "use one of dot, mermaid" in bad.stderr


def test_an_index_from_before_the_graph_says_to_index_again(db: Path):
    import duckdb

    con = duckdb.connect(str(db))
    con.execute("DELETE FROM meta WHERE key = 'graph_version'")
    con.close()
    done = ctl("refs", "set_cookie", "--db", str(db))
    assert done.returncode == 1
    assert "built before the code graph existed; run `gleambrctl index` again" in done.stderr
