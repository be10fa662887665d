"""Shared fixtures: the real model, the real grammar, real DuckDB files in tmp_path."""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pykka
import pytest

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
