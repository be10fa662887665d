"""The registry of GBR_* variables covers every one the code reads, and "off" is spelt one
way for all of them (issue 28: GBR_ONNX_GRAPHS=none worked, GBR_SECOND_OPINION=none did not)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import gbr
from gbr.core import environ
from gbr.core.embed.cache_config import cache_config
from gbr.core.embed.onnx_graphs import kept_folder
from gbr.core.environ import OFF_WORDS, VARIABLES, gbr_home, is_off
from gbr.core.llm.config import config_path
from gbr.core.paths import cache_home
from gbr.core.rank.search import Ranking
from gbr.core.rank.second_opinion import second_model_files
from gbr.daemon.filler import quiet_seconds

GBR = Path(gbr.__file__).parent
NAME = re.compile(r"\bGBR_[A-Z][A-Z0-9_]*")


def sources() -> dict[Path, str]:
    return {p: p.read_text("utf-8") for p in GBR.rglob("*.py")}


def test_every_gbr_variable_the_code_names_is_registered() -> None:
    named = {m for text in sources().values() for m in NAME.findall(text)}
    assert named, "the grep found nothing: the pattern is wrong"
    assert named - set(VARIABLES) == set()


def test_every_registered_variable_is_read_somewhere_outside_the_registry() -> None:
    """Read by its registry name (`environ.HOME`) or spelt out; a variable nothing reads
    would be documented for nothing."""
    constants = {
        value.name: attr
        for attr, value in vars(environ).items()
        if isinstance(value, environ.Variable)
    }
    assert set(constants) == set(VARIABLES)
    others = "\n".join(t for p, t in sources().items() if p.name != "environ.py")
    unread = [
        name
        for name, attr in constants.items()
        if name not in others and not re.search(rf"\b{attr}\b", others)
    ]
    assert unread == []


@pytest.mark.parametrize("word", [*OFF_WORDS, "OFF", " None ", "False"])
def test_every_switch_takes_every_spelling_of_off(word: str, tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    assert is_off(word)
    assert cache_config({**env, "GBR_EMBED_CACHE": word}) is None
    assert second_model_files({**env, "GBR_SECOND_OPINION": word}) is None
    assert kept_folder({**env, "GBR_ONNX_GRAPHS": word}) is None
    ranking = Ranking.default({**env, "GBR_RANKER": word, "GBR_SECOND_OPINION": "off"})
    assert ranking.ranker is None
    fill = quiet_seconds({"GBR_SECOND_OPINION_FILL": word})
    # A number of seconds: 0 means at once there, every other spelling of off means off.
    assert fill == (0.0 if word == "0" else None)


def test_blank_and_on_are_not_off(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    assert not is_off("") and not is_off("on") and not is_off(None)
    assert cache_config({**env, "GBR_EMBED_CACHE": ""}) is not None
    assert kept_folder({**env, "GBR_ONNX_GRAPHS": " "}) == tmp_path / ".cache" / "gbr" / "onnx"


def test_gbr_home_is_resolved_in_one_place(tmp_path: Path) -> None:
    home = tmp_path / "gbr-home"
    env = {"GBR_HOME": str(home), "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "c")}
    assert cache_home(env) == gbr_home(env, "cache") == home
    assert config_path(env) == home / "config.toml"
    bare = {"HOME": str(tmp_path)}
    assert cache_home(bare) == tmp_path / ".cache" / "gbr"
    assert config_path(bare) == tmp_path / ".config" / "gbr" / "config.toml"
    xdg = {**bare, "XDG_CACHE_HOME": str(tmp_path / "c"), "XDG_CONFIG_HOME": str(tmp_path / "f")}
    assert cache_home(xdg) == tmp_path / "c" / "gbr"
    assert config_path(xdg) == tmp_path / "f" / "gbr" / "config.toml"
    # A relative XDG folder is ignored for both (the XDG rule), and no home at all is None.
    relative = {**bare, "XDG_CACHE_HOME": "c", "XDG_CONFIG_HOME": "f"}
    assert cache_home(relative) == tmp_path / ".cache" / "gbr"
    assert config_path(relative) == tmp_path / ".config" / "gbr" / "config.toml"
    assert cache_home({}) is None and config_path({}) is None
