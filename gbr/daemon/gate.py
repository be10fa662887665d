"""What the daemon checks before any route sees a request: who it is for, where it comes
from, and what it carries.

A daemon on 127.0.0.1 without a token is reachable by every web page the user opens: after
DNS rebinding (a name the page controls resolving to 127.0.0.1), the browser sends the
page's requests to the daemon as same-origin ones, reads the answers and spends the
user's LLM key. Such a request carries the attacker's name in `Host` and, for a POST, in
`Origin`; a plain cross-site form or `fetch` can only send `text/plain`, a form encoding or
no body at all. So, with or without a token, and before the body is read:

- `Host` must be a loopback name (127.0.0.0/8, `localhost`, `[::1]`, any port), the host
  the daemon was told to bind, or one named with `--allow-host` (`*` for any): else 403;
- an `Origin`, when sent, must name such a host too (`null` never does): else 403;
- a POST to a route that takes one must say `Content-Type: application/json` (parameters
  such as a charset allowed): else 415;
- a body may hold at most `max_body_bytes`: a larger `Content-Length` is refused at once,
  and a chunked body is counted as it arrives, so at most that much is ever held: 413.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

DEFAULT_MAX_BODY_BYTES = 8_000_000  # `serve --max-body 8MB`; the largest valid /ask is ~2 MB
ANY_HOST = "*"
WILDCARD_BINDS = {"", "0.0.0.0", "::"}


def error_response(status: int, message: str, kind: str, **headers: str) -> JSONResponse:
    """The daemon's one error shape: `{"error": "<one line>", "type": "<class>"}`."""
    line = " ".join(message.split()) or kind
    return JSONResponse({"error": line, "type": kind}, status_code=status, headers=headers or None)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def host_name(authority: str) -> str | None:
    """The host of a `Host` header or an origin's authority, lowercased, without its port
    or brackets (`[::1]:80` → `::1`); None when it is not a host[:port] at all."""
    value = authority.strip().lower()
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        if not bracket:
            return None
    elif value.count(":") > 1:  # an IPv6 address must come in brackets
        return None
    else:
        name, _, port = value.partition(":")
        rest = f":{port}" if port else ""
    if rest and not (rest.startswith(":") and rest[1:].isdigit()):
        return None
    name = name.removesuffix(".")  # `localhost.` is `localhost`
    if not name or any(c in name for c in "@/\\ "):
        return None
    return name


@dataclass(frozen=True)
class HttpPolicy:
    """Which hosts the daemon answers to, and how large a body it reads."""

    allowed_hosts: frozenset[str] = frozenset()
    any_host: bool = False
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES

    @classmethod
    def for_bind(
        cls, bind_host: str, allow_hosts: Iterable[str] = (), max_body_bytes: int | None = None
    ) -> HttpPolicy:
        """Loopback, the bound host (unless it is every interface), and `allow_hosts`."""
        names = {host_name(h) for h in allow_hosts if h.strip() != ANY_HOST}
        if bind_host not in WILDCARD_BINDS:
            names.add(host_name(f"[{bind_host}]" if ":" in bind_host else bind_host))
        return cls(
            allowed_hosts=frozenset(n for n in names if n),
            any_host=any(h.strip() == ANY_HOST for h in allow_hosts),
            max_body_bytes=max_body_bytes or DEFAULT_MAX_BODY_BYTES,
        )

    def allows_name(self, name: str | None) -> bool:
        return name is not None and (is_loopback(name) or name in self.allowed_hosts)

    def allows_host(self, header: str) -> bool:
        # A request without `Host` (HTTP/1.0) is let through: browsers always send one.
        return self.any_host or self.allows_name(host_name(header))

    def allows_origin(self, origin: str) -> bool:
        scheme, sep, authority = origin.strip().partition("://")
        if not sep or scheme.lower() not in ("http", "https") or "/" in authority:
            return False  # `null` (a sandboxed frame, a file), or not an origin at all
        return self.allows_name(host_name(authority))


def is_json(content_type: str | None) -> bool:
    media = (content_type or "").partition(";")[0]
    return media.strip().lower() == "application/json"


class Gate:
    """ASGI middleware enforcing `HttpPolicy` before the app reads anything."""

    def __init__(self, app: ASGIApp, policy: HttpPolicy, json_posts: Iterable[str]) -> None:
        self.app = app
        self.policy = policy
        # The paths that take a POST: elsewhere a POST is the router's 404 or 405.
        self.json_posts = frozenset(json_posts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        body = await self._read_body(receive)
        if body is None:  # the client left before it finished sending
            return
        if isinstance(body, JSONResponse):
            await body(scope, receive, send)
            return
        await self.app(scope, _replay(body, receive), send)

    def refusal(self, scope: Scope) -> JSONResponse | None:
        """The answer to a request refused on its headers alone, or None."""
        headers = _headers(scope)
        hosts = [h for h in headers.get("host", []) if not self.policy.allows_host(h)]
        if hosts:
            return error_response(
                403,
                f"this daemon does not answer requests for host {hosts[0][:100]!r} (a web page "
                "may be trying to reach it); use http://127.0.0.1, or start it with "
                "--allow-host NAME to accept that name",
                "ForbiddenHostError",
            )
        foreign = [o for o in headers.get("origin", []) if not self.policy.allows_origin(o)]
        if foreign:
            return error_response(
                403,
                f"requests from web pages at {foreign[0][:100]!r} are refused; call the daemon "
                "from a program, or start it with --allow-host for that page's host",
                "ForbiddenOriginError",
            )
        types = headers.get("content-type", [""])
        posted = scope["method"] == "POST" and scope["path"] in self.json_posts
        if posted and not all(is_json(t) for t in types):
            return error_response(
                415,
                "a POST must carry a JSON object; send the header `Content-Type: application/json`",
                "UnsupportedMediaTypeError",
            )
        lengths = headers.get("content-length", [])
        if any(n.strip().isdigit() and int(n) > self.policy.max_body_bytes for n in lengths):
            return self._too_large()
        return None

    async def _read_body(self, receive: Receive) -> bytes | JSONResponse | None:
        """The whole body, counted as it comes; a 413 as soon as it passes the cap."""
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.policy.max_body_bytes:
                return self._too_large()
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    def _too_large(self) -> JSONResponse:
        cap = self.policy.max_body_bytes
        return error_response(
            413,
            f"the request body is larger than the {cap} bytes this daemon reads; send less, "
            "or start it with a larger --max-body",
            "BodyTooLargeError",
            connection="close",
        )


def _headers(scope: Scope) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, value in scope["headers"]:
        found.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    return found


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the app the body read already, then the real events
    (a disconnect, which a streaming answer listens for)."""
    pending = True

    async def replayed() -> Message:
        nonlocal pending
        if pending:
            pending = False
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed
