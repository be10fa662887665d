"""A small copy of the example indexed once per module, and a clean environment for `chat`."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import PROVIDER_VARS, Indexed


def chat_env(package: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """No provider unless `extra` sets one; wide, colourless output; a private GBR_HOME."""
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    env.update({"COLUMNS": "200", "NO_COLOR": "1", "GBR_HOME": str(package.parent / "home")})
    return {**env, **(extra or {})}


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory, indexed_small_template: Indexed) -> Path:
    """Five files of the example, indexed (once per session) for the module's read-only
    sessions."""
    return indexed_small_template.copy(tmp_path_factory.mktemp("chat") / "small")
