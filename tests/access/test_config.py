"""One package's configuration, resolved once: flag, else settings.toml, else environment,
else default. serve, mcp and chat build theirs here too, so a package's `embed_cache =
false` or `device` reaches them exactly as it reaches `index`."""

from __future__ import annotations

from pathlib import Path

import pytest

from gbr.access import PackageConfig, package_config
from gbr.core.errors import ConfigError
from gbr.core.settings import Settings, save_settings
from gbr.core.sizes import DEFAULT_MAX_BYTES


def configured(tmp_path: Path, settings: Settings | None = None, **flags: object) -> PackageConfig:
    db = tmp_path / "pkg" / ".gbr" / "index.duckdb"
    db.parent.mkdir(parents=True)
    if settings is not None:
        save_settings(db.parent, settings)
    env = flags.pop("env", {"GBR_HOME": str(tmp_path / "home")})
    return package_config(tmp_path / "pkg", db, env, **flags)  # type: ignore[arg-type]


def test_defaults_with_no_settings_file(tmp_path: Path) -> None:
    config = configured(tmp_path)
    assert (config.include_deps, config.max_bytes, config.ignore) == (False, DEFAULT_MAX_BYTES, ())
    assert config.device == "auto"
    assert config.embed_cache is not None
    assert config.embed_cache.path == tmp_path / "home" / "embed-cache.sqlite"


def test_the_package_settings_apply_when_no_flag_is_given(tmp_path: Path) -> None:
    settings = Settings(
        include_deps=True, max_file_size="2k", ignore=("gen/",), embed_cache=False, device="cpu"
    )
    config = configured(tmp_path, settings)
    assert (config.include_deps, config.max_bytes, config.ignore) == (True, 2000, ("gen/",))
    assert config.embed_cache is None  # embed_cache = false in the package
    assert config.device == "cpu"
    local = config.local_settings(keep_open=True)
    assert (local.include_deps, local.max_bytes, local.ignore) == (True, 2000, ("gen/",))
    assert local.embed_cache is None and local.keep_open and local.db == config.db


def test_flags_win_over_settings_and_environment(tmp_path: Path) -> None:
    settings = Settings(include_deps=True, max_file_size="2k", embed_cache=False, device="cpu")
    env = {"GBR_HOME": str(tmp_path / "home"), "GBR_DEVICE": "cuda"}
    config = configured(
        tmp_path,
        settings,
        env=env,
        include_deps=False,
        max_file_size="3k",
        embed_cache=True,
        device="auto",
    )
    assert (config.include_deps, config.max_bytes, config.device) == (False, 3000, "auto")
    assert config.embed_cache is not None


def test_the_environment_comes_before_the_default_but_after_the_settings(tmp_path: Path) -> None:
    env = {"GBR_HOME": str(tmp_path / "home"), "GBR_DEVICE": "cpu", "GBR_EMBED_CACHE": "off"}
    config = configured(tmp_path, env=env)
    assert config.device == "cpu" and config.embed_cache is None
    assert config.env is env


def test_a_bare_environment_names_no_home_so_no_shared_cache(tmp_path: Path) -> None:
    assert configured(tmp_path, env={}).embed_cache is None


@pytest.mark.parametrize(
    ("flags", "words"),
    [
        ({"max_file_size": "lots"}, "cannot read size 'lots'"),
        ({"max_file_size": "0"}, "--max-file-size must be positive"),
        ({"device": "tpu"}, "--device must be auto, cpu or cuda"),
    ],
)
def test_bad_values_are_one_line_config_errors(
    tmp_path: Path, flags: dict[str, str], words: str
) -> None:
    with pytest.raises(ConfigError, match=words):
        configured(tmp_path, **flags)
