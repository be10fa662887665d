"""A small copy of the example indexed once per module, and a clean environment for `chat`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import CTL, PROVIDER_VARS, copy_small


def chat_env(package: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """No provider unless `extra` sets one; wide, colourless output; a private GBR_HOME."""
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    env.update({"COLUMNS": "200", "NO_COLOR": "1", "GBR_HOME": str(package.parent / "home")})
    return {**env, **(extra or {})}


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Five files of the example, indexed once for the module's read-only sessions."""
    root = copy_small(tmp_path_factory.mktemp("chat") / "small")
    done = subprocess.run([CTL, "index", str(root)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return root
