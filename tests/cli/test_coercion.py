"""Option values coerced without pydantic where they need none, and exactly as typer's own
coercion would: the same values, and the same errors for the values it hands on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer._click import Context
from typer._coercion import build_runtime_param
from typer.testing import CliRunner

from gbr.cli import app
from gbr.commands.coercion import PlainFirst


def _params() -> dict[tuple[str, str], Any]:
    """Every parameter of every command, by (command, name)."""
    root = typer.main.get_command(app)
    found = {}
    for name, command in root.commands.items():  # type: ignore[attr-defined]
        for param in command.params:
            found[(name, param.name)] = (command, param)
    return found


VALUES = [
    ("search", "query", "check that an ISBN is valid"),
    ("search", "query", ""),
    ("search", "query", "-"),
    ("search", "kind", ("function", "type")),
    ("search", "kind", ["constant"]),
    ("search", "db", "some/where/index.duckdb"),
    ("search", "db", Path("/abs/index.duckdb")),
    ("search", "db", ""),
    ("index", "path", "."),
    ("serve", "allow_host", ("localhost", "other.invalid")),
    ("search", "k", "7"),
    ("search", "k", " 12 "),
    ("ask", "timeout", "2.5"),
    ("search", "json_out", "yes"),
]


def test_the_parameters_get_the_plain_first_coercion() -> None:
    _, param = _params()[("search", "query")]
    assert isinstance(param.get_runtime_param(), PlainFirst)


@pytest.mark.parametrize(("command", "name", "value"), VALUES)
def test_a_value_comes_out_as_typers_own_coercion_makes_it(
    command: str, name: str, value: Any
) -> None:
    click_command, param = _params()[(command, name)]
    ctx = Context(click_command)
    ours = param.get_runtime_param().coerce(value, param=param, ctx=ctx)
    theirs = build_runtime_param(param.type_descriptor).coerce(value, param=param, ctx=ctx)
    assert ours == theirs
    assert type(ours) is type(theirs)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "Input should be greater than or equal to 1"),
        ("500", "Input should be less than or equal to 200"),
        ("abc", "Input should be a valid integer"),
    ],
)
def test_a_bad_number_is_refused_as_typer_refuses_it(value: str, message: str) -> None:
    result = CliRunner().invoke(app, ["search", "x", "-k", value])
    assert result.exit_code == 2
    assert "Invalid value for '-k' / '--top'" in result.output
    assert message in result.output
