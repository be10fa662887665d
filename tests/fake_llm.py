"""A fake LLM server on 127.0.0.1 that speaks the OpenAI/Groq and Gemini wire formats.

Real HTTP on a real socket (port 0, a background thread), so tests exercise the providers' whole
stack: httpx, chunked transfer, SSE framing, keep-alive, timeouts and retries. Each test scripts
the replies it needs, in order; when the script runs out, the server answers with
`respond(request_json)` if set, else `default_answer`. Every request is recorded.

    def test_something(fake_llm: FakeLlm) -> None:
        fake_llm.script(Reply.error(429, retry_after="2"), Reply("Hello there", chunks=3))
        ...
        assert fake_llm.requests[0].headers["authorization"] == "Bearer test-key"

Routes:
    POST /v1/chat/completions, /openai/v1/chat/completions    OpenAI format (Ollama, Groq)
    POST /v1beta/models/{model}:streamGenerateContent?alt=sse  Gemini, streamed
    POST /v1beta/models/{model}:generateContent                Gemini, whole
The OpenAI routes stream when the body says `"stream": true`, and answer in one JSON otherwise.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

import pytest

DEFAULT_ANSWER = "Use `list.map` from gleam/list; see src/bookshelf/isbn.gleam:12."
OPENAI_PATHS = ("/v1/chat/completions", "/openai/v1/chat/completions")
GEMINI_PREFIX = "/v1beta/models/"

Route = Literal["openai", "gemini-stream", "gemini"]


def split(text: str, n: int) -> list[str]:
    """`text` in `n` nearly equal pieces (fewer if it is shorter) that join back exactly."""
    n = max(1, min(n, len(text)))
    return [text[i * len(text) // n : (i + 1) * len(text) // n] for i in range(n)]


@dataclass(frozen=True)
class Reply:
    """One scripted response. Fields combine: a status with headers, a delay with a cut."""

    text: str | None = None
    """The answer; None means `respond(request_json)` if set, else the default answer."""
    chunks: int | Sequence[str] = 4
    """How many stream events carry the text, or the pieces themselves (then `text` is ignored)."""
    status: int = 200
    headers: Mapping[str, str] = field(default_factory=dict)
    error_body: str | None = None
    """Body of a non-200 reply; None gives a JSON error in the provider's own shape."""
    first_byte_delay: float = 0.0
    """Seconds before the status line: a slow server."""
    chunk_delay: float | Sequence[float] = 0.0
    """Seconds before each stream event; a sequence gives one delay per piece."""
    malformed: bool = False
    """Send a stream event (or a whole body) that is not JSON."""
    raw_events: Sequence[str] | None = None
    """Stream exactly these `data:` payloads (then end the body), instead of an answer."""
    cut_after: int | None = None
    """Stream only this many pieces, and never the end marker ([DONE] or finishReason)."""
    cut: Literal["drop", "clean"] = "drop"
    """drop: close the socket mid-body; clean: end the HTTP body properly, marker still missing."""
    crlf: bool | None = None
    """SSE line ends; None: CRLF for Gemini (as the real API sends), LF for the OpenAI format."""

    @classmethod
    def error(
        cls, status: int, *, retry_after: str | None = None, body: str | None = None
    ) -> Reply:
        headers = {"retry-after": retry_after} if retry_after is not None else {}
        return cls(status=status, headers=headers, error_body=body)

    def pieces(self, text: str) -> list[str]:
        if isinstance(self.chunks, int):
            return split(text, self.chunks)
        return list(self.chunks)

    def delay_before(self, index: int) -> float:
        if isinstance(self.chunk_delay, int | float):
            return float(self.chunk_delay)
        return self.chunk_delay[index] if index < len(self.chunk_delay) else 0.0


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    """Without the query string."""
    query: dict[str, str]
    headers: dict[str, str]
    """Names in lower case."""
    json: Any
    """The parsed body, or None when it was not JSON."""
    raw: bytes

    @property
    def model(self) -> str | None:
        if self.path.startswith(GEMINI_PREFIX):
            return unquote(self.path[len(GEMINI_PREFIX) :].rsplit(":", 1)[0])
        return self.json.get("model") if isinstance(self.json, dict) else None

    @property
    def messages(self) -> list[tuple[str, str]]:
        """(role, text) pairs in either format, roles spelled the OpenAI way."""
        body = self.json if isinstance(self.json, dict) else {}
        if "messages" in body:
            return [(m["role"], m["content"]) for m in body["messages"]]
        out = [("system", p["text"]) for p in body.get("systemInstruction", {}).get("parts", [])]
        for content in body.get("contents", []):
            role = "assistant" if content.get("role") == "model" else "user"
            out.extend((role, p["text"]) for p in content.get("parts", []))
        return out

    @property
    def prompt(self) -> str:
        """All message text, joined: handy for `in` assertions."""
        return "\n".join(text for _, text in self.messages)


class FakeLlm:
    """The server and its script; use as a context manager or through the `fake_llm` fixture."""

    def __init__(self, default_answer: str = DEFAULT_ANSWER) -> None:
        self.default_answer = default_answer
        self.respond: Callable[[Any], str] | None = None
        self.requests: list[RecordedRequest] = []
        self.errors: list[str] = []
        """Tracebacks of `respond` failures (each also answered with a 500)."""
        self._script: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.stopping = threading.Event()
        self._server = _Server(("127.0.0.1", 0), _Handler, self)
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
        )

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> FakeLlm:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()  # wakes handlers sleeping in a scripted delay
        self._server.shutdown()
        self._server.close_connections()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeLlm:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- addresses --------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def openai_base_url(self) -> str:
        return f"{self.url}/v1"

    @property
    def groq_base_url(self) -> str:
        return f"{self.url}/openai/v1"

    @property
    def gemini_base_url(self) -> str:
        return self.url

    def env(self, provider: str, key: str | None = "test-key") -> dict[str, str]:
        """Environment variables that point `provider` (groq, gemini or openai) at this server."""
        names = {
            "groq": ("GBR_GROQ_BASE_URL", self.groq_base_url, "GROQ_API_KEY"),
            "gemini": ("GBR_GEMINI_BASE_URL", self.gemini_base_url, "GEMINI_API_KEY"),
            "openai": ("GBR_OPENAI_BASE_URL", self.openai_base_url, "GBR_OPENAI_API_KEY"),
        }
        url_var, url, key_var = names[provider]
        env = {url_var: url}
        if key is not None:
            env[key_var] = key
        return env

    # -- script -----------------------------------------------------------------------------------

    def script(self, *replies: Reply | str) -> None:
        """Queue replies, one per request in arrival order; a str is `Reply(text)`."""
        with self._lock:
            self._script.extend(Reply(r) if isinstance(r, str) else r for r in replies)

    def _record(self, request: RecordedRequest) -> Reply:
        with self._lock:
            self.requests.append(request)
            return self._script.popleft() if self._script else Reply()

    def _text(self, reply: Reply, request: RecordedRequest) -> str:
        if not isinstance(reply.chunks, int):
            return "".join(reply.chunks)
        if reply.text is not None:
            return reply.text
        if self.respond is not None:
            return self.respond(request.json)
        return self.default_answer


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a handler stuck in a delay never blocks shutdown

    def __init__(self, address: tuple[str, int], handler: type, fake: FakeLlm) -> None:
        super().__init__(address, handler)
        self.fake = fake
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    def track(self, conn: socket.socket, alive: bool) -> None:
        with self._connections_lock:
            if alive:
                self._connections.add(conn)
            else:
                self._connections.discard(conn)

    def close_connections(self) -> None:
        """End keep-alive connections, so no handler thread outlives the test."""
        with self._connections_lock:
            connections = list(self._connections)
        for conn in connections:
            with contextlib.suppress(OSError):  # already closed by the client
                conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out or gave up closes its socket: expected here, not a failure.
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive and chunked bodies, like the real APIs
    timeout = 10  # an idle keep-alive connection ends on its own
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def setup(self) -> None:
        super().setup()
        # Headers and body go out as separate small writes; without this, Nagle's algorithm
        # meets the client's delayed ACK and every reply stalls for about 40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.track(self.connection, alive=True)

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.server.track(self.connection, alive=False)

    def do_POST(self) -> None:
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("content-length") or 0))
        parts = urlsplit(self.path)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        request = RecordedRequest(
            method="POST",
            path=parts.path,
            query=dict(parse_qsl(parts.query)),
            headers={k.lower(): v for k, v in self.headers.items()},
            json=body,
            raw=raw,
        )
        route = _route(parts.path)
        if route is None:
            self._send(404, {"error": {"message": f"no route for {parts.path}"}})
            return
        reply = fake._record(request)
        if reply.first_byte_delay and fake.stopping.wait(reply.first_byte_delay):
            return
        if reply.status != 200:
            self._send_error(reply, route)
            return
        try:
            text = fake._text(reply, request)
        except Exception:
            fake.errors.append(traceback.format_exc())
            self._send(500, {"error": {"message": "respond() raised; see fake_llm.errors"}})
            return
        if route == "gemini-stream" or (isinstance(body, dict) and body.get("stream")):
            self._stream(reply, route, text, request.model or "fake")
        else:
            self._whole(reply, route, text, request.model or "fake")

    # -- replies ----------------------------------------------------------------------------------

    def _send(self, status: int, payload: Any, headers: Mapping[str, str] | None = None) -> None:
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, reply: Reply, route: Route) -> None:
        if reply.error_body is not None:
            payload: Any = reply.error_body.encode()
        elif route == "openai":
            payload = {"error": {"message": _REASONS.get(reply.status, "error"), "type": "fake"}}
        else:
            status = _GEMINI_STATUS.get(reply.status, "UNKNOWN")
            message = _REASONS.get(reply.status, "error")
            payload = {"error": {"code": reply.status, "message": message, "status": status}}
        self._send(reply.status, payload, reply.headers)

    def _whole(self, reply: Reply, route: Route, text: str, model: str) -> None:
        if reply.malformed:
            self._send(200, b'{"choices": [{"message": ')
            return
        if route == "openai":
            payload: dict[str, Any] = {
                "id": "chatcmpl-fake",
                "object": "chat.completion",
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
            }
        else:
            payload = {"candidates": [_gemini_candidate(text, finished=True)]}
        data = json.dumps(payload).encode()
        if reply.cut_after is not None:  # promise the whole body, send half, hang up
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self._drop()
            return
        self._send(200, data)

    def _stream(self, reply: Reply, route: Route, text: str, model: str) -> None:
        newline = "\r\n" if (reply.crlf if reply.crlf is not None else route != "openai") else "\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        for payload in self._events(reply, route, text, model):
            if payload is None:  # the scripted cut
                if reply.cut == "drop":
                    self._drop()
                else:
                    self._chunk(b"")
                return
            delay, data = payload
            if delay and self.server.fake.stopping.wait(delay):
                return
            if data.startswith(":"):
                lines = [data]  # a comment, sent as is
            else:
                lines = [f"data: {line}" for line in data.split("\n")]
            self._chunk((newline.join(lines) + newline * 2).encode())
        self._chunk(b"")

    def _events(
        self, reply: Reply, route: Route, text: str, model: str
    ) -> Iterator[tuple[float, str] | None]:
        """(delay, data) per event, then None where a scripted cut falls."""
        if reply.raw_events is not None:
            for data in reply.raw_events:
                yield 0.0, data
            return
        if reply.malformed:
            yield 0.0, '{"choices": [{"delta": {"content": "Hel'
            return
        pieces = reply.pieces(text)
        sent = pieces if reply.cut_after is None else pieces[: reply.cut_after]
        finished = reply.cut_after is None
        if route == "openai":
            yield 0.0, ": keep-alive"  # comments happen in real streams
            yield 0.0, json.dumps(_openai_chunk(model, {"role": "assistant", "content": ""}))
        for index, piece in enumerate(sent):
            last = finished and index == len(sent) - 1
            if route == "openai":
                data = _openai_chunk(model, {"content": piece})
            else:
                data = {
                    "candidates": [_gemini_candidate(piece, finished=last)],
                    "modelVersion": model,
                }
            yield reply.delay_before(index), json.dumps(data)
        if not finished:
            yield None
            return
        if route == "openai":
            yield 0.0, json.dumps(_openai_chunk(model, {}, finish_reason="stop"))
            yield 0.0, "[DONE]"

    def _chunk(self, data: bytes) -> None:
        """One HTTP/1.1 chunk; the empty chunk ends the body."""
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _drop(self) -> None:
        """Hang up mid-body, as a crashed proxy or a dropped connection does."""
        self.close_connection = True
        self.wfile.flush()
        self.connection.shutdown(socket.SHUT_RDWR)


def _route(path: str) -> Route | None:
    if path in OPENAI_PATHS:
        return "openai"
    if path.startswith(GEMINI_PREFIX):
        if path.endswith(":streamGenerateContent"):
            return "gemini-stream"
        if path.endswith(":generateContent"):
            return "gemini"
    return None


def _openai_chunk(
    model: str, delta: dict[str, str], finish_reason: str | None = None
) -> dict[str, Any]:
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def _gemini_candidate(text: str, *, finished: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {
        "content": {"role": "model", "parts": [{"text": text}]},
        "index": 0,
    }
    if finished:
        candidate["finishReason"] = "STOP"
    return candidate


_REASONS = {
    400: "Bad request",
    401: "Invalid API Key",
    403: "Permission denied",
    404: "Model not found",
    429: "Rate limit reached; please try again later",
    500: "Internal server error",
    503: "Service unavailable",
}
_GEMINI_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


@pytest.fixture
def fake_llm() -> Iterator[FakeLlm]:
    """A fresh fake LLM server for one test."""
    with FakeLlm() as server:
        yield server
