"""Typer's coercion of option values, without pydantic where a value needs none.

typer 0.29 checks every parameter's value through a pydantic TypeAdapter, built for each
parameter of the command being run, value given or not: importing pydantic and building
13 adapters was 65-70 ms of a cold `search` (2 cores), to turn strings into the same
strings. Here a parameter gets a coercion that answers the plain cases itself, exactly as
typer's adapter would, and builds typer's own coercion (pydantic and all) only for a value
it does not answer: a number given on the command line, a custom parser, a file.

The plain cases, each what typer's adapter returns for it:
- no value: typer returns None (or () for a list) before coercing;
- `str`: a string is returned as it is (typer's adapter calls `str()` on it);
- `list[str]`: a list or tuple of strings becomes a list of them;
- `Path` with no `path_type`: `Path(value)`, then typer's own path checks
  (`coerce_cli_path`, the same call its adapter makes after pydantic's `Path(value)`).

This reaches into typer's private modules, so it is pinned with typer (pyproject.toml) and
tests/cli/test_coercion.py checks that it is in place and that errors read as typer's;
if the names it needs are missing, typer is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

try:
    from typer import core as _typer_core
    from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
    from typer._param_types import coerce_cli_path
except ImportError:  # another typer: its own coercion, unchanged
    _typer_core = None  # type: ignore[assignment]


if _typer_core is not None:

    @dataclass(frozen=True)
    class PlainFirst(RuntimeParam):
        """The plain cases answered here; anything else by typer's coercion, built then."""

        descriptor: TypeDescriptor

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            info, annotation = self.parameter_info, self.annotation
            plain = info.parser is None and self.descriptor.file_annotation is None
            if plain and annotation is str and isinstance(value, str):
                return value
            if (
                plain
                and annotation == list[str]
                and isinstance(value, list | tuple)
                and all(isinstance(item, str) for item in value)
            ):
                return list(value)
            if (
                plain
                and annotation is Path
                and info.path_type is None
                and isinstance(value, str | Path)
            ):
                return coerce_cli_path(Path(value), info, path_type=Path, param=param, ctx=ctx)
            return build_runtime_param(self.descriptor)._coerce_value(value, param, ctx)

    def _runtime_param(self: Any) -> RuntimeParam:
        if self._runtime_param is None:
            d = self.type_descriptor
            self._runtime_param = PlainFirst(d.parameter_info, d.annotation, d)
        return self._runtime_param  # type: ignore[no-any-return]


def install() -> bool:
    """Give typer's parameters the plain-first coercion; False when this typer lacks the
    names it needs (then its own coercion runs, slower and the same)."""
    if _typer_core is None or not hasattr(_typer_core._TyperParameter, "get_runtime_param"):
        return False
    _typer_core._TyperParameter.get_runtime_param = _runtime_param  # type: ignore[method-assign]
    return True
