"""Start the real daemon (`gleambrctl serve PATH --port 0`) in a subprocess, on 127.0.0.1.

The port comes from the discovery file the daemon writes once it answers; `/health` is
polled after that. Logs go to files, not pipes, so a chatty daemon never blocks on a full
pipe. Helpers wait on observable state with a deadline; nothing asserts on speed.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest

from gbr.access.discovery import DaemonInfo, read_discovery
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.llm.sse import iter_sse
from gbr.daemon.service import Daemon, DaemonConfig
from tests.conftest import CTL, copy_small, invoke
from tests.conftest import PROVIDER_VARS as BASE_PROVIDER_VARS
from tests.fake_llm import FakeLlm

PROVIDER_VARS = (*BASE_PROVIDER_VARS, "GBR_TOKEN", "GBR_FAULTS")
# The keys of one hit in `search --json`, spelled out: they are the API, not Hit's fields.
HIT_KEYS = {
    "rank", "path", "module", "name", "kind", "start_line", "end_line", "score", "text",
    "signature", "doc",
}  # fmt: skip
DEADLINE = 60.0  # seconds to wait for something the daemon should do soon (a bound, not a target)
T = TypeVar("T")


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARS}
    env.update({"COLUMNS": "200", "NO_COLOR": "1", "GBR_HOME": str(home)})
    env.update(extra)
    return env


def wait_until(check: Callable[[], T], what: str, timeout: float = DEADLINE) -> T:
    """Poll `check` until it returns something truthy; fail naming `what` at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        with contextlib.suppress(httpx.HTTPError):
            last = check()
            if last:
                return last
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


@dataclass
class RunningDaemon:
    proc: subprocess.Popen[bytes]
    root: Path
    info: DaemonInfo
    logs: Path
    token: str | None = None

    @property
    def url(self) -> str:
        return self.info.url

    @property
    def db(self) -> Path:
        return Path(self.info.db)

    def http(self, token: str | None = None) -> httpx.Client:
        token = token if token is not None else self.token
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60, trust_env=False)

    def get(self, path: str) -> httpx.Response:
        with self.http() as client:
            return client.get(path)

    def post(self, path: str, body: Any = None, **kwargs: Any) -> httpx.Response:
        with self.http() as client:
            return client.post(path, json=body, **kwargs)

    def status(self) -> dict[str, Any]:
        response = self.get("/status")
        assert response.status_code == 200, response.text
        return response.json()

    def search(self, query: str, **body: Any) -> dict[str, Any]:
        response = self.post("/search", {"query": query, **body})
        assert response.status_code == 200, response.text
        return response.json()

    def names(self, query: str, k: int = 5) -> list[str]:
        return [r["name"] for r in self.search(query, mode="bm25", k=k)["results"]]

    def ask_events(self, body: dict[str, Any]) -> list[tuple[str, Any]]:
        with self.http() as client, client.stream("POST", "/ask", json=body) as response:
            assert response.status_code == 200, response.read()
            assert response.headers["content-type"].startswith("text/event-stream")
            return [(e.event, json.loads(e.data)) for e in iter_sse(response.iter_text())]

    def wait_first_pass(self, timeout: float = 300) -> None:
        """Generous: the first pass embeds every chunk, slow on a loaded 2-core machine."""
        wait_until(lambda: self.status()["ready"], "the first pass", timeout=timeout)

    def wait_idle(self, timeout: float = DEADLINE) -> dict[str, Any]:
        """Until the first pass is done and nothing is queued or running."""
        self.wait_first_pass()
        return wait_until(
            lambda: (
                (s := self.status())["ready"]
                and s["indexing"] is None
                and s["queue_depth"] == 0
                and s
            ),
            "the daemon to be idle",
            timeout,
        )

    def log_text(self) -> str:
        return self.logs.read_text(errors="replace") if self.logs.exists() else ""

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)


def start_daemon(
    root: Path,
    *args: str,
    env: dict[str, str],
    token: str | None = None,
    shell: str | None = None,
    db: Path | None = None,
    **popen: Any,
) -> RunningDaemon:
    """`gleambrctl serve ROOT --port 0 ARGS`, once its discovery file names it and it answers.

    `shell` runs before the daemon in `sh` (`ulimit -n 64`, say), which then execs it with
    the same pid; a `preexec_fn` would fork this large test process and may fail (ENOMEM).
    `db`: the index file when `--db` is among `args`. `popen` goes to subprocess.Popen."""
    logs = root.parent / f"{root.name}-daemon-{time.monotonic_ns()}.log"
    command = [CTL, "serve", str(root), "--port", "0", *args]
    if shell is not None:
        command = ["/bin/sh", "-c", f'{shell} && exec "$0" "$@"', *command]
    with logs.open("wb") as log:
        proc = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            **popen,
        )
    db = db or root / ".gbr" / "index.duckdb"

    def published() -> DaemonInfo | None:
        if proc.poll() is not None:
            raise AssertionError(f"the daemon exited with {proc.returncode}:\n{logs.read_text()}")
        try:
            info = read_discovery(db)
        except ValueError:
            return None
        return info if info is not None and info.pid == proc.pid else None

    info = wait_until(published, "the discovery file", timeout=60)
    daemon = RunningDaemon(proc, root, info, logs, token)
    wait_until(lambda: daemon.get("/health").status_code == 200, "/health")
    return daemon


def start_small(base: Path, fake: FakeLlm, key: str, *args: str) -> RunningDaemon:
    """A daemon over a copy of the small example under `base`, with `fake` as its Groq."""
    root = copy_small(base / "small")
    return start_daemon(root, *args, env=clean_env(base / "home", **fake.env("groq", key)))


@contextlib.contextmanager
def small_daemon(base: Path, fake: FakeLlm, key: str, *args: str) -> Iterator[RunningDaemon]:
    """`start_small`, done with its first pass, for the length of a module's tests."""
    running = start_small(base, fake, key, *args)
    try:
        running.wait_idle()
        yield running
    finally:
        running.stop()


def index_once(root: Path, db: Path, model: OnnxEmbedder) -> None:
    """One full pass of `root` into `db` by an in-process Daemon, closed after."""
    daemon = Daemon(DaemonConfig(root=root, db=db, env=os.environ), model)
    daemon.open()
    try:
        daemon.index_all()
    finally:
        daemon.close()


def run_ctl(
    *args: str, cwd: Path, env: dict[str, str], stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`gleambrctl ARGS` with exactly the environment `env`. `index` and `serve` get a
    process of their own (they take over SIGINT and SIGTERM); the other commands, clients
    of the daemon or of the index file, run through typer's runner in this process."""
    if args[0] not in ("index", "serve"):
        unset: dict[str, str | None] = {k: None for k in os.environ if k not in env}
        return invoke(*args, cwd=cwd, stdin=stdin, env={**unset, **env})
    return subprocess.run(
        [CTL, *args], cwd=cwd, env=env, input=stdin, capture_output=True, text=True, timeout=120
    )


def append_function(root: Path, rel: str, name: str, body: str = "42") -> None:
    with (root / rel).open("a", encoding="utf-8") as handle:
        handle.write(f"\npub fn {name}() -> Int {{\n  {body}\n}}\n")


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLlm]:
    """The fake LLM server of a module's daemon."""
    with FakeLlm() as server:
        yield server


@pytest.fixture
def daemons() -> Iterator[list[RunningDaemon]]:
    """Daemons a test starts: whatever it leaves running is killed at the end."""
    started: list[RunningDaemon] = []
    yield started
    for daemon in started:
        if daemon.proc.poll() is None:
            daemon.proc.kill()
            daemon.proc.wait(10)
