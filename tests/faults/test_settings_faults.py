"""`gleambrctl settings` with values an adversary types (issue 32, item 9).

Before: `settings ignore $'gen/\\nx'` wrote a raw newline into a TOML string, after which
every command exited 2 on the unreadable file, `settings ignore --unset` included.
"""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

from tests.daemon.conftest import CTL, clean_env


def settings(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CTL, "settings", *args],
        cwd=root,
        env=clean_env(root.parent / "home", COLUMNS="1000"),
        capture_output=True,
        text=True,
        timeout=120,
    )


def package(tmp_path: Path) -> Path:
    root = tmp_path / "pkg"
    (root / "src").mkdir(parents=True)
    (root / "gleam.toml").write_text('name = "pkg"\nversion = "1.0.0"\n')
    return root


def test_a_value_with_a_newline_is_refused_and_the_file_stays_readable(tmp_path: Path) -> None:
    root = package(tmp_path)
    assert settings(root, "k", "5").returncode == 0
    for value in ("gen/\nx = 1", "a\x1b]0;title\x07"):
        bad = settings(root, "ignore", value)
        assert bad.returncode == 2
        assert bad.stderr.strip().splitlines() == [
            "error: ignore cannot hold a newline or another control character"
        ]
    shown = settings(root, "--json")
    assert shown.returncode == 0, shown.stderr
    file = root / ".gbr" / "settings.toml"
    assert tomllib.loads(file.read_text()) == {"k": 5}


def test_unset_repairs_a_damaged_settings_file(tmp_path: Path) -> None:
    root = package(tmp_path)
    file = root / ".gbr" / "settings.toml"
    file.parent.mkdir()
    # What the old `settings ignore $'gen/\nx'` wrote: a string broken over two lines.
    file.write_text('# gbr settings\nk = 5\nignore = ["gen/\nx"]\n')
    assert settings(root).returncode == 2  # every other command still says it is broken
    repaired = settings(root, "ignore", "--unset")
    assert repaired.returncode == 0, repaired.stderr
    assert "left out 2 unreadable line(s)" in repaired.stderr
    assert tomllib.loads(file.read_text()) == {"k": 5}  # the readable setting is kept
    assert settings(root).returncode == 0
