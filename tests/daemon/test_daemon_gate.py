"""What a web page can make a loopback daemon do, and what a body can make it hold (issue 15).

The requests are the issue's, sent as real HTTP to a real tokenless daemon on 127.0.0.1
(port 0) that talks to the fake LLM server as Groq: after DNS rebinding, a page's request
arrives with the attacker's name in `Host` and `Origin`; a cross-site form arrives as a
`text/plain` POST. The daemon runs with `--allow-host proxy.invalid` (the escape hatch for
a proxy) and `--max-body 2MB`, so oversize bodies stay small enough to send quickly.
Every foreign name is under `.invalid` (RFC 6761: it never resolves): it is a header value
sent to 127.0.0.1, never an address anything connects to.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest
from fastapi.testclient import TestClient

from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.store.facade import Store
from gbr.daemon.app import create_app
from gbr.daemon.service import Daemon, DaemonConfig
from tests.daemon.conftest import (
    RunningDaemon,
    clean_env,
    index_once,
    run_ctl,
    start_small,
)
from tests.fake_llm import FakeLlm

KEY = "sk-test-GATE-1234567890"
CAP = 2_000_000  # --max-body 2MB
ASK = b'{"question":"how to decode json","stream":false}'
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, fake: FakeLlm) -> Iterator[RunningDaemon]:
    base = tmp_path_factory.mktemp("gate")
    running = start_small(base, fake, KEY, "--allow-host", "proxy.invalid", "--max-body", "2MB")
    try:
        running.wait_first_pass()
        yield running
    finally:
        running.stop()


def send(
    daemon: RunningDaemon, method: str, path: str, headers: dict[str, str], content: bytes = b""
) -> httpx.Response:
    """Exactly these headers (httpx keeps a given `Host`), no token, no JSON helper."""
    with httpx.Client(base_url=daemon.url, timeout=120, trust_env=False) as client:
        return client.request(method, path, headers=headers, content=content)


def one_line_error(response: httpx.Response, status: int, kind: str) -> str:
    assert response.status_code == status, (response.status_code, response.text[:300])
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert set(body) == {"error", "type"} and body["type"] == kind, body
    assert "\n" not in body["error"] and body["error"].strip()
    return str(body["error"])


def full_passes(daemon: RunningDaemon) -> int:
    text = daemon.get("/metrics").text
    found = re.search(r'gbr_index_runs_total\{kind="full",outcome="ok"\} (\d+)', text)
    return int(found.group(1)) if found else 0


# --- item 1: DNS rebinding and cross-site requests -----------------------------------------


def test_the_rebound_ask_is_refused_and_the_llm_hears_nothing(
    daemon: RunningDaemon, fake: FakeLlm
) -> None:
    """Before: 200, and the fake Groq received the request with the user's key."""
    port = daemon.info.port
    before = len(fake.requests)
    rebound = {
        "host": f"attacker.invalid:{port}",
        "origin": f"http://attacker.invalid:{port}",
        **JSON,
    }
    error = one_line_error(send(daemon, "POST", "/ask", rebound, ASK), 403, "ForbiddenHostError")
    assert "attacker.invalid" in error and "--allow-host" in error
    assert len(fake.requests) == before  # no LLM call, so no key spent or sent
    # The same body from a program on this machine is answered through the LLM: the
    # refusal above is the gate's, not a broken /ask.
    answered = send(daemon, "POST", "/ask", JSON, ASK)
    assert answered.status_code == 200, answered.text
    assert answered.json()["answer"] and len(fake.requests) > before
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in fake.requests[before:])


def test_a_cross_site_text_plain_post_index_is_a_415_and_runs_no_pass(
    daemon: RunningDaemon,
) -> None:
    """Before: a `text/plain` POST /index with no body (what a page's form or fetch can send
    without a preflight) answered 200 after running a full pass."""
    passes = full_passes(daemon)
    for headers, content in [
        ({"content-type": "text/plain"}, b""),
        ({"content-type": "application/x-www-form-urlencoded"}, b"a=b"),
        ({"content-type": "multipart/form-data; boundary=x"}, b"--x--"),
        ({}, b""),  # no type at all
    ]:
        response = send(daemon, "POST", "/index", headers, content)
        error = one_line_error(response, 415, "UnsupportedMediaTypeError")
        assert "Content-Type: application/json" in error
    # A JSON /search with a form's type is refused the same; it was answered with hits.
    form = {"content-type": "text/plain;charset=UTF-8"}
    search = send(daemon, "POST", "/search", form, b'{"query":"isbn"}')
    one_line_error(search, 415, "UnsupportedMediaTypeError")
    assert full_passes(daemon) == passes
    # JSON, with a charset, is what the API takes.
    json_utf8 = {"content-type": "application/json; charset=utf-8"}
    assert send(daemon, "POST", "/index", json_utf8, b"{}").status_code == 200
    assert full_passes(daemon) == passes + 1


@pytest.mark.parametrize(
    "host",
    [
        "attacker.invalid:{port}",
        "attacker.invalid",
        "127.0.0.1.attacker.invalid:{port}",
        "localhost.attacker.invalid",
        "0.0.0.0:{port}",  # a browser reaches a loopback daemon at 0.0.0.0 too
        "127.0.0.1:{port}@attacker.invalid",
    ],
)
def test_a_foreign_host_is_refused_on_every_route(daemon: RunningDaemon, host: str) -> None:
    """Before: every one of these got a 200 from /status and hits from /search."""
    headers = {"host": host.format(port=daemon.info.port)}
    one_line_error(send(daemon, "GET", "/status", headers), 403, "ForbiddenHostError")
    one_line_error(send(daemon, "GET", "/health", headers), 403, "ForbiddenHostError")
    search = send(daemon, "POST", "/search", {**headers, **JSON}, b'{"query":"isbn"}')
    one_line_error(search, 403, "ForbiddenHostError")


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:{port}",
        "127.0.0.1",
        "127.8.9.10:{port}",
        "localhost:{port}",
        "LocalHost",
        "localhost.:{port}",
        "[::1]:{port}",
        "[::1]",
        "proxy.invalid",  # --allow-host
        "PROXY.invalid:8443",
    ],
)
def test_loopback_names_and_allowed_hosts_are_served(daemon: RunningDaemon, host: str) -> None:
    headers = {"host": host.format(port=daemon.info.port)}
    assert send(daemon, "GET", "/status", headers).json()["files_ok"] == 5
    search = send(daemon, "POST", "/search", {**headers, **JSON}, b'{"query":"isbn","k":1}')
    assert search.status_code == 200 and search.json()["results"]


@pytest.mark.parametrize(
    "origin",
    [
        "http://attacker.invalid:{port}",
        "https://127.0.0.1.attacker.invalid",
        "null",  # a sandboxed frame or a local file
        "file://",
        "chrome-extension://abcdef",
    ],
)
def test_a_foreign_origin_is_refused_even_with_a_loopback_host(
    daemon: RunningDaemon, origin: str
) -> None:
    """Before: a page on another origin could read /status and post searches."""
    headers = {"origin": origin.format(port=daemon.info.port)}
    error = one_line_error(send(daemon, "GET", "/status", headers), 403, "ForbiddenOriginError")
    assert "web pages" in error
    search = send(daemon, "POST", "/search", {**headers, **JSON}, b'{"query":"isbn"}')
    one_line_error(search, 403, "ForbiddenOriginError")


@pytest.mark.parametrize(
    "origin",
    ["http://127.0.0.1:{port}", "http://localhost:3000", "https://[::1]", "http://proxy.invalid"],
)
def test_loopback_and_allowed_origins_are_served(daemon: RunningDaemon, origin: str) -> None:
    headers = {"origin": origin.format(port=daemon.info.port)}
    assert send(daemon, "GET", "/status", headers).status_code == 200


@pytest.fixture
def guarded(small_example: Path, model: OnnxEmbedder, tmp_path: Path) -> Iterator[TestClient]:
    """The real app over an opened (not indexed) Daemon that wants a token, in process."""
    config = DaemonConfig(
        root=small_example, db=tmp_path / "index.duckdb", token="s3cret", env=os.environ
    )
    daemon = Daemon(config, model)
    daemon.open()
    try:
        app = create_app(daemon)
        yield TestClient(app, base_url="http://127.0.0.1", raise_server_exceptions=False)
    finally:
        daemon.close()


def test_with_a_token_the_gate_still_refuses_a_foreign_host_origin_or_type(
    guarded: TestClient,
) -> None:
    """The token is checked after the gate: a page that somehow had it is refused still."""
    auth = {"authorization": "Bearer s3cret"}
    assert guarded.get("/status", headers=auth).status_code == 200
    host = guarded.get("/status", headers={**auth, "host": "attacker.invalid"})
    assert host.status_code == 403 and host.json()["type"] == "ForbiddenHostError"
    origin = guarded.get("/status", headers={**auth, "origin": "http://attacker.invalid"})
    assert origin.status_code == 403 and origin.json()["type"] == "ForbiddenOriginError"
    plain = guarded.post("/index", headers={**auth, "content-type": "text/plain"})
    assert plain.status_code == 415
    # Without the token, a JSON POST is still a 401 first, never a hint about the body.
    assert guarded.post("/index", json={}).status_code == 401


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "Bearer", "bEaReR"])
def test_the_bearer_scheme_is_case_insensitive(guarded: TestClient, scheme: str) -> None:
    """Before: only `Bearer` was accepted; RFC 9110 makes the scheme case-insensitive."""
    response = guarded.get("/status", headers={"authorization": f"{scheme} s3cret"})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    "value", ["Basic s3cret", "Bearer s3cretx", "Bearers3cret", "s3cret", "Bearer", ""]
)
def test_other_schemes_and_tokens_are_still_refused(guarded: TestClient, value: str) -> None:
    response = guarded.get("/status", headers={"authorization": value})
    assert response.status_code == 401 and response.json()["type"] == "AuthError"


# --- item 8: bodies are capped before they are read ---------------------------------------


def raw_post(daemon: RunningDaemon, framing: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", daemon.info.port), timeout=60)
    head = (
        f"POST /search HTTP/1.1\r\nHost: 127.0.0.1:{daemon.info.port}\r\n"
        f"Content-Type: application/json\r\n{framing}\r\n\r\n"
    )
    sock.sendall(head.encode())
    return sock


def read_response(sock: socket.socket) -> tuple[int, str]:
    data = b""
    with sock:
        while b"\r\n\r\n" not in data or not data.rstrip().endswith(b"}"):
            try:
                more = sock.recv(65536)
            except TimeoutError:
                raise AssertionError(f"no answer to an oversize body: {data[:200]!r}") from None
            if not more:
                break
            data += more
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body.decode()


def test_a_content_length_over_the_cap_is_a_413_before_any_byte_is_read(
    daemon: RunningDaemon,
) -> None:
    """Before: the daemon waited for all 300 MB (and then held them while it parsed)."""
    sock = raw_post(daemon, "Content-Length: 300000000")
    status, body = read_response(sock)  # nothing of the body was sent
    assert status == 413
    assert f"larger than the {CAP} bytes" in body and "--max-body" in body
    assert daemon.get("/health").status_code == 200


def test_a_chunked_body_is_counted_as_it_streams_and_memory_stays_flat(
    daemon: RunningDaemon,
) -> None:
    """Before: 100 MB chunked went into memory whole (RSS grew by hundreds of MB), then 422."""
    process = psutil.Process(daemon.proc.pid)
    start = peak = process.memory_info().rss
    sock = raw_post(daemon, "Transfer-Encoding: chunked")
    piece = b'{"query":"' + b"a" * (1 << 20)
    offered = 100 * len(piece)
    sent = 0
    while sent < offered:
        if select.select([sock], [], [], 0)[0]:  # the daemon answered: stop sending
            break
        try:
            sock.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
        except OSError:  # it closed the connection after answering
            break
        sent += len(piece)
        peak = max(peak, process.memory_info().rss)
    status, body = read_response(sock)
    assert status == 413 and "BodyTooLargeError" in body
    assert sent < offered / 4, f"the daemon read {sent} bytes before answering"
    peak = max(peak, process.memory_info().rss)
    assert peak - start < 48 * 2**20, f"RSS grew by {(peak - start) / 2**20:.0f} MB"
    assert daemon.get("/health").status_code == 200


def test_a_body_under_the_cap_is_read_and_judged(daemon: RunningDaemon) -> None:
    padding = "x" * (CAP - 100)
    body = f'{{"query":"isbn","pad":"{padding}"}}'.encode()
    response = send(daemon, "POST", "/search", JSON, body)
    assert "pad" in one_line_error(response, 422, "ValidationError")


# --- item 10: the first pass, and the query cap both ways -----------------------------------


def test_search_during_the_first_pass_says_the_index_is_being_built(
    small_example: Path, model: OnnxEmbedder, tmp_path: Path
) -> None:
    """Mid-way through a first pass the chunks are there but the full-text index is not
    (the Writer builds it at the end). Before: a 503 telling the user to run `gleambrctl
    index`, which the daemon was already doing."""
    db = tmp_path / "index.duckdb"
    index_once(small_example, db, model)
    with Store.open(db) as store:  # the state of a first pass before its end
        store.con.execute("PRAGMA drop_fts_index('chunks')")
    daemon = Daemon(DaemonConfig(root=small_example, db=db, env=os.environ), model)
    daemon.open()
    try:
        client = TestClient(
            create_app(daemon), base_url="http://127.0.0.1", raise_server_exceptions=False
        )
        for mode in ("hybrid", "bm25"):
            early = client.post("/search", json={"query": "isbn", "mode": mode})
            error = one_line_error(early, 409, "IndexEmptyError")  # type: ignore[arg-type]
            assert "being built" in error and "try again" in error, error
            assert "gleambrctl index" not in error
            assert early.headers["retry-after"] == "5"
        assert daemon.index_all().files_seen == 5  # the first pass ends
        done = client.post("/search", json={"query": "isbn", "mode": "bm25"})
        assert done.status_code == 200 and done.json()["results"]
    finally:
        daemon.close()


def test_a_query_over_the_cap_exits_2_locally_and_through_the_daemon(
    daemon: RunningDaemon, tmp_path: Path
) -> None:
    """Before: the daemon refused it (exit 2) and a local search ran it (exit 0)."""
    query = "isbn " * 2000 + "x"  # 10,001 characters
    assert len(query) == 10_001
    env = clean_env(tmp_path / "home")
    through = run_ctl("search", query, cwd=daemon.root, env=env)
    local_root = tmp_path / "local"
    shutil.copytree(
        daemon.root, local_root, ignore=shutil.ignore_patterns("daemon.json", "*.lock", "*.wal")
    )
    local = run_ctl("search", query, cwd=local_root, env=env)
    for result in (through, local):
        assert result.returncode == 2, (result.returncode, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
        assert "10000" in result.stderr.replace(",", "")
    ok = run_ctl("search", query[:10_000], "--json", cwd=local_root, env=env)
    assert ok.returncode == 0, ok.stderr
