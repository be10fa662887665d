"""One package's configuration, read once per command at the edge.

A value comes from the command's flag, else the package's `.gbr/settings.toml`, else the
environment, else the default. The settings file is read once here, and the environment
is passed in, so everything below (the pipeline, the daemon, the MCP and chat sessions)
gets the same answers and reads neither itself: `serve`, `mcp` and `chat` honour a
package's `embed_cache = false` or `device` exactly as `index` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from gbr.access.local import LocalSettings
from gbr.core.embed.cache_config import CacheConfig, cache_config
from gbr.core.embed.device import DEVICE_ENV, check_device
from gbr.core.errors import ConfigError
from gbr.core.settings import Settings, load_settings
from gbr.core.sizes import option_size
from gbr.core.store import test_words
from gbr.core.store.test_words import TestWords

DEFAULT_MAX_FILE_SIZE = "1MB"


@dataclass(frozen=True)
class PackageConfig:
    """What every front door needs to know about one index, resolved."""

    root: Path
    db: Path
    settings: Settings
    env: Mapping[str, str] = field(repr=False)
    include_deps: bool
    max_bytes: int
    ignore: tuple[str, ...]
    embed_cache: CacheConfig | None  # None: off
    device: str
    test_words: TestWords | None = None  # GBR_TEST_WORDS: what tests lend, None: nothing

    def local_settings(
        self,
        *,
        follow_outside_links: bool = False,
        keep_open: bool = False,
        cancel_on_ctrl_c: bool = False,
        serving: bool = False,
    ) -> LocalSettings:
        return LocalSettings(
            self.root,
            self.db,
            include_deps=self.include_deps,
            max_bytes=self.max_bytes,
            ignore=self.ignore,
            follow_outside_links=follow_outside_links,
            embed_cache=self.embed_cache,
            test_words=self.test_words,
            keep_open=keep_open,
            cancel_on_ctrl_c=cancel_on_ctrl_c,
            serving=serving,
        )


def package_config(
    root: Path,
    db: Path,
    env: Mapping[str, str],
    *,
    include_deps: bool | None = None,
    max_file_size: str | None = None,
    embed_cache: bool | None = None,
    device: str | None = None,
) -> PackageConfig:
    """The configuration of the index `db` over `root`; the flags given win (None: not given).

    A bad size or device is a ConfigError naming the flag, raised before any work starts.
    """
    settings = load_settings(db.parent)
    size = max_file_size or settings.max_file_size or DEFAULT_MAX_FILE_SIZE
    max_bytes = option_size(size, "--max-file-size")
    cache_on = embed_cache if embed_cache is not None else settings.embed_cache is not False
    chosen_device = device or env.get(DEVICE_ENV) or settings.device or "auto"
    try:
        lend = test_words.from_env(env)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return PackageConfig(
        root=root,
        db=db,
        settings=settings,
        env=env,
        include_deps=include_deps if include_deps is not None else bool(settings.include_deps),
        max_bytes=max_bytes,
        ignore=settings.ignore,
        embed_cache=cache_config(env) if cache_on else None,
        device=check_device(chosen_device),
        test_words=lend,
    )
