"""Where the shared vector cache lives and how big it may grow, read from the environment.

Apart from the cache itself (gbr.core.embed.cache) because every front door reads it when it
opens a package, and a cold `--mode bm25` search, which never touches the cache, must not pay
for importing SQLite and numpy to learn where the cache would be.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gbr.core.environ import EMBED_CACHE, EMBED_CACHE_SIZE
from gbr.core.errors import ConfigError
from gbr.core.paths import cache_home

CACHE_FILE = "embed-cache.sqlite"
SWITCH_ENV = EMBED_CACHE.name  # off (gbr.core.environ.OFF_WORDS) turns the cache off
SIZE_ENV = EMBED_CACHE_SIZE.name  # a size like 512MB
DEFAULT_MAX_BYTES = 512_000_000


@dataclass(frozen=True, slots=True)
class CacheConfig:
    path: Path
    max_bytes: int = DEFAULT_MAX_BYTES


def cache_config(env: Mapping[str, str]) -> CacheConfig | None:
    """The cache the environment asks for, or None when GBR_EMBED_CACHE turns it off (or
    `env` names no home to keep it in)."""
    home = cache_home(env)
    if home is None or EMBED_CACHE.off(env):
        return None
    size_text = EMBED_CACHE_SIZE.text(env)
    max_bytes = DEFAULT_MAX_BYTES
    if size_text:
        from gbr.core.sizes import parse_size

        try:
            max_bytes = parse_size(size_text)
        except ValueError as exc:
            raise ConfigError(f"{SIZE_ENV}={size_text!r}: must be {exc}") from None
    return CacheConfig(home / CACHE_FILE, max_bytes)
