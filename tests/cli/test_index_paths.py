"""Without --db, commands find the index only where it belongs; `index` asks before it walks
a folder that holds no Gleam package (`index` in a subprocess, as a user would run it;
`status` and `search` through typer's runner in this process)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from gbr.core.paths import CEILING_ENV
from tests.conftest import CTL, Indexed, copy_small, invoke


def run(*args: str, cwd: Path, **env: str) -> subprocess.CompletedProcess:
    if args[0] != "index":  # `index` takes over SIGINT and SIGTERM for its whole process
        return invoke(*args, cwd=cwd, env=dict(env))
    full = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", **env}
    return subprocess.run(
        [CTL, *args], cwd=cwd, capture_output=True, text=True, env=full, timeout=300
    )


def one_line(text: str) -> str:
    """The message as printed, whatever width the console wrapped it at."""
    return " ".join(text.split())


def test_an_index_above_the_ceiling_is_not_found(
    tmp_path: Path, indexed_small_template: Indexed
) -> None:
    outer = indexed_small_template.copy(tmp_path / "outer")
    start = outer / "notes" / "empty"
    start.mkdir(parents=True)
    below = run("status", cwd=start)  # the conftest ceiling is above tmp_path: found
    assert below.returncode == 0, below.stderr
    blocked = run("status", cwd=start, **{CEILING_ENV: str(outer)})
    assert blocked.returncode == 2
    assert one_line(blocked.stderr) == (
        f"error: no index found from here up to {outer / 'notes'}; "
        "run `gleambrctl index PATH` or pass --db FILE"
    )
    assert blocked.stdout == ""


def test_search_stops_at_the_package_root(tmp_path: Path) -> None:
    """An index of the folder above a package is not the package's own."""
    pkg = copy_small(tmp_path / "pkg")
    assert run("index", str(tmp_path), cwd=tmp_path).returncode == 0  # pkg is within reach
    assert (tmp_path / ".gbr" / "index.duckdb").is_file()
    result = run("search", "isbn", cwd=pkg / "src")
    assert result.returncode == 2
    assert f"from here up to {pkg};" in one_line(result.stderr)
    own = run("index", str(pkg), cwd=tmp_path)
    assert own.returncode == 0, own.stderr
    assert run("search", "isbn", "--json", cwd=pkg / "src").returncode == 0


def test_index_refuses_a_folder_with_no_package_unless_told(tmp_path: Path) -> None:
    home = tmp_path / "home"
    copy_small(home / "code" / "a" / "b" / "c" / "d")  # deeper than the look-around goes
    for folder, why in [
        (home, f"{home} is your home folder"),
        (home / "code", f"{home / 'code'} holds no gleam.toml within 3 levels"),
    ]:
        refused = run("index", str(folder), cwd=tmp_path, HOME=str(home))
        assert refused.returncode == 2, refused.stdout
        assert one_line(refused.stderr) == (
            f"error: {why}; pass the path of a Gleam package, or --yes to index it anyway"
        )
        assert not (folder / ".gbr").exists()
    forced = run("index", "~", "--yes", "--json", cwd=tmp_path, HOME=str(home))
    assert forced.returncode == 0, forced.stderr
    assert (home / ".gbr" / "index.duckdb").is_file()
    assert '"files_indexed": 5' in forced.stdout


def test_index_asks_on_a_terminal_before_a_folder_with_no_package(tmp_path: Path) -> None:
    import pexpect

    folder = tmp_path / "notes"
    (folder / "a").mkdir(parents=True)
    env = {**os.environ, "TERM": "xterm", "NO_COLOR": "1"}
    child = pexpect.spawn(
        CTL, ["index", str(folder)], env=env, encoding="utf-8", timeout=60, dimensions=(40, 200)
    )
    child.expect_exact(f"{folder} holds no gleam.toml within 3 levels; index everything under it?")
    child.sendline("n")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 1
    assert not (folder / ".gbr").exists()

    child = pexpect.spawn(
        CTL, ["index", str(folder)], env=env, encoding="utf-8", timeout=120, dimensions=(40, 200)
    )
    child.expect_exact("index everything under it?")
    child.sendline("y")
    child.expect_exact("files seen: 0 indexed")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert (folder / ".gbr" / "index.duckdb").is_file()
