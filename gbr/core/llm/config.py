"""The optional config file: one TOML table of settings per provider.

    # $GBR_HOME/config.toml, else ~/.config/gbr/config.toml
    [groq]
    api_key = "gsk_..."
    model = "llama-3.1-8b-instant"

Environment variables win over the file, so a one-off `GROQ_API_KEY=... gleambrctl ask` works
without editing it. Errors name the file and the key, never a value, since values may be secrets.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gbr.core.environ import gbr_home
from gbr.core.errors import ConfigError

_TYPES: dict[str, tuple[type, ...]] = {
    "api_key": (str,),
    "base_url": (str,),
    "model": (str,),
    "timeout": (int, float),
    "deadline": (int, float),
    "max_retries": (int,),
}


def config_path(env: Mapping[str, str]) -> Path | None:
    """`$GBR_HOME/config.toml`, else `$XDG_CONFIG_HOME/gbr/config.toml`, else
    `$HOME/.config/gbr/config.toml`, all looked up in `env` only; None when `env` names no
    home at all, so a caller that passes a bare mapping never reads the user's real file."""
    home = gbr_home(env, "config")
    return None if home is None else home / "config.toml"


def read_config(env: Mapping[str, str]) -> dict[str, Any]:
    """The config file parsed, {} when there is none: read once per provider lookup."""
    path = config_path(env)
    if path is None:
        return {}
    try:
        text = path.read_text("utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {path} ({exc}); fix or remove the file") from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}); fix the file") from exc


def provider_table(
    env: Mapping[str, str], name: str, config: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The `[name]` table of the config file (or of `config`, the file already read),
    checked; empty when the file or table is absent."""
    path = config_path(env)
    data = read_config(env) if config is None else config
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise ConfigError(f"`{name}` in {path} must be a table; write it as [{name}]")
    for key, value in table.items():
        types = _TYPES.get(key)
        if types is None:
            known = ", ".join(_TYPES)
            raise ConfigError(f"unknown key `{key}` under [{name}] in {path}; use one of: {known}")
        # bool is an int in Python, but `timeout = true` is surely a mistake.
        if not isinstance(value, types) or isinstance(value, bool):
            kind = "a string" if types == (str,) else "a number"
            raise ConfigError(f"`{key}` under [{name}] in {path} must be {kind}")
    return table
