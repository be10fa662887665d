"""Fuzz the daemon's HTTP API from its own OpenAPI spec (schemathesis), in this process.

The hand-written cases in test_daemon_api.py cover the bodies someone thought of; here the
spec's schemas drive valid and invalid requests at every operation, so a 500, a traceback
or an error in another shape shows up the day a field is added. Requests go to the real
app over a real Daemon serving an indexed copy of the small example; every LLM provider
points at the fake server, so nothing leaves the machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, settings
from schemathesis import Case, CheckContext, Response
from schemathesis.specs.openapi.checks import positive_data_acceptance

from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.llm.registry import available, resolve_settings
from gbr.daemon.app import create_app
from gbr.daemon.gate import HttpPolicy
from gbr.daemon.service import Daemon, DaemonConfig
from tests.conftest import copy_small
from tests.daemon.conftest import PROVIDER_VARS, index_once
from tests.fake_llm import FakeLlm

KEY = "sk-test-FUZZ-1234567890"
# The ASGI calls below send `Host: testserver`; a served daemon refuses a name it was not
# given (test_daemon_gate.py), so these apps are told it, as `serve --allow-host` would.
POLICY = HttpPolicy.for_bind("127.0.0.1", ["testserver"])
TOKEN = "fuzz-token-4b1d9c"
OPERATIONS = {
    ("GET", "/health"),
    ("GET", "/status"),
    ("POST", "/search"),
    ("POST", "/ask"),
    ("POST", "/index"),
    ("GET", "/metrics"),
}
FUZZ = settings(
    max_examples=25,  # random cases per operation, on top of the coverage phase's boundary cases
    derandomize=True,  # the same cases every run: a failure is reproducible, never a flake
    deadline=None,  # an ask or a full pass on a loaded 2-core machine may take a while
    database=None,
    suppress_health_check=list(HealthCheck),
)
CONFIG = schemathesis.Config.from_dict(
    {
        # Valid and invalid inputs, from the spec's examples, its boundaries and at random.
        "generation": {"mode": "all", "deterministic": True, "database": "none"},
        "phases": {
            "examples": {"enabled": True},
            "coverage": {"enabled": True},
            "fuzzing": {"enabled": True},
            "stateful": {"enabled": False},
        },
        # A valid body can still name what does not exist (a provider) or say nothing
        # (a blank question): that is a 400, documented, not a schema violation.
        "checks": {"positive_data_acceptance": {"expected-statuses": ["2xx", "400"]}},
    }
)

# The spec depends only on the routes, so a Daemon that is never opened is enough to render
# it at import; the cases go to a served one (`test_the_served_spec_is_the_fuzzed_one`).
SPEC = create_app(Daemon(DaemonConfig(Path("."), Path("unused.duckdb")), cast(Any, None))).openapi()
schema = schemathesis.openapi.from_dict(SPEC, config=CONFIG)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory, model: OnnxEmbedder) -> tuple[Path, Path]:
    """The small example and its index, embedded once; each test serves a copy of the file."""
    base = tmp_path_factory.mktemp("fuzz")
    root = copy_small(base / "small")
    db = base / "index.duckdb"
    index_once(root, db, model)
    return root, db


@pytest.fixture
def fake_env(monkeypatch: pytest.MonkeyPatch, fake_llm: FakeLlm) -> Iterator[FakeLlm]:
    """Every provider the daemon knows, aimed at the fake server; none from the real env."""
    for var in PROVIDER_VARS:
        monkeypatch.delenv(var, raising=False)
    for provider in available():
        for var, value in fake_llm.env(provider, KEY).items():
            monkeypatch.setenv(var, value)
        # A fuzzed `provider` may name any of them: each must resolve to the fake server.
        assert resolve_settings(provider, env=os.environ).base_url.startswith(fake_llm.url), (
            provider
        )
    yield fake_llm
    assert not fake_llm.errors


@contextlib.contextmanager
def serving(
    indexed: tuple[Path, Path], model: OnnxEmbedder, tmp_path: Path, token: str | None
) -> Iterator[FastAPI]:
    """The real app over a real, ready Daemon: opened on a copy of the index, one full pass
    done (nothing changed), for the whole test: every generated case hits the same one."""
    root, db = indexed
    copy = tmp_path / "index.duckdb"
    shutil.copy2(db, copy)
    daemon = Daemon(DaemonConfig(root=root, db=copy, token=token, env=os.environ), model)
    daemon.open()
    try:
        assert daemon.index_all().files_unchanged == 5
        yield create_app(daemon, POLICY)
    finally:
        daemon.close()


@pytest.fixture
def app(
    indexed: tuple[Path, Path], model: OnnxEmbedder, tmp_path: Path, fake_env: FakeLlm
) -> Iterator[FastAPI]:
    with serving(indexed, model, tmp_path, None) as served:
        yield served


@pytest.fixture
def guarded_app(
    indexed: tuple[Path, Path], model: OnnxEmbedder, tmp_path: Path, fake_env: FakeLlm
) -> Iterator[FastAPI]:
    with serving(indexed, model, tmp_path, TOKEN) as served:
        yield served


def error_shape(ctx: CheckContext | None, response: Response, case: Case) -> None:
    """Every 4xx and 5xx is one JSON object: a one-line `error` and its `type`."""
    if response.status_code < 400:
        return
    content_type = response.headers.get("content-type", [""])[0]
    assert content_type.startswith("application/json"), (
        f"{response.status_code} {content_type!r}: {response.text[:200]!r}"
    )
    body = json.loads(response.text)
    assert isinstance(body, dict) and set(body) == {"error", "type"}, body
    assert isinstance(body["error"], str) and body["error"].strip(), body
    assert "\n" not in body["error"] and "Traceback" not in body["error"], body
    assert isinstance(body["type"], str) and body["type"], body


def below_500(ctx: CheckContext | None, response: Response, case: Case) -> None:
    """Stricter than schemathesis' own check, which lets a documented 503 through."""
    assert response.status_code < 500, f"{response.status_code}: {response.text[:300]!r}"


CHECKS = [error_shape, below_500]


def excluded(case: Case) -> list[Any]:
    """A graph question about a name the index does not hold, or the web page's file view
    of a path it does not hold, is a documented 404 however well-formed the name:
    schemathesis's "valid data is accepted" check cannot know which names exist."""
    path = case.operation.path
    return [positive_data_acceptance] if path.startswith(("/graph/", "/web/file")) else []


GATE_STATUSES = {413, 415}


@FUZZ
@schema.parametrize()
def test_every_operation_answers_any_input_without_a_5xx(case: Case, app: FastAPI) -> None:
    case.call_and_validate(app=app, additional_checks=CHECKS, excluded_checks=excluded(case))


@FUZZ
@schema.parametrize()
def test_with_a_token_a_request_without_it_or_with_a_wrong_one_is_a_401(
    case: Case, guarded_app: FastAPI
) -> None:
    app = guarded_app
    good = case.call(app=app, headers={"authorization": f"Bearer {TOKEN}"})
    case.validate_response(
        good,
        additional_checks=CHECKS,
        excluded_checks=excluded(case),
        transport_kwargs={"app": app},
    )
    if case.operation.path == "/health" or case.method.upper() != case.operation.method.upper():
        return  # /health is open to all; a method the route lacks is a 405 before any auth
    # The gate (a POST that is not JSON, a body over the cap) refuses on the headers alone,
    # before the token is looked at: the same answer with a token or without.
    gated = good.status_code in GATE_STATUSES
    for headers in ({}, {"authorization": f"Bearer {TOKEN}x"}, {"authorization": TOKEN}):
        bad = case.call(app=app, headers=headers)
        expected = good.status_code if gated else 401
        assert bad.status_code == expected, (headers, bad.status_code, bad.text[:200])
        error_shape(None, bad, case)
        if not gated:
            assert json.loads(bad.text)["type"] == "AuthError"
            assert bad.headers["www-authenticate"] == ["Bearer"]


def test_the_served_spec_is_the_fuzzed_one(guarded_app: FastAPI) -> None:
    served = TestClient(guarded_app).get("/openapi.json").json()
    assert served == SPEC
    operations = {(m.upper(), p) for p, item in served["paths"].items() for m in item}
    assert operations >= OPERATIONS


# --- what the fuzz found -----------------------------------------------------------------

NOT_JSON = b"query=x"
NOT_UTF8 = b"\xba\xf9\xa1"
JSON = {"content-type": "application/json"}


@pytest.mark.parametrize("path", ["/search", "/ask"])
@pytest.mark.parametrize("content", [NOT_JSON, NOT_UTF8])
def test_a_bad_body_without_the_token_is_a_401_not_a_hint_about_the_body(
    guarded_app: FastAPI, path: str, content: bytes
) -> None:
    """FastAPI parses a body before it runs the token check; the token must still come first."""
    client = TestClient(guarded_app, raise_server_exceptions=False)
    for auth in ({}, {"authorization": f"Bearer {TOKEN}x"}):
        response = client.post(path, content=content, headers={**JSON, **auth})
        assert response.status_code == 401, response.text
        assert response.json()["type"] == "AuthError"
        assert response.headers["www-authenticate"] == "Bearer"
    authorized = client.post(
        path, content=content, headers={**JSON, "authorization": f"Bearer {TOKEN}"}
    )
    assert authorized.status_code == 422 and authorized.json()["type"] == "ValidationError"


def test_a_body_that_is_not_utf8_is_a_422_that_says_so(app: FastAPI) -> None:
    """It was a 400 `There was an error parsing the body`: not JSON is a 422, as documented."""
    client = TestClient(app, raise_server_exceptions=False)
    response = client.post("/search", content=NOT_UTF8, headers=JSON)
    assert response.status_code == 422
    assert response.json() == {
        "error": "the body is not valid JSON (it is not UTF-8 text); send a JSON object",
        "type": "ValidationError",
    }
    assert client.get("/nope").status_code == 404  # routing errors are untouched
    assert client.put("/search", content=NOT_UTF8).status_code == 405
