"""Shared fixtures: the real model, the real grammar, real DuckDB files in tmp_path."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pykka
import pytest
from typer.testing import CliRunner

from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.embed.model_files import resolve_model_files
from gbr.core.llm import provider_env_vars
from gbr.core.paths import CEILING_ENV
from gbr.core.rank.rerank import RERANK_MODEL_DIR_ENV

# The fake LLM server's `fake_llm` fixture, for every test module.
pytest_plugins = ["tests.fake_llm"]

REPO = Path(__file__).resolve().parent.parent
# The CLI of this venv, for tests that run it as a user would, in a subprocess.
CTL = str(Path(sys.executable).parent / "gleambrctl")
# What configures an LLM provider or a reranker; subprocess tests start from none of them.
PROVIDER_VARS = (*provider_env_vars(), RERANK_MODEL_DIR_ENV)
EXAMPLE = REPO / "examples" / "bookshelf"


@pytest.fixture(scope="session")
def model() -> OnnxEmbedder:
    """The real default ONNX model, loaded once (about half a second)."""
    return OnnxEmbedder(resolve_model_files())


@pytest.fixture
def example_copy(tmp_path: Path) -> Path:
    """A private copy of the bookshelf example, safe to edit."""
    dest = tmp_path / "bookshelf"
    shutil.copytree(EXAMPLE, dest, ignore=shutil.ignore_patterns(".gbr", "build"))
    return dest


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    """Write {relative path: text or bytes} under root, making folders as needed."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


@pytest.fixture
def make_package(tmp_path: Path) -> Callable[[dict[str, str | bytes]], Path]:
    """Write a package from {relative path: content}; gleam.toml is added when missing."""

    def make(files: dict[str, str | bytes], name: str = "pkg") -> Path:
        files = {"gleam.toml": f'name = "{name}"\nversion = "1.0.0"\n', **files}
        return write_tree(tmp_path / name, files)

    return make


@pytest.fixture(scope="session", autouse=True)
def _session_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """GBR_HOME for module- and session-scoped fixtures too, which run before `_isolated`:
    an index they build must not reach the user's shared embed cache."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GBR_HOME", str(tmp_path_factory.mktemp("gbr-home")))
        # One kept ONNX graph (90 MB) for the whole session, not one per test's GBR_HOME.
        patch.setenv("GBR_ONNX_GRAPHS", str(tmp_path_factory.mktemp("onnx-graphs")))
        yield


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No test sees the user's config or an index above its tmp_path, and no actor outlives
    its test. The ceiling reaches every subprocess too, since they inherit os.environ."""
    monkeypatch.setenv("GBR_HOME", str(tmp_path / "gbr-home"))
    monkeypatch.setenv(CEILING_ENV, str(tmp_path.parent))
    yield
    pykka.ActorRegistry.stop_all(block=True, timeout=10)


# What an explicit `--device cuda` prints where onnxruntime has no CUDA provider at all.
NO_CUDA_WARNING = (
    "warning: --device cuda: CUDA provider not installed (pip install onnxruntime-gpu); using CPU"
)


def check_cuda_warnings(lines: list[str]) -> None:
    """The warnings of an explicit `--device cuda` on this machine, whatever it has: without
    a CUDA provider, the one line naming the package; with one, none if a GPU took the
    work, else one line saying why the CPU did."""
    import onnxruntime as ort

    from gbr.core.embed.device import CUDA

    if CUDA not in ort.get_available_providers():
        assert lines == [NO_CUDA_WARNING]
    else:
        assert len(lines) <= 1, lines
        assert all(
            line.startswith("warning: --device cuda: ") and line.endswith("; using CPU")
            for line in lines
        ), lines


SMALL_FILES = (
    "gleam.toml",
    "src/bookshelf/ffi.gleam",
    "src/bookshelf/isbn.gleam",
    "src/bookshelf/config.gleam",
    "src/bookshelf/member.gleam",
    "test/isbn_test.gleam",
)


@pytest.fixture
def small_example(tmp_path: Path) -> Path:
    """Five real files of the example (about 90 chunks): quick to index many times."""
    return copy_small(tmp_path / "small")


def copy_small(dest: Path) -> Path:
    """The SMALL_FILES of the example, copied under `dest` as a package of their own."""
    for rel in SMALL_FILES:
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(EXAMPLE / rel, dest / rel)
    return dest


# -- indexes built once per session --------------------------------------------------------
#
# Indexing embeds every chunk with the real model: the bookshelf costs seconds of CPU each
# time. A test that only reads an index, or whose point starts after the first index, gets a
# copy of one built once per session by the CLI (`gleambrctl index`, the shipped path); the
# copy is the package with its .gbr folder, which moves with the package (store.facade's
# check_root). Tests about the first index itself still index their own copy.


class Indexed:
    """A package indexed once per session by `gleambrctl index --json`, and that summary."""

    def __init__(self, root: Path, summary: dict[str, Any]) -> None:
        self.root = root
        self.summary = summary

    def copy(self, dest: Path) -> Path:
        """The package and its .gbr folder (index, vector file, events log) under `dest`, as
        if indexed there: mtimes are kept, so a new run finds every file unchanged, and the
        index names `dest` as its root (vimgrep paths and the no-change check read it)."""
        from gbr.core.store.facade import Store

        shutil.copytree(self.root, dest, symlinks=True)
        with Store.open(dest / ".gbr" / "index.duckdb") as store:
            store.set_meta(root=str(dest))
        return dest


def _index_by_cli(root: Path, home: Path) -> Indexed:
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    done = subprocess.run(
        [CTL, "index", str(root), "--json"],
        env={**env, "GBR_HOME": str(home), "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    return Indexed(root, json.loads(done.stdout))


@pytest.fixture(scope="session")
def indexed_example_template(tmp_path_factory: pytest.TempPathFactory) -> Indexed:
    """The whole bookshelf example, indexed once per session; copy it, never write to it."""
    base = tmp_path_factory.mktemp("indexed-example")
    root = base / "bookshelf"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".gbr", "build"))
    return _index_by_cli(root, base / "home")


@pytest.fixture(scope="session")
def indexed_small_template(tmp_path_factory: pytest.TempPathFactory) -> Indexed:
    """SMALL_FILES of the example, indexed once per session; copy it, never write to it."""
    base = tmp_path_factory.mktemp("indexed-small")
    return _index_by_cli(copy_small(base / "small"), base / "home")


@pytest.fixture
def indexed_small(indexed_small_template: Indexed, tmp_path: Path) -> Path:
    """A private copy of the small example with its index, safe to edit and re-index."""
    return indexed_small_template.copy(tmp_path / "small")


@pytest.fixture
def indexed_example(indexed_example_template: Indexed, tmp_path: Path) -> Path:
    """A private copy of the bookshelf example with its index, safe to edit and re-index."""
    return indexed_example_template.copy(tmp_path / "bookshelf")


# -- the CLI in this process ---------------------------------------------------------------


def invoke(
    *args: str,
    cwd: Path | None = None,
    stdin: str | None = None,
    env: dict[str, str | None] | None = None,
) -> subprocess.CompletedProcess[str]:
    """`gleambrctl ARGS` through typer's runner in this process, shaped as a subprocess run.

    For output and exit codes, where a new interpreter (a second or more of imports and
    model loading) adds nothing. Not for `index` (it installs signal handlers for the rest
    of the process), nor where the process is the point: signals, the console script's own
    exit, stdout and stderr as separate pipes of a real process, a clean environment.
    An exception the command lets out is put on stderr as a traceback, as Python would.
    """
    from gbr.cli import app

    with contextlib.chdir(cwd or Path.cwd()):
        result = CliRunner().invoke(
            app, list(args), input=stdin, env={"COLUMNS": "200", "NO_COLOR": "1", **(env or {})}
        )
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess([CTL, *args], result.exit_code, result.stdout, stderr)
