"""`gleambrctl settings`: show or change a package's .gbr/settings.toml."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from gbr.commands.common import errors, out, warn
from gbr.commands.options import (
    DbOption,
    DebugOption,
    JsonOption,
)

if TYPE_CHECKING:
    pass


def settings_command(
    key: Annotated[
        str | None,
        typer.Argument(
            help="include_deps, max_file_size, ignore, k, mode, tests, embed_cache or device."
        ),
    ] = None,
    value: Annotated[
        str | None,
        typer.Argument(help="The new value; for ignore, comma-separated .gitignore patterns."),
    ] = None,
    unset: Annotated[
        bool, typer.Option("--unset", help="Forget KEY; the built-in default applies again.")
    ] = False,
    db: DbOption = None,
    json_out: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Show or change this package's settings (.gbr/settings.toml beside the index).

    A flag given on the command line wins over a setting for that run. Settings apply to
    `index`, `serve` and `mcp` (include_deps, max_file_size, ignore), to `index` and `serve`
    (embed_cache, device) and to `search` (k, mode, tests). `gleambrctl settings k 5`;
    `gleambrctl settings ignore --unset`.
    """
    with errors(debug):
        from gbr.core.errors import ConfigError
        from gbr.core.settings import (
            KEYS,
            load_leniently,
            load_settings,
            save_settings,
            with_value,
        )

        db_path = db or _settings_db()
        folder = db_path.parent
        if unset and key is not None and value is None:
            settings, unreadable = load_leniently(folder)  # --unset repairs a damaged file
            if unreadable:
                warn(f"left out {unreadable} unreadable line(s) of {folder / 'settings.toml'}")
        else:
            settings = load_settings(folder)
        if key is not None and key not in KEYS:
            raise ConfigError(f"unknown setting {key!r}; use one of {', '.join(KEYS)}")
        if unset and (key is None or value is not None):
            raise ConfigError("--unset takes a KEY and no value: `gleambrctl settings k --unset`")
        if key is not None and (value is not None or unset):
            settings = with_value(settings, key, None if unset else value)
            save_settings(folder, settings)
        shown = settings.as_dict()
        if json_out:
            data = {"file": str(folder / "settings.toml"), "settings": shown}
            sys.stdout.write(json.dumps(data, indent=2) + "\n")
            return
        for name in [key] if key is not None else KEYS:
            current = shown.get(name)
            text = "(not set)" if current is None else json.dumps(current)
            out.print(f"{name:<14} {escape(text)}")


def _settings_db() -> Path:
    """The index found from here upward, else the one this folder's package would get."""
    import os

    from gbr.access.opening import index_file_here

    return index_file_here(os.environ, Path.cwd())
