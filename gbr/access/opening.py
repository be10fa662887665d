"""Where a front door's index comes from, decided here once for every command: the package's
root and index file, its configuration (flags, settings file, environment), its events
file, the embedding model, and the daemon-or-this-process choice.

A command parses its flags, opens what it needs here, makes its request to the `CodeIndex`
and renders the result; it never reaches past this module into `gbr.core` to set the
index up. Heavy imports (onnxruntime, duckdb) happen inside the functions, so `--help`
stays instant.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gbr.access.base import CodeIndex
    from gbr.access.choose import StaleNote
    from gbr.access.config import PackageConfig
    from gbr.access.local import LocalIndex, LocalSettings
    from gbr.core.embed.embedder import OnnxEmbedder

Warn = Callable[[str], None]


def load_model(
    model_dir: Path | None, env: Mapping[str, str], device: str = "cpu", prepack: bool = True
) -> OnnxEmbedder:
    """The embedder, its optimised graph kept between runs (a cold `search` then skips
    optimising it: gbr.core.embed.onnx_graphs); `prepack=False` when the process embeds only a
    query or two (gbr.core.embed.embedder.onnx_session)."""
    from gbr.core.embed.embedder import OnnxEmbedder
    from gbr.core.embed.model_files import resolve_model_files
    from gbr.core.embed.onnx_graphs import kept_folder

    return OnnxEmbedder(
        resolve_model_files(model_dir, env=env),
        device=device,
        graphs=kept_folder(env),
        prepack=prepack,
    )


def open_local(
    settings: LocalSettings,
    env: Mapping[str, str],
    model_dir: Path | None = None,
    device: str = "cpu",
    prepack: bool = True,
) -> LocalIndex:
    """The index in this process, its model loaded on first use; `gbr.access.chosen` then
    hands a command the daemon serving the index instead, when one runs."""
    from gbr.access.local import LocalIndex
    from gbr.core import telemetry

    if settings.db is not None and settings.db.is_file() and not telemetry.has_events_file():
        # Its events go beside the index, and its warnings to stderr: never to stdout,
        # which carries `--json`. A folder that takes no events file costs nothing here.
        events = telemetry.events_beside(settings.db)
        telemetry.configure(events, echo=True, human=True, warn=_silent, least="warning")
    return LocalIndex(settings, lambda: load_model(model_dir, env, device, prepack), env=env)


def _silent(message: str) -> None:
    """A search in a read-only checkout must not warn each time that events are not kept."""


def start_events(db: Path, warn: Warn, echo: bool = False, human: bool = False) -> None:
    """Events beside the index when that is a plain file in a writable folder; when the
    folder or file cannot take them, one warning, and the command goes on without them."""
    from gbr.core import telemetry

    telemetry.configure(telemetry.events_beside(db), echo=echo, human=human, warn=warn)


@dataclass(frozen=True)
class SetAside:
    """A damaged index file moved aside before a run (`detail` says how), kept for a look
    (`status` lists it) while the run rebuilds the index from the source tree."""

    path: Path
    kept_as: str
    detail: str


@dataclass(frozen=True)
class Package:
    """One package opened for a command: where it is, its index file and configuration."""

    root: Path
    db: Path
    config: PackageConfig

    def too_wide(self) -> str | None:
        """Why the root is too wide to index without asking (`/`, home, a folder with no
        Gleam package in sight), or None."""
        from gbr.core.paths import wide_folder

        return wide_folder(self.root, self.config.env)

    def prepare(self, warn: Warn, echo: bool = False) -> None:
        """Make the index's folder and start its events file, before anything is written."""
        from gbr.core.store.facade import prepare_folder

        prepare_folder(self.db)
        start_events(self.db, warn, echo=echo)

    def remember_include_deps(self, given: bool | None) -> Path | None:
        """`--include-deps` or `--no-include-deps` sticks, so a later plain `index` keeps
        it: the settings file it was saved in, or None when nothing changed."""
        from gbr.core.settings import save_settings, settings_path

        settings = self.config.settings
        if given is None or settings.include_deps == given:
            return None
        save_settings(self.db.parent, replace(settings, include_deps=given))
        return settings_path(self.db.parent)

    def set_aside_if_damaged(self) -> SetAside | None:
        """Before a run in this process: a damaged index file is moved aside, so the run
        rebuilds it from the source tree (a `--rebuild` of a sound one builds beside it)."""
        from gbr.core.store.facade import check_index, set_aside

        if not self.db.exists():
            return None
        bad = check_index(self.db)
        if bad is None:
            return None
        aside = set_aside(self.db)
        return SetAside(aside, aside.name, bad.detail)

    def local(
        self,
        model_dir: Path | None = None,
        *,
        follow_outside_links: bool = False,
        keep_open: bool = False,
        serving: bool = False,
        cancel_on_ctrl_c: bool = False,
        queries_only: bool = False,
    ) -> LocalIndex:
        """The index in this process, configured as the package says; a front door that
        picks per call between it and a daemon (MCP, chat) takes this.

        `queries_only`: the process embeds a query or a few and never indexes, so the model
        runs on the CPU with its weights as they are (repacking them for a device pays only
        over a run: gbr.core.embed.embedder.onnx_session)."""
        settings = self.config.local_settings(
            follow_outside_links=follow_outside_links,
            keep_open=keep_open,
            serving=serving,
            cancel_on_ctrl_c=cancel_on_ctrl_c,
        )
        if queries_only:
            return open_local(settings, self.config.env, model_dir, "cpu", prepack=serving)
        return open_local(settings, self.config.env, model_dir, self.config.device)

    @contextlib.contextmanager
    def index(
        self,
        model_dir: Path | None = None,
        *,
        on_stale: StaleNote | None = None,
        follow_outside_links: bool = False,
        keep_open: bool = False,
        serving: bool = False,
        queries_only: bool = False,
    ) -> Iterator[tuple[CodeIndex, LocalIndex]]:
        """The daemon serving the index, else this process (and the local index either
        way, for what only it can do), for the length of one command; the local index is
        closed after it."""
        from gbr.access.choose import chosen

        local = self.local(
            model_dir,
            follow_outside_links=follow_outside_links,
            keep_open=keep_open,
            serving=serving,
            queries_only=queries_only,
        )
        try:
            with chosen(local, on_stale) as index:
                yield index, local
        finally:
            local.close()


def find_package(db: Path | None, env: Mapping[str, str], cwd: Path) -> Package:
    """The package whose index is `db`, else the nearest `.gbr/index.duckdb` upwards from
    `cwd` (with ceilings: gbr.core.paths.find_index), configured from its settings file
    and `env`."""
    from gbr.access.config import package_config
    from gbr.core.paths import find_index

    db_path = db if db is not None else find_index(cwd, env)
    root = db_path.parent.parent
    return Package(root, db_path, package_config(root, db_path, env))


def index_file_here(env: Mapping[str, str], cwd: Path) -> Path:
    """The index found from `cwd` upward, else the one the package at `cwd` would get: the
    folder whose settings file `gleambrctl settings` reads and writes, index or not."""
    from gbr.core.errors import ConfigError
    from gbr.core.paths import default_db, find_index, package_root

    try:
        return find_index(cwd, env)
    except ConfigError:
        return default_db(package_root(cwd))


def index_file_for(path: Path | None, db: Path | None, env: Mapping[str, str], cwd: Path) -> Path:
    """The index a command names without opening it (`open` looks for its daemon): `db`,
    else the package at `path`'s own, else the one found from `cwd` upward (or the one the
    package at `cwd` would get)."""
    from gbr.core.paths import default_db, package_root

    if db is not None:
        return db.expanduser().resolve()
    if path is not None:
        return default_db(package_root(path))
    return index_file_here(env, cwd)


def open_package(
    path: Path,
    db: Path | None,
    env: Mapping[str, str],
    *,
    include_deps: bool | None = None,
    max_file_size: str | None = None,
    embed_cache: bool | None = None,
    device: str | None = None,
) -> Package:
    """The package at `path` (its index `db`, else its own), configured from the flags
    given (None: not given), its settings file and `env`. Bad usage (a folder that is not
    one, a bad size or device) is a ConfigError raised here, before any work starts."""
    from gbr.access.config import package_config
    from gbr.core.paths import default_db, package_root

    root = package_root(path)
    db_path = db or default_db(root)
    config = package_config(
        root,
        db_path,
        env,
        include_deps=include_deps,
        max_file_size=max_file_size,
        embed_cache=embed_cache,
        device=device,
    )
    return Package(root, db_path, config)
