"""Per-package settings that stick: `.gbr/settings.toml` beside the index.

A flag given on the command line wins for that run; without one, the package's setting
applies; without that, the built-in default. `index --include-deps` (or `--no-include-deps`)
is remembered here, so a later plain `index` does not drop the dependencies it indexed.
The file is small TOML a person can edit; `gleambrctl settings` shows and changes it.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from gbr.core.environ import is_off
from gbr.core.errors import ConfigError
from gbr.core.records import MODES, TEST_POLICIES

# Where `index` and `serve` may embed; embed.device picks among them.
DEVICES = ("auto", "cpu", "cuda")

SETTINGS_FILE = "settings.toml"


@dataclass(frozen=True, slots=True)
class Settings:
    """What a package remembers; None means "not set here", so the built-in default applies."""

    include_deps: bool | None = None
    max_file_size: str | None = None
    ignore: tuple[str, ...] = ()
    k: int | None = None
    mode: str | None = None
    tests: str | None = None
    embed_cache: bool | None = None  # off: vectors are not shared with other indexes
    device: str | None = None  # auto, cpu or cuda: where `index` and `serve` embed

    def as_dict(self) -> dict[str, Any]:
        """Only what is set, in field order (the file's and `status`'s form)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None and value != ():
                out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


def _bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "on", "1"):
        return True
    if is_off(lowered):
        return False
    raise ValueError("true or false")


def _choice(options: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in options:
            raise ValueError(" or ".join(options))
        return text

    return parse


def _k(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= 200:
        raise ValueError("a whole number from 1 to 200")
    return value


def _size(text: str) -> str:
    from gbr.core.sizes import parse_size

    parse_size(text)  # raises ValueError with the expected form
    return text


# How each key is read from text (the CLI) and what it must hold (the file).
_PARSERS: dict[str, Callable[[str], Any]] = {
    "include_deps": _bool,
    "max_file_size": _size,
    "k": _k,
    "mode": _choice(MODES),
    "tests": _choice(TEST_POLICIES),
    "embed_cache": _bool,
    "device": _choice(DEVICES),
}
KEYS = (*_PARSERS, "ignore")


def settings_path(index_dir: Path) -> Path:
    return index_dir / SETTINGS_FILE


def load_settings(index_dir: Path) -> Settings:
    """The package's settings; a missing file is no settings, a broken one is an error."""
    path = settings_path(index_dir)
    try:
        raw = tomllib.loads(path.read_text("utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return Settings()  # none yet, or no folder there at all (the caller says why if it must)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {path}: {exc}; fix or delete the file") from exc
    return _from_mapping(raw, str(path))


def _from_mapping(raw: Mapping[str, Any], where: str) -> Settings:
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in KEYS:
            raise ConfigError(f"{where}: unknown setting {key!r}; known: {', '.join(KEYS)}")
        if key == "ignore":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ConfigError(f'{where}: ignore must be a list of patterns, like ["gen/"]')
            values[key] = tuple(value)
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        try:
            values[key] = _PARSERS[key](text)
        except ValueError as exc:
            raise ConfigError(f"{where}: {key} must be {exc}, not {value!r}") from exc
    return Settings(**values)


def with_value(settings: Settings, key: str, text: str | None) -> Settings:
    """`settings` with `key` set from its text form, or unset when `text` is None."""
    if key not in KEYS:
        raise ConfigError(f"unknown setting {key!r}; known: {', '.join(KEYS)}")
    if text is None:
        unset: dict[str, Any] = {key: () if key == "ignore" else None}
        return replace(settings, **unset)
    if _CONTROL.search(text):
        # A newline would split a pattern (or a line of the file) in two; none is meant.
        raise ConfigError(f"{key} cannot hold a newline or another control character")
    if key == "ignore":
        patterns = tuple(p.strip() for p in text.split(",") if p.strip())
        return replace(settings, ignore=patterns)
    try:
        return replace(settings, **{key: _PARSERS[key](text)})
    except ValueError as exc:
        raise ConfigError(f"{key} must be {exc}, not {text!r}") from exc


def render_toml(settings: Settings) -> str:
    lines = ["# gbr settings for this package; `gleambrctl settings` shows and changes them."]
    for key, value in settings.as_dict().items():
        if isinstance(value, bool):
            lines.append(f"{key} = {'true' if value else 'false'}")
        elif isinstance(value, int):
            lines.append(f"{key} = {value}")
        elif isinstance(value, list):
            lines.append(f"{key} = [{', '.join(_quote(v) for v in value)}]")
        else:
            lines.append(f"{key} = {_quote(value)}")
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, but for DEL, which TOML wants escaped
    too. Whatever a value holds, the file stays readable."""
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def load_leniently(index_dir: Path) -> tuple[Settings, int]:
    """The settings a damaged file still holds, line by line, and how many lines were not
    readable: what `settings KEY --unset` starts from, so that it repairs the file rather
    than failing on it like every other command."""
    try:
        return load_settings(index_dir), 0
    except ConfigError:
        pass
    raw: dict[str, Any] = {}
    bad = 0
    text = settings_path(index_dir).read_bytes().decode("utf-8", "replace")
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            one = tomllib.loads(line)
            _from_mapping(one, "")
        except (tomllib.TOMLDecodeError, ConfigError):
            bad += 1
            continue
        raw.update(one)
    return _from_mapping(raw, str(settings_path(index_dir))), bad


def save_settings(index_dir: Path, settings: Settings) -> Path:
    """Write atomically (a crash leaves the old file or the new one), or remove when empty."""
    path = settings_path(index_dir)
    if not settings.as_dict():
        path.unlink(missing_ok=True)
        return path
    try:
        index_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".settings-", dir=index_dir)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(render_toml(settings))
        os.replace(tmp, path)
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}; check the folder") from exc
    return path
