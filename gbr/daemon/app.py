"""The daemon's HTTP API (FastAPI): parse, call `Daemon`, render. OpenAPI at /openapi.json.

Bodies are the CLI's `--json` objects, so a client renders daemon answers with the same
code as local ones. Every error is one JSON object, `{"error": "<one line>", "type":
"<class>"}`: 400 for a bad value, 401 for a missing or wrong token, 403 for a foreign
`Host` or `Origin` (see gate.py), 404 for an unknown route, 409 for an index with nothing
in it yet (with `Retry-After` while the first pass runs), 413 for a body over the cap,
415 for a POST that is not `application/json`, 422 for a body that does not fit the
schema, 503 when the daemon cannot serve (its message says why). Never a 500 and never a
traceback: whatever escapes the handlers is logged and answered with a 503.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import threading
import time
import traceback
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Header, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse, StreamingResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gbr import __version__
from gbr.access import request_fields as field
from gbr.access.client import HISTORY_MAX_CHARS, HISTORY_MAX_MESSAGES, PROVIDER_ENV_HEADER
from gbr.access.requests import MAX_MODEL_CHARS, MAX_PROVIDER_CHARS
from gbr.core.answer.limits import (
    DEFAULT_DEADLINE,
    DEFAULT_MAX_ANSWER,
    MAX_DEADLINE,
    MAX_MAX_ANSWER,
)
from gbr.core.answer.oracle import AskOptions, AskOutcome
from gbr.core.errors import (
    ConfigError,
    DaemonError,
    GbrError,
    IndexEmptyError,
    ProviderError,
    StoreError,
    SupervisionError,
)
from gbr.core.llm.base import Message as ChatMessage
from gbr.core.rank.priors import DEFAULT_TEST_POLICY
from gbr.core.rank.search import Filter
from gbr.core.records import Hit, Mode
from gbr.core.telemetry import log
from gbr.daemon.gate import Gate, HttpPolicy, error_response
from gbr.daemon.graph_routes import add_graph_routes
from gbr.daemon.metrics import CONTENT_TYPE, Metrics
from gbr.daemon.oracles import parse_provider_env
from gbr.daemon.service import AskPlan, Daemon
from gbr.daemon.web_routes import add_web_routes

KEEPALIVE_SECONDS = 15.0  # an SSE comment this often keeps proxies and clients from timing out
FIRST_PASS_RETRY_SECONDS = 5
# The asking client's provider variables (gbr.daemon.oracles): its settings, not the daemon's.
ProviderEnv = Annotated[
    str | None,
    Header(
        alias=PROVIDER_ENV_HEADER,
        max_length=20_000,
        description="A JSON object of the client's provider variables (GROQ_API_KEY, "
        "GBR_OPENAI_BASE_URL, ...): the answer uses them instead of the daemon's own.",
    ),
]


class ErrorBody(BaseModel):
    error: str = Field(description="One line, ending with what to do about it.")
    type: str = Field(description="The error's class, e.g. ConfigError or ValidationError.")


class SearchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: field.QueryText
    k: field.SearchK = 10
    mode: Mode = "hybrid"
    path: field.PathFilter = None
    module: field.ModuleFilter = None
    kinds: field.KindsFilter = []
    tests: field.Tests = DEFAULT_TEST_POLICY


class IndexRequest(BaseModel):
    """No options yet; the body is `{}`, so that every POST is a JSON object (see gate.py)."""

    model_config = ConfigDict(extra="forbid")


class EmbeddedBody(BaseModel):
    chunks: int
    of: int


class SearchResponse(BaseModel):
    query: str
    mode: str
    results: list[Hit]  # the record itself: its fields are the schema's
    hint: str | None = Field(None, description="Why a path or module filter found nothing.")
    embedded: EmbeddedBody | None = Field(
        None, description="Chunks with a vector (dense search sees those), of all chunks."
    )


class HistoryMessage(BaseModel):
    """One earlier message of a chat; the system prompt is the daemon's, never the client's."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["user", "assistant"]
    content: str = Field(min_length=1, max_length=HISTORY_MAX_CHARS)


class AskRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: field.QuestionText
    k: field.AskK = 8
    budget: field.Budget = 3000
    rerank: bool = False
    hyde: bool | None = None
    dry_run: bool = False
    tests: field.Tests = DEFAULT_TEST_POLICY
    graph_context: bool = Field(
        AskOptions().graph_context,
        description="Add the signatures of what the chosen chunks call or use.",
    )
    deadline: float = Field(
        DEFAULT_DEADLINE,
        gt=0,
        le=MAX_DEADLINE,
        description="Seconds for the whole answer; past it the answer stops with an error.",
    )
    max_answer_bytes: int = Field(
        DEFAULT_MAX_ANSWER,
        ge=1,
        le=MAX_MAX_ANSWER,
        description="Largest answer (UTF-8 bytes); past it the answer stops with an error.",
    )
    provider: field.ProviderName = None
    model: field.ModelName = None
    stream: bool = Field(True, description="Server-sent events: token..., answer[, error].")
    history: list[HistoryMessage] = Field(
        default_factory=list,
        max_length=HISTORY_MAX_MESSAGES,
        description="Earlier turns of a conversation, oldest first; the newest whole turns "
        "that fit half the budget are sent with the question. With a history, the answer "
        "also says `history_sent` and `history_trimmed` (messages).",
    )


class LlmResponse(BaseModel):
    provider: str | None = Field(description="Resolved name; null when none is configured.")
    model: str | None
    configured: bool = Field(description="False when the provider lacks its key.")
    error: str | None = Field(description="Why not configured: what to set.")


class HealthResponse(BaseModel):
    status: str  # "ok", or "degraded" while a part is down (see Daemon.health)
    pid: int
    version: str
    degraded: list[dict[str, str]] = []  # each part down: component, state, reason


_STATUS_CODES: list[tuple[type[GbrError], int]] = [
    (ConfigError, 400),
    (IndexEmptyError, 409),
    (StoreError, 503),
    (SupervisionError, 503),
    (DaemonError, 503),
    (ProviderError, 503),
]
_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": text}
    for code, text in [
        (400, "A bad value (an empty query, an unknown provider)."),
        (401, "Missing or wrong bearer token."),
        (403, "A `Host` or `Origin` this daemon does not answer to (a web page)."),
        (409, "The index holds nothing yet, or is being built (`Retry-After`)."),
        (413, "The body is larger than the daemon reads (`serve --max-body`)."),
        (415, "A POST whose `Content-Type` is not `application/json`."),
        (422, "The body does not fit the schema, or is not JSON."),
        (503, "The daemon cannot serve this now; the message says why."),
    ]
}


class AuthError(Exception):
    """A request without the bearer token this daemon was started with."""


def create_app(daemon: Daemon, policy: HttpPolicy | None = None) -> FastAPI:
    """The app over `daemon`; `policy` defaults to loopback and the host it binds."""
    app = FastAPI(
        title="gbr daemon",
        version=__version__,
        description="Search and ask a Gleam package that `gleambrctl serve` keeps indexed.",
        docs_url=None,  # the docs pages load scripts from a CDN; the spec is at /openapi.json
        redoc_url=None,
    )
    token = _TokenCheck(daemon.config.token)
    _install_error_handlers(app, token)
    auth = [Depends(token)]

    @app.get("/health", response_model=HealthResponse, tags=["daemon"])
    async def health() -> dict[str, Any]:
        """Liveness, without a token: clients check the pid in `daemon.json` against it."""
        return daemon.health()

    @app.get("/status", dependencies=auth, responses=_ERRORS, tags=["daemon"])
    def status() -> dict[str, Any]:
        """`status --json`, plus pid, uptime, watcher, restarts and queue depth."""
        return daemon.status()

    @app.post(
        "/search",
        dependencies=auth,
        response_model=SearchResponse,
        response_model_exclude_none=True,  # `hint` only when there is one, as `search --json`
        responses=_ERRORS,
        tags=["query"],
    )
    def search(body: SearchRequest) -> Any:
        """`search --json`: hybrid, dense or BM25 hits."""
        where = Filter(
            path=body.path, module=body.module, kinds=tuple(body.kinds), tests=body.tests
        )
        try:
            return daemon.search(body.query, body.k, body.mode, where).as_dict()
        except (IndexEmptyError, StoreError) as exc:
            if daemon.first_pass.is_set():
                raise
            # Until the first pass ends, the index is empty or lacks its full-text part.
            log().info("search_before_first_pass", error=_one_line(exc))
            return error_response(
                409,
                f"the index is being built: the daemon is indexing {daemon.config.root} "
                f"(its first pass); try again in a moment",
                IndexEmptyError.__name__,
                **{"retry-after": str(FIRST_PASS_RETRY_SECONDS)},
            )

    @app.post(
        "/ask",
        dependencies=auth,
        responses={
            **_ERRORS,
            200: {
                "description": 'With `stream`, server-sent events: `context` (`{"chunks"}`, '
                "the chunks sent, once retrieval is done), `token` (data: a JSON "
                "string), then `answer` (the `ask --json` object), then `error` "
                '(`{"error", "exit_code"}`) when the provider is missing or failed. Without '
                "`stream`, the `ask --json` object (with `exit_code` when it failed).",
                "content": {"text/event-stream": {}, "application/json": {}},
            },
        },
        tags=["query"],
    )
    def ask(body: AskRequest, provider_env: ProviderEnv = None) -> Any:
        """Retrieve, assemble a cited context, ask the LLM (`ask --json`)."""
        options = AskOptions(
            max_chunks=body.k,
            budget=body.budget,
            rerank=body.rerank,
            hyde=body.hyde,
            dry_run=body.dry_run,
            tests=body.tests,
            graph_context=body.graph_context,
            deadline=body.deadline,
            max_answer_bytes=body.max_answer_bytes,
        )
        history = [ChatMessage(m.role, m.content) for m in body.history]
        client_env = parse_provider_env(provider_env)
        plan = daemon.plan_ask(
            body.question, options, body.provider, body.model, history, client_env
        )
        if not body.stream:
            outcome = daemon.run_ask(plan)
            data = dict(outcome.answer)
            if outcome.error is not None:
                data["exit_code"] = outcome.exit_code
            return data
        return StreamingResponse(
            _ask_events(daemon, plan),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )

    @app.get(
        "/llm", dependencies=auth, response_model=LlmResponse, responses=_ERRORS, tags=["query"]
    )
    def llm(
        provider: Annotated[str | None, Query(max_length=MAX_PROVIDER_CHARS)] = None,
        model: Annotated[str | None, Query(max_length=MAX_MODEL_CHARS)] = None,
        provider_env: ProviderEnv = None,
    ) -> dict[str, Any]:
        """The provider and model an /ask with these names (and provider settings) would
        use; calls no LLM. A missing key is `configured: false`; an unknown name is a 400.
        """
        return daemon.check_llm(provider, model, parse_provider_env(provider_env))

    @app.post("/index", dependencies=auth, responses=_ERRORS, tags=["daemon"])
    def index(body: IndexRequest) -> dict[str, Any]:
        """A full pass, after the batch in progress; returns `index --json`. Send `{}`."""
        return daemon.index_all().as_dict()

    @app.get(
        "/metrics",
        dependencies=auth,
        response_class=PlainTextResponse,
        responses=_ERRORS,
        tags=["daemon"],
    )
    def metrics() -> PlainTextResponse:
        """Prometheus text format: files, chunks, failures, restarts, queues, latencies."""
        return PlainTextResponse(daemon.metrics.render(), media_type=CONTENT_TYPE)

    add_graph_routes(app, daemon, auth, _ERRORS)
    add_web_routes(app, daemon, auth, _ERRORS)
    posts = [r.path for r in app.routes if isinstance(r, APIRoute) and "POST" in (r.methods or ())]
    policy = policy or HttpPolicy.for_bind(daemon.config.host)
    app.add_middleware(Gate, policy=policy, json_posts=posts)
    app.add_middleware(_Guard, metrics=daemon.metrics)  # outermost: it counts refusals too
    return app


class _TokenCheck:
    """The bearer-token dependency of the routes that need one; the error handlers ask it too.

    FastAPI reads and parses a body before it runs a route's dependencies, so a bad body
    would otherwise be judged (422) before the missing token: the token must come first.
    """

    def __init__(self, token: str | None) -> None:
        self.expected = token.encode() if token else None

    async def __call__(self, request: Request) -> None:
        if not self.allows(request):
            raise AuthError()

    def allows(self, request: Request) -> bool:
        if self.expected is None:
            return True
        # The scheme is case-insensitive (RFC 9110): `bearer x` is `Bearer x`.
        scheme, _, given = request.headers.get("authorization", "").strip().partition(" ")
        ok = hmac.compare_digest(given.strip().encode(), self.expected)
        return ok and scheme.lower() == "bearer"

    def refuses(self, request: Request) -> bool:
        """The matched route needs the token and this request lacks it."""
        route = request.scope.get("route")
        guarded = any(dep.dependency is self for dep in getattr(route, "dependencies", ()))
        return guarded and not self.allows(request)


def _sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


async def _ask_events(daemon: Daemon, plan: AskPlan) -> AsyncIterator[str]:
    """The answer as server-sent events, produced by the Oracle actor on its own thread.

    When the client goes away, Starlette cancels this generator at its `await`, and the
    `finally` sets `cancel`, which stops the LLM stream at its next delta: no request keeps
    running for nobody (a chat's Ctrl-C). It is async for that reason: Starlette runs a
    plain generator in a worker thread and never closes it, so its `finally` would wait
    for the garbage collector.
    """
    loop = asyncio.get_running_loop()
    inbox: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    cancel = threading.Event()

    def put(item: tuple[str, Any]) -> None:
        """From the answering threads into the event loop (gone only at shutdown)."""
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(inbox.put_nowait, item)

    def work() -> None:
        try:
            outcome = daemon.run_ask(
                plan,
                lambda d: put(("token", d)),
                cancel,
                on_context=lambda answer: put(("context", answer.chunks_as_dicts())),
            )
            put(("done", outcome))
        except GbrError as exc:
            put(("failed", exc))
        except Exception as exc:  # reported to the client as an event, and logged
            log().error("ask_crashed", error=f"{type(exc).__name__}: {exc}")
            put(("failed", exc))

    threading.Thread(target=work, name="gbr-ask", daemon=True).start()
    try:
        while True:
            try:
                kind, item = await asyncio.wait_for(inbox.get(), KEEPALIVE_SECONDS)
            except TimeoutError:
                yield ": keep-alive\n\n"
                continue
            if kind == "token":
                yield _sse("token", item)
            elif kind == "context":
                yield _sse("context", {"chunks": item})
            elif kind == "done":
                outcome: AskOutcome = item
                yield _sse("answer", outcome.answer)
                if outcome.error is not None:
                    yield _sse("error", {"error": outcome.error, "exit_code": outcome.exit_code})
                return
            else:
                code = item.exit_code if isinstance(item, GbrError) else 1
                yield _sse("error", {"error": _one_line(item), "exit_code": code})
                return
    finally:
        cancel.set()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _install_error_handlers(app: FastAPI, token: _TokenCheck) -> None:
    @app.exception_handler(GbrError)
    async def gbr_error(request: Request, exc: GbrError) -> JSONResponse:
        status = next((code for cls, code in _STATUS_CODES if isinstance(exc, cls)), 503)
        return error_response(status, _one_line(exc), type(exc).__name__)

    @app.exception_handler(AuthError)
    async def auth_error(request: Request, exc: AuthError) -> JSONResponse:
        return _refused()

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        if token.refuses(request):
            return _refused()
        return error_response(422, describe_validation(exc.errors()), "ValidationError")

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            message = f"no such endpoint {request.method} {request.url.path}; see /openapi.json"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        elif token.refuses(request):  # a body FastAPI could not read, sent without the token
            return _refused()
        elif isinstance(exc.__cause__, UnicodeDecodeError):  # FastAPI's "error parsing the body"
            message = "the body is not valid JSON (it is not UTF-8 text); send a JSON object"
            return error_response(422, message, "ValidationError")
        else:
            message = str(exc.detail)
        status = exc.status_code if 400 <= exc.status_code < 500 else 503
        return error_response(status, message, "HTTPException", **(exc.headers or {}))


def _refused() -> JSONResponse:
    return error_response(
        401,
        "missing or wrong token; send the header `Authorization: Bearer <token>` with the "
        "token the daemon was started with (GBR_TOKEN)",
        "AuthError",
        **{"www-authenticate": "Bearer"},
    )


def describe_validation(errors: Any) -> str:
    """The first schema error as one line a person can act on: `k: must be >= 1`."""
    if not errors:
        return "the request body does not fit the schema; see /openapi.json"
    first = errors[0]
    kind = first.get("type", "")
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
    if kind == "json_invalid":
        reason = (first.get("ctx") or {}).get("error", "")
        return f"the body is not valid JSON ({reason}); send a JSON object"
    if kind == "missing" and not where:
        return "the request body is missing; send a JSON object (see /openapi.json)"
    if kind.endswith("_type") and not where:  # a nested object's type error names its field
        return "the body must be a JSON object; see /openapi.json"
    if kind == "extra_forbidden":
        return f"unknown field {where!r}; see /openapi.json for the fields this endpoint takes"
    message = first.get("msg", "invalid value")
    more = f" (and {len(errors) - 1} more problems)" if len(errors) > 1 else ""
    return f"{where or 'body'}: {message}{more}"


class _Guard:
    """Outermost: time and count every request, and turn an escaped error into a 503.

    Starlette answers an unhandled exception with a 500 and then re-raises it to the server,
    which prints a traceback; catching it here keeps both promises (no 500, JSON logs only).
    """

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 503
        sent_start = False

        async def watch(message: Message) -> None:
            nonlocal status, sent_start
            if message["type"] == "http.response.start":
                status = int(message["status"])
                sent_start = True
            await send(message)

        try:
            await self.app(scope, receive, watch)
        except Exception as exc:
            log().error(
                "request_failed",
                method=scope.get("method"),
                path=scope.get("path"),
                error=f"{type(exc).__name__}: {exc}",
                traceback=traceback.format_exc(limit=20),
            )
            if not sent_start:
                status = 503
                response = error_response(
                    503,
                    f"the daemon failed on this request ({type(exc).__name__}); it is logged "
                    "in .gbr/events.jsonl; try again, or restart the daemon",
                    "InternalError",
                )
                await response(scope, receive, send)
        finally:
            route = scope.get("route")
            label = getattr(route, "path", None) or "unmatched"
            elapsed = time.perf_counter() - started
            self.metrics.inc(
                "gbr_http_requests_total", route=label, method=scope["method"], status=str(status)
            )
            self.metrics.observe("gbr_http_request_seconds", elapsed, route=label)
