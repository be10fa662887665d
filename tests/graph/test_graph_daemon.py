"""The graph through a running daemon: HTTP routes behind its gate and token, the CLI going
through it, and freshness (a saved file's edges replaced by the write that replaces its
chunks, so callers answer the new truth once search does)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import httpx

from tests.daemon.conftest import (
    RunningDaemon,
    clean_env,
    copy_small,
    daemons,
    run_ctl,
    start_daemon,
    wait_until,
)
from tests.graph.test_graph_index import CALLER

__all__ = ["daemons"]  # the fixture, imported so that pytest finds it here


def callers(daemon: RunningDaemon, name: str) -> list[str]:
    response = daemon.get(f"/graph/callers?name={name}")
    assert response.status_code == 200, response.text
    return [f"{c['module']}.{c['name']}" for c in response.json()["callers"]]


def started(
    tmp_path: Path, daemons: list[RunningDaemon], *args: str, token: str | None = None
) -> RunningDaemon:
    root = copy_small(tmp_path / "small")
    (root / "src" / "bookshelf" / "checker.gleam").write_text(CALLER)
    daemon = start_daemon(root, *args, env=clean_env(tmp_path / "home"), token=token)
    daemons.append(daemon)
    daemon.wait_first_pass()
    return daemon


def test_a_saved_file_changes_what_callers_answer(tmp_path: Path, daemons) -> None:
    daemon = started(tmp_path, daemons)
    assert "bookshelf/checker.check" in callers(daemon, "isbn.is_valid")
    checker = daemon.root / "src" / "bookshelf" / "checker.gleam"
    checker.write_text(
        CALLER.replace("isbn.is_valid(code)", "isbn.is_valid(code) && recheck(code)")
        + "\nfn recheck(code: String) -> Bool {\n  isbn.is_valid(code)\n}\n"
    )
    wait_until(
        lambda: "bookshelf/checker.recheck" in callers(daemon, "isbn.is_valid"),
        "callers to show the saved file's new function",
    )
    # The same write replaced the chunks: search agrees with the graph on the new version
    # once its searcher has reloaded (a fresh-clone CI run once asked in between).
    wait_until(lambda: "recheck" in daemon.names("recheck"), "search to find the new function")
    checker.unlink()
    wait_until(
        lambda: (
            not any(c.startswith("bookshelf/checker.") for c in callers(daemon, "isbn.is_valid"))
        ),
        "callers to forget the deleted file",
    )
    # The CLI asks the daemon (which holds the index file) and prints the same answer.
    done = run_ctl(
        "callers", "isbn.parse", "--json", cwd=daemon.root, env=clean_env(tmp_path / "home")
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["target"]["module"] == "bookshelf/isbn"


def test_the_routes_answer_errors_as_one_json_line_and_stay_behind_the_gate(
    tmp_path: Path, daemons
) -> None:
    daemon = started(tmp_path, daemons, "--token", "s3cret", token="s3cret")
    refs = daemon.get("/graph/refs?name=isbn.parse")
    assert refs.status_code == 200 and refs.json()["definitions"][0]["line"] == 36
    unknown = daemon.get("/graph/refs?name=pars")
    assert unknown.status_code == 404
    assert (
        unknown.json()["type"] == "NameNotFoundError" and "did you mean" in unknown.json()["error"]
    )
    ambiguous = daemon.get("/graph/callees?name=map")
    assert ambiguous.status_code == 400, ambiguous.text
    assert ambiguous.json()["type"] == "AmbiguousNameError"
    assert "gleam/list.map" in ambiguous.json()["error"]
    assert daemon.get("/graph/callers?name=parse&depth=0").status_code == 422
    graph = daemon.get("/graph/graph?name=isbn")
    assert graph.json()["kind"] == "imports" and graph.json()["focus"] == "bookshelf/isbn"
    with httpx.Client(base_url=daemon.url, trust_env=False, timeout=60) as bare:
        assert bare.get("/graph/refs?name=isbn.parse").status_code == 401
        foreign = bare.get(
            "/graph/refs?name=isbn.parse",
            headers={"host": "evil.invalid", "authorization": "Bearer s3cret"},
        )
        assert foreign.status_code == 403
    done = run_ctl(
        "refs", "pars", cwd=daemon.root, env=clean_env(tmp_path / "home", GBR_TOKEN="s3cret")
    )
    assert done.returncode == 1 and "did you mean" in done.stderr


def test_an_unknown_name_before_the_first_pass_says_to_wait(
    small_example: Path, model, tmp_path: Path
) -> None:
    from fastapi.testclient import TestClient

    from gbr.daemon.app import create_app
    from gbr.daemon.service import Daemon, DaemonConfig

    daemon = Daemon(
        DaemonConfig(root=small_example, db=tmp_path / "index.duckdb", env=os.environ), model
    )
    daemon.open()
    try:
        client = TestClient(create_app(daemon), base_url="http://127.0.0.1")
        early = client.get("/graph/callers?name=isbn.parse")
        assert early.status_code == 409, early.text
        assert early.headers["retry-after"] == "5"
        assert "first pass" in early.json()["error"]
        client.post("/index", json={})
        assert client.get("/graph/callers?name=isbn.parse").status_code == 200
        assert client.get("/graph/callers?name=nothing_here").status_code == 404
    finally:
        daemon.close()
