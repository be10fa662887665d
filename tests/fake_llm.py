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
    POST /v1/chat/completions                                  OpenAI format (OpenAI, Ollama)
    POST /openai/v1/chat/completions                           OpenAI format, as Groq says it
    POST /v1beta/models/{model}:streamGenerateContent?alt=sse  Gemini, streamed
    POST /v1beta/models/{model}:generateContent                Gemini, whole
    (and /v1beta/tunedModels/{model}:… for tuned Gemini models)
The OpenAI routes stream when the body says `"stream": true`, and answer in one JSON otherwise.

The replies carry what the real services send besides the text (each client must read past it):
    OpenAI   id, object, created, model, system_fingerprint, service_tier; `usage` on a whole
             reply; in a stream, `usage: null` on each chunk and a last `choices: []` chunk with
             the usage when the request asks `stream_options.include_usage` (or Reply.usage_chunk)
    Groq     the same fields, `x_groq.id` on a whole reply and on the stream's first chunk, and
             `x_groq.usage` (queue and compute times too) on the stream's finishing chunk
    Gemini   usageMetadata, modelVersion and responseId on every chunk and whole reply
Refusals (Reply.refusal): Gemini's `finishReason: "SAFETY"` candidate with safetyRatings and no
content, or `promptFeedback.blockReason` with no candidates; `finish_reason: "content_filter"` in
the OpenAI format. Bad keys (FakeLlm.keys): Gemini's 400 INVALID_ARGUMENT whose details say
API_KEY_INVALID, Groq's and OpenAI's 401 `invalid_api_key`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import socket
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

import pytest

DEFAULT_ANSWER = "Use `list.map` from gleam/list; see src/bookshelf/isbn.gleam:12."
OPENAI_PATH = "/v1/chat/completions"
GROQ_PATH = "/openai/v1/chat/completions"
GEMINI_PREFIX = "/v1beta/"
GEMINI_COLLECTIONS = ("models/", "tunedModels/")

Route = Literal["openai", "groq", "gemini-stream", "gemini"]


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
    writes: Sequence[str] | None = None
    """Send exactly these pieces of SSE text as the stream body, one flushed write each (with
    `chunk_delay` before each): how a test cuts the stream where it wants."""
    refusal: Literal["safety", "prompt"] | None = None
    """Decline to answer, after the pieces of an explicit `chunks` list if any: "safety" is a
    finish for safety (Gemini SAFETY, OpenAI content_filter), "prompt" is Gemini's blocked
    question (promptFeedback.blockReason, no candidates; the OpenAI format has no such reply
    and finishes for content_filter)."""
    usage_chunk: bool | None = None
    """End an OpenAI stream with the `choices: []` usage chunk; None: if the request asks."""
    endless: bool = False
    """Stream the pieces again and again, `chunk_delay` (its first value) before each, and
    never finish: a trickle with no end, until the client leaves or the server stops. With
    `chunks=[""]` the events carry no text at all."""

    @classmethod
    def error(
        cls, status: int, *, retry_after: str | None = None, body: str | None = None
    ) -> Reply:
        headers = {"retry-after": retry_after} if retry_after is not None else {}
        return cls(status=status, headers=headers, error_body=body)

    def pieces(self, text: str) -> list[str]:
        if not isinstance(self.chunks, int):
            return list(self.chunks)
        if self.refusal:  # a refusal sends only the pieces a test spelled out
            return []
        return split(text, self.chunks)

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
        """The model asked for; a Gemini one as its path says it, less a `models/` prefix."""
        if self.path.startswith(GEMINI_PREFIX):
            name = unquote(self.path[len(GEMINI_PREFIX) :].rsplit(":", 1)[0])
            return name.removeprefix("models/")
        return self.json.get("model") if isinstance(self.json, dict) else None

    @property
    def api_key(self) -> str | None:
        """The key as each API takes it: a bearer token, or Gemini's header (or `?key=`)."""
        if self.path.startswith(GEMINI_PREFIX):
            return self.headers.get("x-goog-api-key") or self.query.get("key")
        scheme, _, token = self.headers.get("authorization", "").partition(" ")
        return token if scheme.lower() == "bearer" and token else None

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
        self.keys: set[str] | None = None
        """The keys the server accepts, None for any; others get the service's bad-key reply,
        without taking a scripted one."""
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

    def _record(self, request: RecordedRequest) -> Reply | None:
        """Log the request and take its scripted reply; None if its key is refused."""
        with self._lock:
            self.requests.append(request)
            if self.keys is not None and request.api_key not in self.keys:
                return None
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
        if reply is None:
            self._send(*_bad_key(route, request.api_key))
            return
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
        envelope = _Envelope(route, request)
        if route == "gemini-stream" or (isinstance(body, dict) and body.get("stream")):
            self._stream(reply, envelope, text)
        else:
            self._whole(reply, envelope, text)

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
        elif route in ("openai", "groq"):
            payload = {"error": {"message": _REASONS.get(reply.status, "error"), "type": "fake"}}
        else:
            status = _GEMINI_STATUS.get(reply.status, "UNKNOWN")
            message = _REASONS.get(reply.status, "error")
            payload = {"error": {"code": reply.status, "message": message, "status": status}}
        self._send(reply.status, payload, reply.headers)

    def _whole(self, reply: Reply, envelope: _Envelope, text: str) -> None:
        if reply.malformed:
            self._send(200, b'{"choices": [{"message": ')
            return
        data = json.dumps(envelope.whole("".join(reply.pieces(text)), reply.refusal)).encode()
        if reply.cut_after is not None:  # promise the whole body, send half, hang up
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self._drop()
            return
        self._send(200, data)

    def _stream(self, reply: Reply, envelope: _Envelope, text: str) -> None:
        gemini = envelope.route.startswith("gemini")
        newline = "\r\n" if (reply.crlf if reply.crlf is not None else gemini) else "\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        for name, value in reply.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if reply.writes is not None:
            for index, piece in enumerate(reply.writes):
                delay = reply.delay_before(index)
                if delay and self.server.fake.stopping.wait(delay):
                    return
                self._chunk(piece.encode())
            self._chunk(b"")
            return
        for payload in self._events(reply, envelope, text):
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
        self, reply: Reply, envelope: _Envelope, text: str
    ) -> Iterator[tuple[float, str] | None]:
        """(delay, data) per event, then None where a scripted cut falls."""
        if reply.raw_events is not None:
            for data in reply.raw_events:
                yield 0.0, data
            return
        if reply.malformed:
            yield 0.0, '{"choices": [{"delta": {"content": "Hel'
            return
        openai = not envelope.route.startswith("gemini")
        if reply.refusal == "prompt" and not openai:
            yield 0.0, json.dumps(envelope.gemini_chunk(None, "", refusal="prompt"))
            return
        pieces = reply.pieces(text)
        if reply.endless:
            yield from _endless(reply, envelope, pieces, openai)
            return
        sent = pieces if reply.cut_after is None else pieces[: reply.cut_after]
        finished = reply.cut_after is None
        if openai:
            yield 0.0, ": keep-alive"  # comments happen in real streams
            yield 0.0, json.dumps(envelope.openai_chunk({"role": "assistant", "content": ""}))
        so_far = ""
        for index, piece in enumerate(sent):
            so_far += piece
            last = finished and not reply.refusal and index == len(sent) - 1
            if openai:
                data = envelope.openai_chunk({"content": piece})
            else:
                data = envelope.gemini_chunk(piece, so_far, finish="STOP" if last else None)
            yield reply.delay_before(index), json.dumps(data)
        if not finished:
            yield None
            return
        if not openai:
            if reply.refusal:
                yield 0.0, json.dumps(envelope.gemini_chunk(None, so_far, refusal="safety"))
            return
        reason = "content_filter" if reply.refusal else "stop"
        yield 0.0, json.dumps(envelope.openai_chunk({}, reason, so_far))
        wants = (envelope.request.json or {}).get("stream_options") or {}
        if reply.usage_chunk or (reply.usage_chunk is None and wants.get("include_usage")):
            yield 0.0, json.dumps(envelope.usage_chunk(so_far))
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


def _endless(
    reply: Reply, envelope: _Envelope, pieces: Sequence[str], openai: bool
) -> Iterator[tuple[float, str]]:
    """(delay, data) of a stream that never ends: the pieces over and over."""
    delay = max(0.01, reply.delay_before(0))  # a client that keeps up must not spin us
    so_far = ""
    for piece in itertools.cycle(pieces or [""]):
        so_far = (so_far + piece)[-1000:]
        data = envelope.openai_chunk({"content": piece}) if openai else None
        yield delay, json.dumps(data or envelope.gemini_chunk(piece, so_far))


def _route(path: str) -> Route | None:
    if path == OPENAI_PATH:
        return "openai"
    if path == GROQ_PATH:
        return "groq"
    if path.startswith(GEMINI_PREFIX) and path[len(GEMINI_PREFIX) :].startswith(GEMINI_COLLECTIONS):
        if path.endswith(":streamGenerateContent"):
            return "gemini-stream"
        if path.endswith(":generateContent"):
            return "gemini"
    return None


_SERIAL = itertools.count(1)


def _tokens(text: str) -> int:
    """A token count that is plausible and stable: one per word."""
    return len(text.split())


class _Envelope:
    """What a real reply wraps around the text: ids, model, timestamps and token counts."""

    def __init__(self, route: Route, request: RecordedRequest) -> None:
        self.route = route
        self.request = request
        self.model = request.model or "fake"
        self.serial = next(_SERIAL)
        self.created = int(time.time())
        self.prompt_tokens = max(1, len(request.raw) // 4)  # about four bytes a token

    # -- OpenAI and Groq --------------------------------------------------------------------------

    def _head(self, kind: str) -> dict[str, Any]:
        return {
            "id": f"chatcmpl-fake{self.serial:08d}",
            "object": kind,
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_fake0001",
            "service_tier": "on_demand" if self.route == "groq" else "default",
        }

    def _groq_id(self) -> str:
        return f"req_fake{self.serial:08d}"

    def openai_usage(self, text: str) -> dict[str, Any]:
        done = _tokens(text)
        usage: dict[str, Any] = {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": done,
            "total_tokens": self.prompt_tokens + done,
        }
        if self.route == "groq":  # Groq adds where the time went
            usage.update(queue_time=0.0123, prompt_time=0.0021, completion_time=0.0345)
            usage["total_time"] = 0.0366
        else:
            usage["prompt_tokens_details"] = {"cached_tokens": 0, "audio_tokens": 0}
            usage["completion_tokens_details"] = {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            }
        return usage

    def openai_chunk(
        self, delta: dict[str, Any], finish_reason: str | None = None, text: str = ""
    ) -> dict[str, Any]:
        """A stream chunk; the first (the role) and the finishing one carry Groq's extras."""
        delta = dict(delta)
        chunk = self._head("chat.completion.chunk")
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        chunk["choices"] = [choice]
        if self.route == "groq":
            if "role" in delta:
                chunk["x_groq"] = {"id": self._groq_id()}
            elif finish_reason is not None:
                chunk["x_groq"] = {"id": self._groq_id(), "usage": self.openai_usage(text)}
        else:
            if "role" in delta:
                delta["refusal"] = None
            chunk["usage"] = None  # as sent when include_usage is on; clients must skip it
            chunk["obfuscation"] = "x" * (8 - len(delta.get("content") or "") % 8)
        return chunk

    def usage_chunk(self, text: str) -> dict[str, Any]:
        """OpenAI's last chunk under `stream_options.include_usage`: no choices, the usage."""
        return {
            **self._head("chat.completion.chunk"),
            "choices": [],
            "usage": self.openai_usage(text),
        }

    # -- Gemini -----------------------------------------------------------------------------------

    def _gemini_tail(self, text: str | None) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "promptTokenCount": self.prompt_tokens,
            "totalTokenCount": self.prompt_tokens + _tokens(text or ""),
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": self.prompt_tokens}],
        }
        if text:
            usage["candidatesTokenCount"] = _tokens(text)
        return {
            "usageMetadata": usage,
            "modelVersion": self.model,
            "responseId": f"fakeResp{self.serial:08d}",
        }

    def gemini_chunk(
        self,
        piece: str | None,
        text: str,
        *,
        finish: str | None = None,
        refusal: Literal["safety", "prompt"] | None = None,
    ) -> dict[str, Any]:
        """A stream chunk or a whole reply: `piece` is its text, `text` all the text so far."""
        if refusal == "prompt":
            feedback = {"blockReason": "SAFETY", "safetyRatings": _safety_ratings()}
            return {"promptFeedback": feedback, **self._gemini_tail(None)}
        candidate: dict[str, Any] = {"index": 0}
        if refusal == "safety":  # no content at all, only why
            candidate.update(finishReason="SAFETY", safetyRatings=_safety_ratings())
        else:
            candidate["content"] = {"role": "model", "parts": [{"text": piece or ""}]}
            if finish:
                candidate["finishReason"] = finish
        return {"candidates": [candidate], **self._gemini_tail(text)}

    # -- whole replies ----------------------------------------------------------------------------

    def whole(self, text: str, refusal: Literal["safety", "prompt"] | None) -> dict[str, Any]:
        if self.route.startswith("gemini"):
            if refusal:
                return self.gemini_chunk(None, "", refusal=refusal)
            return self.gemini_chunk(text, text, finish="STOP")
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if self.route == "openai":
            message.update(refusal=None, annotations=[])
        reason = "content_filter" if refusal else "stop"
        payload = self._head("chat.completion")
        payload["choices"] = [
            {"index": 0, "message": message, "logprobs": None, "finish_reason": reason}
        ]
        payload["usage"] = self.openai_usage(text)
        if self.route == "groq":
            payload["usage_breakdown"] = None
            payload["x_groq"] = {"id": self._groq_id()}
        return payload


def _safety_ratings() -> list[dict[str, Any]]:
    harms = ["SEXUALLY_EXPLICIT", "HATE_SPEECH", "HARASSMENT", "DANGEROUS_CONTENT"]
    ratings: list[dict[str, Any]] = [
        {"category": f"HARM_CATEGORY_{harm}", "probability": "NEGLIGIBLE"} for harm in harms
    ]
    ratings[-1].update(probability="HIGH", blocked=True)
    return ratings


def _bad_key(route: Route, key: str | None) -> tuple[int, dict[str, Any]]:
    """What each service answers a key it does not know."""
    if route.startswith("gemini"):
        message = "API key not valid. Please pass a valid API key."
        error = {
            "code": 400,
            "message": message,
            "status": "INVALID_ARGUMENT",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                    "metadata": {"service": "generativelanguage.googleapis.com"},
                },
                {
                    "@type": "type.googleapis.com/google.rpc.LocalizedMessage",
                    "locale": "en-US",
                    "message": message,
                },
            ],
        }
        return 400, {"error": error}
    if route == "groq":
        message = "Invalid API Key"
        return 401, {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        }
    shown = (key or "")[:3] + "*" * 6 + (key or "")[-4:]
    message = (
        f"Incorrect API key provided: {shown}. You can find your API key in your "
        "account's settings."
    )
    error = {"message": message, "type": "invalid_request_error", "param": None}
    return 401, {"error": {**error, "code": "invalid_api_key"}}


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
