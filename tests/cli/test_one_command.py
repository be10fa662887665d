"""`gleambrctl CMD ...` builds only CMD's click command; what the user sees is the same as
from the app with every command in it."""

from __future__ import annotations

import pytest
import typer.main

from gbr.cli import app

COMMANDS = [
    "index", "search", "ask", "chat", "status", "settings",
    "serve", "mcp", "refs", "callers", "callees", "graph",
]  # fmt: skip


def _run(capsys: pytest.CaptureFixture[str], call: object, args: list[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        if call is app:
            app(args, prog_name="gleambrctl")
        else:
            typer.main.get_command(app).main(args, prog_name="gleambrctl")
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out + out.err


@pytest.mark.parametrize(
    "args",
    [
        *([name, "-h"] for name in COMMANDS),
        ["search", "x", "-k", "0"],
        ["search", "x", "--nope"],
        ["graph"],
        ["serch", "x"],
        ["-h"],
        [],
    ],
    ids=" ".join,
)
def test_a_command_says_what_the_whole_app_would(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "100")
    assert _run(capsys, app, args) == _run(capsys, None, args)


def test_only_a_named_command_is_built_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("_GLEAMBRCTL_COMPLETE", raising=False)
    named = app._named(["search", "parse an isbn"])
    assert named is not None and named.callback.__name__ == "search"
    assert app._named(["settings"]).name == "settings"
    for args in (["--version"], ["-h", "search"], ["nope"], []):
        assert app._named(args) is None
    monkeypatch.setenv("_GLEAMBRCTL_COMPLETE", "bash_complete")  # the shell lists them all
    assert app._named(["search"]) is None
