"""`gbr.core` and `gbr.actors` show a short public face, loaded only when a name is used."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gbr.actors
import gbr.core


@pytest.mark.parametrize("package", [gbr.core, gbr.actors])
def test_every_public_name_resolves(package: object) -> None:
    names = package.__all__  # type: ignore[attr-defined]
    assert names and all(getattr(package, name) is not None for name in names)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        _ = gbr.core.Nope  # type: ignore[attr-defined]


def test_importing_the_errors_does_not_load_duckdb() -> None:
    """The CLI's `--help` and its error handler import gbr.core.errors; DuckDB stays unloaded."""
    code = "import sys, gbr.core.errors, gbr.actors; print('duckdb' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
