"""Sizes as people write them (500k, 2MB, 1000000), for --max-file-size and its setting."""

from __future__ import annotations

_UNITS = {"k": 1_000, "kb": 1_000, "m": 1_000_000, "mb": 1_000_000, "b": 1, "": 1}


def parse_size(text: str) -> int:
    """Bytes in `text`; ValueError (saying the expected form) when it is not a size."""
    raw = text.strip().lower()
    number = raw.rstrip("kmb")
    unit = raw[len(number) :]
    try:
        value = float(number) * _UNITS[unit]
    except (ValueError, KeyError):
        raise ValueError("a size like 500k, 2MB or 1000000") from None
    if value <= 0:
        raise ValueError("a positive size like 500k, 2MB or 1000000")
    return int(value)


def option_size(text: str, option: str) -> int:
    """Bytes in `text`, given as `option` (a flag or a setting); a ConfigError that names it
    and the fix otherwise."""
    from gbr.core.errors import ConfigError

    try:
        return parse_size(text)
    except ValueError:
        pass
    if text.strip() and _looks_numeric(text):
        raise ConfigError(f"{option} must be positive")
    raise ConfigError(f"cannot read size {text!r}; write it like 500k, 2MB or 1000000")


def _looks_numeric(text: str) -> bool:
    raw = text.strip().lower()
    number = raw.rstrip("kmb")
    try:
        float(number)
    except ValueError:
        return False
    return raw[len(number) :] in _UNITS
