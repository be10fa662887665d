"""Bring your own model: a model folder for `--model-dir`, and `gleambrctl models fetch`
against a real HTTP server on 127.0.0.1 that serves a tiny real model (never the hub)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gbr.core.embed.catalogue import RECEIPT, load_catalogue
from gbr.core.embed.model_fetch import fetch_model
from tests.conftest import CTL, PROVIDER_VARS, invoke, write_tree
from tests.tiny_models import build_tiny_embedder

LIB = """
/// Parse a json string into a user.
pub fn decode_user(json: String) -> Result(Int, String) {
  Ok(1)
}

/// Sort a list, then reverse it.
pub fn sort_reverse(list: List(Int)) -> List(Int) {
  list
}
"""
REPO_NAME = "tests/tiny-embedder"
REVISION = "0123456789abcdef0123456789abcdef01234567"


def run(*args: str, cwd: Path, home: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    env.update(NO_COLOR="1", COLUMNS="200", GBR_HOME=str(home), **extra)
    return subprocess.run(
        [CTL, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def one_error_line(result: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def package(tmp_path: Path) -> Path:
    return write_tree(
        tmp_path / "users",
        {"gleam.toml": 'name = "users"\nversion = "1.0.0"\n', "src/users.gleam": LIB},
    )


def index_and_search(package: Path, home: Path, model_dir: Path) -> list[dict]:
    """Index `package` with the model in `model_dir`, then search it with the same model."""
    indexed = run("index", str(package), "--model-dir", str(model_dir), cwd=package, home=home)
    assert indexed.returncode == 0, indexed.stderr
    found = invoke(
        "search", "parse json user", "--json", "--mode", "dense", "--model-dir", str(model_dir),
        cwd=package, env={"GBR_HOME": str(home)},
    )  # fmt: skip
    assert found.returncode == 0, found.stderr
    hits: list[dict] = json.loads(found.stdout)["results"]
    return hits


# --- a folder of one's own --------------------------------------------------------------


def test_a_hub_layout_folder_works_as_model_dir(package: Path, tmp_path: Path) -> None:
    """An export with its graph under onnx/ (the hub's layout) is found by --model-dir,
    and a search with it ranks by its own vectors: the tiny model shares `parse json user`'s
    words with decode_user's doc only."""
    flat = build_tiny_embedder(tmp_path / "flat")
    hub = tmp_path / "hub-export"
    (hub / "onnx").mkdir(parents=True)
    (flat / "model.onnx").rename(hub / "onnx" / "model.onnx")
    (flat / "tokenizer.json").rename(hub / "tokenizer.json")
    hits = index_and_search(package, tmp_path / "home", hub)
    assert hits[0]["name"] == "decode_user"


@pytest.mark.parametrize(
    ("layout", "missing"),
    [
        ({"tokenizer.json"}, "model.onnx"),
        ({"model.onnx"}, "tokenizer.json"),
        (set(), "model.onnx and no tokenizer.json"),
    ],
)
def test_a_folder_without_its_files_is_one_line_naming_them(
    package: Path, tmp_path: Path, layout: set[str], missing: str
) -> None:
    made = build_tiny_embedder(tmp_path / "made")
    bad = tmp_path / "bad"
    bad.mkdir()
    for name in layout:
        (made / name).rename(bad / name)
    refused = run("index", str(package), "--model-dir", str(bad), cwd=package, home=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert f"has no {missing};" in one_error_line(refused) and str(bad) in refused.stderr
    assert not (package / ".gbr" / "index.duckdb").exists()


def test_a_search_with_a_folder_missing_its_tokenizer_is_refused(
    package: Path, tmp_path: Path
) -> None:
    good = build_tiny_embedder(tmp_path / "good")
    indexed = run("index", str(package), "--model-dir", str(good), cwd=package, home=tmp_path)
    assert indexed.returncode == 0, indexed.stderr
    (good / "tokenizer.json").unlink()
    searched = run("search", "json", "--model-dir", str(good), cwd=package, home=tmp_path)
    assert searched.returncode == 2, searched.stderr
    assert "has no tokenizer.json;" in one_error_line(searched) and not searched.stdout


def test_a_missing_model_folder_is_named(package: Path, tmp_path: Path) -> None:
    result = run("index", str(package), cwd=package, home=tmp_path, GBR_MODEL_DIR="/no/such")
    assert result.returncode == 2
    assert "model folder not found: /no/such" in one_error_line(result)


def test_a_model_that_gives_no_token_states_is_refused_at_load(
    package: Path, tmp_path: Path
) -> None:
    """A cross-encoder's folder given as an embedder: its `logits` [batch, 1] cannot be
    mean-pooled, so the load says so in one line instead of failing inside a batch."""
    from tests.tiny_models import build_tiny_cross_encoder

    folder = build_tiny_cross_encoder(tmp_path / "ce")
    result = run("index", str(package), "--model-dir", str(folder), cwd=package, home=tmp_path)
    assert result.returncode == 2, result.stderr
    assert "last_hidden_state" in one_error_line(result)


def test_a_model_whose_width_is_a_symbol_is_measured(tmp_path: Path) -> None:
    from gbr.core.embed.embedder import OnnxEmbedder
    from gbr.core.embed.model_files import resolve_model_files
    from tests.tiny_models import EMBED_WIDTH

    folder = build_tiny_embedder(tmp_path / "symbolic", width_known=False)
    embedder = OnnxEmbedder(resolve_model_files(folder))
    assert embedder.dim == EMBED_WIDTH
    vectors = embedder.embed_batch(["parse json", "parse json user"])
    assert vectors.shape == (2, EMBED_WIDTH) and float(vectors[0] @ vectors[1]) > 0.8


# --- models fetch -----------------------------------------------------------------------


@dataclass
class ModelServer:
    """Serves files at /{repo}/resolve/{revision}/{path}, as the hub does; `faults` makes a
    path answer with a status, or cut its body short."""

    files: dict[str, bytes]
    faults: dict[str, str] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    url: str = ""


@pytest.fixture
def server() -> Iterator[ModelServer]:
    state = ModelServer(files={})

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            state.requests.append(self.path)
            prefix = f"/{REPO_NAME}/resolve/{REVISION}/"
            path = self.path.removeprefix(prefix)
            fault = state.faults.get(path, "")
            body = state.files.get(path)
            if body is None or fault.isdigit():
                self.send_response(int(fault) if fault.isdigit() else 404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2] if fault == "truncate" else body)
            self.close_connection = True

        def log_message(self, *args: object) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


def tiny_catalogue(tmp_path: Path, server: ModelServer, **sha256: str) -> Path:
    """A catalogue naming one model, `tiny`, whose files the server holds; `sha256`
    overrides a file's pinned digest (by saved name, dots as underscores)."""
    built = build_tiny_embedder(tmp_path / "built")
    files = []
    names = [("onnx/model_quantized.onnx", "model.onnx"), ("tokenizer.json", "tokenizer.json")]
    for remote, saved in names:
        data = (built / saved).read_bytes()
        server.files[remote] = data
        digest = sha256.get(saved.replace(".", "_"), hashlib.sha256(data).hexdigest())
        files.append(
            {"path": remote, "save_as": saved, "sha256": digest, "approx_bytes": len(data)}
        )
    entry = {
        "name": "tiny",
        "purpose": "embedder",
        "summary": "a tiny test embedder",
        "repo": REPO_NAME,
        "revision": REVISION,
        "licence": "MIT-TEST",
        "licence_url": f"{server.url}/LICENSE",
        "files": files,
    }
    path = tmp_path / "models.json"
    path.write_text(json.dumps({"models": [entry]}), "utf-8")
    return path


def fetch(
    tmp_path: Path, server: ModelServer, catalogue: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    return run(
        "models", "fetch", "tiny", "--catalogue", str(catalogue), *extra,
        cwd=tmp_path, home=tmp_path / "home", GBR_MODELS_URL=server.url,
    )  # fmt: skip


def test_fetch_shows_the_licence_checks_the_files_and_the_folder_then_searches(
    tmp_path: Path, server: ModelServer, package: Path
) -> None:
    catalogue = tiny_catalogue(tmp_path, server)
    result = fetch(tmp_path, server, catalogue, "--yes")
    assert result.returncode == 0, result.stderr
    assert f"licence: MIT-TEST ({server.url}/LICENSE)" in result.stderr
    folder = tmp_path / "home" / "models" / "tiny"
    assert f"--model-dir {folder}" in result.stdout and "GBR_MODEL_DIR" in result.stdout
    assert (folder / "model.onnx").read_bytes() == server.files["onnx/model_quantized.onnx"]
    receipt = json.loads((folder / RECEIPT).read_text())
    assert (
        receipt["sha256"]["tokenizer.json"]
        == hashlib.sha256(server.files["tokenizer.json"]).hexdigest()
    )
    assert sorted(p.name for p in folder.parent.iterdir()) == ["tiny"]  # no staging left

    listed = invoke(
        "models", "list", "--json", "--catalogue", str(catalogue),
        env={"GBR_HOME": str(tmp_path / "home")},
    )  # fmt: skip
    assert json.loads(listed.stdout)["models"][0]["cached"] == str(folder)
    asked = len(server.requests)
    again = fetch(tmp_path, server, catalogue)  # in the cache: no licence, no download
    assert again.returncode == 0 and len(server.requests) == asked

    hits = index_and_search(package, tmp_path / "home", folder)
    assert hits[0]["name"] == "decode_user"


@pytest.mark.parametrize(
    ("fault", "said"),
    [
        ({"tokenizer.json": "404"}, "answered HTTP 404"),
        ({"onnx/model_quantized.onnx": "500"}, "answered HTTP 500"),
        ({"onnx/model_quantized.onnx": "truncate"}, "failed after"),
        ({"sha": "model_onnx"}, "not the catalogue's"),
    ],
    ids=["404", "500", "truncated", "wrong-sha256"],
)
def test_a_failed_fetch_is_one_line_and_keeps_nothing(
    tmp_path: Path, server: ModelServer, fault: dict[str, str], said: str
) -> None:
    wrong = {fault["sha"]: "0" * 64} if "sha" in fault else {}
    catalogue = tiny_catalogue(tmp_path, server, **wrong)
    server.faults.update({k: v for k, v in fault.items() if k != "sha"})
    result = fetch(tmp_path, server, catalogue, "--yes")
    assert result.returncode == 1, result.stderr
    line = one_error_line(result)
    assert said in line and "nothing was kept" in line, line
    models = tmp_path / "home" / "models"
    assert list(models.iterdir()) == []


def test_fetch_without_yes_and_no_terminal_asks_for_it_and_downloads_nothing(
    tmp_path: Path, server: ModelServer
) -> None:
    catalogue = tiny_catalogue(tmp_path, server)
    result = fetch(tmp_path, server, catalogue)
    assert result.returncode == 2
    assert "licence: MIT-TEST" in result.stderr
    assert "add --yes" in one_error_line(result)
    assert server.requests == []
    assert not (tmp_path / "home" / "models" / "tiny").exists()


@pytest.mark.parametrize("answer", ["n", "y"])
def test_at_a_terminal_the_licence_is_asked_for(
    tmp_path: Path, server: ModelServer, answer: str
) -> None:
    """stdin a terminal (a pty): the prompt decides; no means nothing is downloaded."""
    import pty

    catalogue = tiny_catalogue(tmp_path, server)
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    env.update(NO_COLOR="1", GBR_HOME=str(tmp_path / "home"), GBR_MODELS_URL=server.url)
    main, terminal = pty.openpty()
    try:
        os.write(main, f"{answer}\n".encode())
        result = subprocess.run(
            [CTL, "models", "fetch", "tiny", "--catalogue", str(catalogue)],
            stdin=terminal, env=env, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    finally:
        os.close(terminal)
        os.close(main)
    assert "Accept the MIT-TEST licence" in result.stdout
    fetched = (tmp_path / "home" / "models" / "tiny").is_dir()
    if answer == "n":
        assert result.returncode == 2 and "not accepted" in one_error_line(result)
        assert server.requests == [] and not fetched
    else:
        assert result.returncode == 0, result.stderr
        assert fetched and len(server.requests) == 2


def test_an_interrupted_fetch_leaves_no_half_model(tmp_path: Path, server: ModelServer) -> None:
    """Ctrl-C during the second file: the first, complete, goes too."""
    catalogue = tiny_catalogue(tmp_path, server)
    model = load_catalogue(catalogue)["tiny"]

    def interrupt(file: str, received: int, expected: int | None) -> None:
        if file == "tokenizer.json":
            raise KeyboardInterrupt

    root = tmp_path / "models"
    with pytest.raises(KeyboardInterrupt):
        fetch_model(model, server.url, root, interrupt)
    assert list(root.iterdir()) == []


def test_the_shipped_catalogue_pins_every_model() -> None:
    """Each known model is pinned to a commit and has its licence; its ONNX graph has
    the hub's sha256, so a changed file is refused."""
    known = load_catalogue()
    assert len(known) >= 2
    for model in known.values():
        assert len(model.revision) == 40 and int(model.revision, 16) >= 0
        assert model.licence and model.licence_url.startswith("https://")
        saved = {f.save_as: f for f in model.files}
        assert set(saved) == {"model.onnx", "tokenizer.json"}
        digest = saved["model.onnx"].sha256
        assert digest is not None and len(digest) == 64
