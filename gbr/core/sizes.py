"""Sizes as people write them (500k, 2MB, 1000000), for --max-file-size and its setting."""

from __future__ import annotations

# The largest source file read by default (--max-file-size). Here, where a search can read
# it without importing the walker.
DEFAULT_MAX_BYTES = 1_000_000

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
        raise NotPositiveError("a positive size like 500k, 2MB or 1000000")
    return int(value)


class NotPositiveError(ValueError):
    """A size that reads as a number but is zero or less."""


def option_size(text: str, option: str) -> int:
    """Bytes in `text`, given as `option` (a flag or a setting); a ConfigError that names it
    and the fix otherwise."""
    from gbr.core.errors import ConfigError

    try:
        return parse_size(text)
    except NotPositiveError:
        raise ConfigError(f"{option} must be positive") from None
    except ValueError:
        raise ConfigError(
            f"cannot read size {text!r}; write it like 500k, 2MB or 1000000"
        ) from None
