"""The gate's pure parts: which `Host`, `Origin` and `Content-Type` values pass, and the
log throttle. The same rules against a real daemon are in test_daemon_gate.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from gbr.daemon.gate import DEFAULT_MAX_BODY_BYTES, HttpPolicy, host_name, is_json
from gbr.daemon.overload import Throttle
from tests.daemon.conftest import clean_env, run_ctl


@pytest.mark.parametrize(
    ("authority", "name"),
    [
        ("127.0.0.1:7717", "127.0.0.1"),
        ("LOCALHOST", "localhost"),
        ("localhost.:80", "localhost"),
        ("[::1]:7717", "::1"),
        ("[::1]", "::1"),
        ("proxy.invalid:", "proxy.invalid"),
        ("::1", None),  # IPv6 without brackets
        ("[::1", None),
        ("[::1]x", None),
        ("host:port", None),
        ("a@127.0.0.1", None),
        ("", None),
    ],
)
def test_host_name_strips_the_port_and_refuses_what_is_not_a_host(
    authority: str, name: str | None
) -> None:
    assert host_name(authority) == name


def test_a_policy_allows_loopback_the_bound_host_and_the_named_ones() -> None:
    policy = HttpPolicy.for_bind("192.168.1.5", ["Proxy.Invalid:8443"])
    assert policy.allowed_hosts == {"192.168.1.5", "proxy.invalid"}
    assert policy.allows_host("192.168.1.5:7717") and policy.allows_host("proxy.invalid")
    assert policy.allows_host("127.0.0.3") and policy.allows_host("[::1]:1")
    assert not policy.allows_host("192.168.1.6") and not policy.allows_host("other.invalid")
    assert policy.max_body_bytes == DEFAULT_MAX_BODY_BYTES


@pytest.mark.parametrize("bind", ["0.0.0.0", "::"])
def test_a_wildcard_bind_adds_no_name_and_star_allows_any_host(bind: str) -> None:
    assert HttpPolicy.for_bind(bind).allowed_hosts == frozenset()
    assert not HttpPolicy.for_bind(bind).allows_host("0.0.0.0:7717")
    star = HttpPolicy.for_bind(bind, ["*"])
    assert star.allows_host("anything.invalid")
    assert not star.allows_origin("http://anything.invalid")  # `*` is for Host only
    assert HttpPolicy.for_bind("::1").allows_host("[::1]:7717")


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        ("http://127.0.0.1:7717", True),
        ("https://localhost", True),
        ("http://[::1]:3000", True),
        ("http://proxy.invalid", True),
        ("null", False),
        ("http://attacker.invalid", False),
        ("ftp://127.0.0.1", False),
        ("http://127.0.0.1/path", False),
        ("127.0.0.1", False),
    ],
)
def test_origins(origin: str, allowed: bool) -> None:
    assert HttpPolicy.for_bind("127.0.0.1", ["proxy.invalid"]).allows_origin(origin) is allowed


@pytest.mark.parametrize(
    ("value", "json"),
    [
        ("application/json", True),
        ("Application/JSON; charset=UTF-8", True),
        ("text/plain", False),
        ("application/json-patch+json", False),
        ("application/x-www-form-urlencoded", False),
        (None, False),
        ("", False),
    ],
)
def test_is_json(value: str | None, json: bool) -> None:
    assert is_json(value) is json


def test_the_throttle_admits_the_first_of_a_kind_per_interval_and_counts_the_rest() -> None:
    throttle = Throttle(interval=3600)
    assert throttle.admit("accept: OSError")
    assert not any(throttle.admit("accept: OSError") for _ in range(999))
    assert throttle.admit("another kind")
    assert throttle.holding() and throttle.drain() == {"accept: OSError": 999}
    assert not throttle.holding() and throttle.drain() == {}


def test_serve_refuses_a_max_body_that_is_not_a_size(tmp_path: Path) -> None:
    env = clean_env(tmp_path / "home")
    for value, words in (("0", "--max-body must be positive"), ("lots", "cannot read size")):
        result = run_ctl("serve", str(tmp_path), "--max-body", value, cwd=tmp_path, env=env)
        assert result.returncode == 2, result.stderr
        assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1
