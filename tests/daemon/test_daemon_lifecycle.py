"""Starting, refusing, stopping and killing the daemon; tokens; catching up after a crash."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from gbr.core.llm.sse import iter_sse
from gbr.core.store.facade import Store
from tests.conftest import copy_small
from tests.daemon.conftest import (
    RunningDaemon,
    append_function,
    clean_env,
    run_ctl,
    start_daemon,
    wait_until,
)
from tests.fake_llm import FakeLlm, Reply

TOKEN = "s3cret-token-for-tests"


def test_a_token_is_required_when_set_and_sigterm_stops_cleanly(
    tmp_path: Path, daemons: list[RunningDaemon]
) -> None:
    root = copy_small(tmp_path / "small")
    env = clean_env(tmp_path / "home")
    daemon = start_daemon(root, "--token", TOKEN, env=env, token=TOKEN)
    daemons.append(daemon)
    assert daemon.info.token_required
    with daemon.http(token="") as anonymous:
        refused = anonymous.get("/status")
        assert refused.status_code == 401
        assert refused.json()["type"] == "AuthError" and "Bearer" in refused.json()["error"]
        assert refused.headers["www-authenticate"] == "Bearer"
        assert anonymous.post("/search", json={"query": "isbn"}).status_code == 401
        assert anonymous.get("/health").status_code == 200  # liveness needs no token
    with daemon.http(token="wrong") as wrong:
        assert wrong.get("/status").status_code == 401
    assert daemon.wait_idle()["files_ok"] == 5

    no_token = run_ctl("status", cwd=root, env=env)
    assert no_token.returncode == 2 and "GBR_TOKEN" in no_token.stderr
    with_token = run_ctl("status", "--json", cwd=root, env={**env, "GBR_TOKEN": TOKEN})
    assert with_token.returncode == 0, with_token.stderr
    assert json.loads(with_token.stdout)["pid"] == daemon.info.pid

    assert daemon.stop(signal.SIGTERM) == 0
    assert not (root / ".gbr" / "daemon.json").exists()
    assert not (root / ".gbr" / "index.duckdb.wal").exists()  # the final checkpoint ran
    log = daemon.log_text()
    assert "checkpoint_written" in log and "daemon_stopped" in log
    for line in log.splitlines():  # the announcement on stdout, then only JSON log lines
        if not line.startswith(("serving ", "web page: ")):
            json.loads(line)
    with Store.open(root / ".gbr" / "index.duckdb", read_only=True) as store:
        assert store.counts()["files_ok"] == 5


def test_sigterm_cuts_an_answer_that_is_streaming_and_still_exits_cleanly(
    tmp_path: Path, daemons: list[RunningDaemon], fake_llm: FakeLlm
) -> None:
    root = copy_small(tmp_path / "small")
    env = clean_env(tmp_path / "home", **fake_llm.env("groq"))
    full = "word " * 40
    fake_llm.script(Reply(full, chunks=40, chunk_delay=1.0))  # 40 s if nobody cuts it
    daemon = start_daemon(root, env=env)
    daemons.append(daemon)
    daemon.wait_idle()
    body = {"question": "how is an isbn parsed?", "hyde": False}
    with daemon.http() as client, client.stream("POST", "/ask", json=body) as response:
        events = iter_sse(response.iter_text())
        context = next(events)
        assert context.event == "context" and json.loads(context.data)["chunks"]
        first = next(events)
        assert first.event == "token"
        daemon.proc.send_signal(signal.SIGTERM)
        rest = list(events)
    assert daemon.proc.wait(25) == 0  # well before the LLM would have finished
    answers = [json.loads(e.data) for e in rest if e.event == "answer"]
    assert len(answers) == 1
    assert 0 < len(answers[0]["answer"]) < len(full)  # what came before the cut
    assert answers[0]["cancelled"] is True
    (failure,) = [json.loads(e.data) for e in rest if e.event == "error"]
    assert "stopped while answering" in failure["error"] and failure["exit_code"] == 1
    assert "daemon_stopped" in daemon.log_text()


def test_a_non_loopback_host_needs_a_token(tmp_path: Path) -> None:
    root = copy_small(tmp_path / "small")
    result = run_ctl(
        "serve", str(root), "--host", "0.0.0.0", "--port", "0", cwd=root, env=clean_env(tmp_path)
    )
    assert result.returncode == 2
    assert "--token" in result.stderr and "GBR_TOKEN" in result.stderr
    assert not (root / ".gbr" / "daemon.json").exists()


def test_kill_9_mid_batch_leaves_an_index_that_opens_and_a_restart_catches_up(
    tmp_path: Path, daemons: list[RunningDaemon]
) -> None:
    root = copy_small(tmp_path / "small")
    env = clean_env(tmp_path / "home")
    first = start_daemon(root, env=env)
    daemons.append(first)
    first.wait_idle()
    for i, rel in enumerate(["src/bookshelf/isbn.gleam", "src/bookshelf/config.gleam"]):
        append_function(root, rel, f"written_before_the_kill_{i}")
    # Kill as soon as the batch is seen running (or, if it was quicker, done): mostly while
    # its files are being written, which is the case this test is about.
    wait_until(
        lambda: (
            (s := first.status())["indexing"] is not None or s["last_batch"]["kind"] == "changes"
        ),
        "the batch to start",
    )
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    append_function(root, "test/isbn_test.gleam", "written_while_down")
    (root / "src/bookshelf/ffi.gleam").unlink()

    # The dead daemon left its discovery file; the CLI cleans it and opens the index itself.
    assert (root / ".gbr" / "daemon.json").exists()
    status = run_ctl("status", "--json", cwd=root, env=env)
    assert status.returncode == 0, status.stderr
    assert "removed a stale daemon.json" in status.stderr
    assert "pid" not in json.loads(status.stdout)
    assert not (root / ".gbr" / "daemon.json").exists()

    second = start_daemon(root, env=env)
    daemons.append(second)
    second.wait_idle()
    for name in ("written_before_the_kill_0", "written_before_the_kill_1", "written_while_down"):
        assert name in second.names(name), name
    assert not second.search("ffi", path="src/bookshelf/ffi.gleam")["results"]
    assert second.status()["files_ok"] == 4
    assert second.stop() == 0


def test_a_stale_discovery_file_is_cleaned_when_a_daemon_starts(
    tmp_path: Path, daemons: list[RunningDaemon]
) -> None:
    root = copy_small(tmp_path / "small")
    env = clean_env(tmp_path / "home")
    (root / ".gbr").mkdir()
    stale = {
        "pid": 999_999_999,
        "host": "127.0.0.1",
        "port": 9,
        "db": str(root / ".gbr" / "index.duckdb"),
        "root": str(root),
        "started_at": 0.0,
        "token_required": False,
    }
    (root / ".gbr" / "daemon.json").write_text(json.dumps(stale))
    daemon = start_daemon(root, env=env)
    daemons.append(daemon)
    wait_until(lambda: "removed a stale daemon.json" in daemon.log_text(), "the note")
    assert "pid 999999999" in daemon.log_text()
    assert daemon.info.pid == daemon.proc.pid
    assert daemon.stop() == 0
