"""Per-package settings: read, validated, changed and written back atomically."""

from __future__ import annotations

from pathlib import Path

import pytest

from gbr.core.errors import ConfigError
from gbr.core.settings import Settings, load_settings, save_settings, with_value
from gbr.core.sizes import parse_size


def test_missing_file_is_no_settings(tmp_path: Path) -> None:
    assert load_settings(tmp_path) == Settings()


def test_values_round_trip_through_the_file(tmp_path: Path) -> None:
    settings = Settings()
    for key, text in [
        ("include_deps", "yes"),
        ("max_file_size", "2MB"),
        ("ignore", "src/generated/, *_gen.gleam"),
        ("k", "7"),
        ("mode", "bm25"),
        ("tests", "exclude"),
    ]:
        settings = with_value(settings, key, text)
    path = save_settings(tmp_path, settings)
    assert path == tmp_path / "settings.toml"
    again = load_settings(tmp_path)
    assert again == settings
    assert again.ignore == ("src/generated/", "*_gen.gleam")
    assert again.as_dict() == {
        "include_deps": True,
        "max_file_size": "2MB",
        "ignore": ["src/generated/", "*_gen.gleam"],
        "k": 7,
        "mode": "bm25",
        "tests": "exclude",
    }
    assert not list(tmp_path.glob(".settings-*"))  # no temporary file left behind


def test_unsetting_everything_removes_the_file(tmp_path: Path) -> None:
    save_settings(tmp_path, with_value(Settings(), "k", "5"))
    save_settings(tmp_path, with_value(load_settings(tmp_path), "k", None))
    assert not (tmp_path / "settings.toml").exists()


@pytest.mark.parametrize(
    ("key", "text", "message"),
    [
        ("k", "0", "k must be a whole number from 1 to 200, not '0'"),
        ("mode", "fuzzy", "mode must be hybrid or dense or bm25, not 'fuzzy'"),
        ("tests", "hide", "tests must be include or demote or exclude, not 'hide'"),
        ("include_deps", "maybe", "include_deps must be true or false, not 'maybe'"),
        ("max_file_size", "big", "max_file_size must be a size like 500k, 2MB or 1000000"),
        ("colour", "red", "unknown setting 'colour'; known: include_deps"),
    ],
)
def test_bad_values_are_one_line_errors(key: str, text: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        with_value(Settings(), key, text)
    assert str(caught.value).startswith(message) and "\n" not in str(caught.value)


def test_a_hand_edited_file_is_checked_too(tmp_path: Path) -> None:
    (tmp_path / "settings.toml").write_text("k = 500\n")
    with pytest.raises(ConfigError, match=r"settings\.toml: k must be a whole number"):
        load_settings(tmp_path)
    (tmp_path / "settings.toml").write_text("ignore = 'src'\n")
    with pytest.raises(ConfigError, match="ignore must be a list of patterns"):
        load_settings(tmp_path)
    (tmp_path / "settings.toml").write_text("k = [\n")
    with pytest.raises(ConfigError, match="fix or delete the file"):
        load_settings(tmp_path)
    (tmp_path / "settings.toml").write_text("include_deps = true\n")
    assert load_settings(tmp_path).include_deps is True


def test_sizes_read_as_people_write_them() -> None:
    assert parse_size("500k") == 500_000
    assert parse_size(" 2MB ") == 2_000_000
    assert parse_size("1.5m") == 1_500_000
    assert parse_size("1000") == 1000
    for bad in ("", "MB", "-1k", "0", "ten"):
        with pytest.raises(ValueError):
            parse_size(bad)
