"""The web page: `/` and its static files, and the two JSON routes only the page needs.

The page is plain HTML, CSS and JavaScript modules shipped in gbr/daemon/web/, served
without a token (they hold no index data) behind the same Host/Origin gate as every route,
with a Content-Security-Policy that allows scripts and styles from the daemon only: no
inline script, no inline style, no other host. Everything it shows comes from the token-
guarded API, and it writes index data into the page as text, never as HTML.

`/web/file` reads a file of the index from disk and answers it highlighted (see
gbr.core.parse.highlight), with the names the code graph knows as links; `/web/examples` gives
the empty page a few queries drawn from the package itself; `/web/state` is what the page's
state bar shows, polled every few seconds, so it reads only counts: `/status` also lists the
dropped files and the last run, which at 10k chunks made it the slowest call of a first load.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from fastapi.params import Depends
from fastapi.responses import Response

from gbr.core.errors import ConfigError, IndexEmptyError
from gbr.core.parse.highlight import Link, lines, spans
from gbr.core.store.facade import embedded_json
from gbr.daemon.gate import error_response

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
PAGE_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",  # a `?token=` link must not leak through a Referer
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
MAX_FILE_BYTES = 4_000_000  # a larger file is not drawn: the page would choke before us
EXAMPLE_NAMES = 4
BOM = b"\xef\xbb\xbf"

IndexedPath = Annotated[
    str,
    Query(min_length=1, max_length=4096, description="A file of the index, as search shows it."),
]


def static_files() -> dict[str, tuple[bytes, str, str]]:
    """{name: (bytes, content type, entity tag)} of the page's files, read once at start."""
    folder = resources.files("gbr.daemon") / "web"
    found: dict[str, tuple[bytes, str, str]] = {}
    for entry in folder.iterdir():
        suffix = PurePosixPath(entry.name).suffix
        if entry.is_file() and suffix in _TYPES:
            body = entry.read_bytes()
            tag = f'"{hashlib.sha256(body).hexdigest()[:20]}"'
            found[entry.name] = (body, _TYPES[suffix], tag)
    return found


def add_web_routes(app: FastAPI, daemon: Any, auth: list[Depends], errors: dict[Any, Any]) -> None:
    """Add the page and its routes; called by create_app before the gate learns the routes."""
    files = static_files()

    # async: a dict lookup needs no trip through the thread pool, which searches may fill.
    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    async def page() -> Response:
        body, kind, _ = files["index.html"]
        return Response(body, media_type=kind, headers=PAGE_HEADERS)

    @app.api_route("/static/{name}", methods=["GET", "HEAD"], include_in_schema=False)
    async def static(name: str, request: Request) -> Response:
        if name == "index.html" or name not in files:
            return error_response(404, f"no such file {name[:100]!r} in the page", "NotFound")
        body, kind, tag = files[name]
        # A browser keeps the file and asks each load whether it changed (a new gbr): the
        # answer is then an empty 304, not the file again.
        headers = {**PAGE_HEADERS, "cache-control": "no-cache", "etag": tag}
        if tag in request.headers.get("if-none-match", ""):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type=kind, headers=headers)

    not_indexed: dict[int | str, dict[str, Any]] = {
        404: {"description": "The index holds no such file (search shows paths)."}
    }

    @app.get("/web/file", dependencies=auth, responses={**errors, **not_indexed}, tags=["web"])
    def file(path: IndexedPath) -> Any:
        """A file of the index, whole: each line as `[text, class, target?]` segments, and
        the file's definitions. `target` is a name for `/graph/*`."""
        if daemon.store is None:
            raise IndexEmptyError("the index is not open yet; try again in a moment")
        return file_view(daemon.store.con, Path(daemon.config.root), path)

    @app.get("/web/state", dependencies=auth, responses=errors, tags=["web"])
    def state() -> dict[str, Any]:
        """`/health`, plus files, chunks, vectors and whether a pass runs: the state bar."""
        return {**daemon.health(), **index_state(daemon)}

    @app.get("/web/examples", dependencies=auth, responses=errors, tags=["web"])
    def examples() -> dict[str, Any]:
        """A few public function names and one doc line of the package, as example queries."""
        if daemon.store is None:
            return {"queries": []}
        return {"queries": example_queries(daemon.store.con)}


def index_state(daemon: Any) -> dict[str, Any]:
    """The counts the state bar shows, with `indexing` ("full", "changes" or null) and
    `ready` (false until the first pass is done); zeros before the index is open."""
    store = daemon.store
    files = chunks = 0
    embedded = {"chunks": 0, "of": 0}
    if store is not None:
        counts = store.counts()
        files, chunks = counts["files_ok"] + counts["files_partial"], counts["chunks"]
        embedded = embedded_json(store.coverage())
    return {
        "files": files,
        "chunks": chunks,
        "embedded": embedded,
        "indexing": daemon.indexing,
        "ready": daemon.first_pass.is_set(),
    }


def checked_path(con: Any, root: Path, rel: str) -> tuple[str, Path]:
    """The index's key and the file for `rel`, when it is a file of the index inside `root`.

    A path that is absolute, has `..` or leads outside by a link is a ConfigError (400); one
    the index does not hold is a FileNotFoundError (404): the page shows only indexed files.
    """
    pure = PurePosixPath(rel)
    if "\\" in rel or "\0" in rel or pure.is_absolute() or ".." in pure.parts:
        raise ConfigError(
            f"{rel[:200]!r} is not a path inside the package; give one as search shows it, "
            "like src/app.gleam"
        )
    row = con.execute(
        "SELECT status FROM files WHERE path = ? AND status <> 'failed'", [str(pure)]
    ).fetchone()
    key = str(pure)
    if row is None:
        raise FileNotFoundError(f"{rel[:200]!r} is not a file of the index; search for it first")
    base = root.resolve()
    full = (base / pure).resolve()
    if not full.is_relative_to(base):
        raise ConfigError(f"{rel[:200]!r} leads outside the package (a link); it is not shown")
    return key, full


def file_view(con: Any, root: Path, rel: str) -> Any:
    try:
        rel, full = checked_path(con, root, rel)
    except FileNotFoundError as exc:
        return error_response(404, str(exc), "NotFound")
    try:
        content = full.read_bytes()
    except OSError as exc:
        return error_response(
            404, f"{rel[:200]!r} cannot be read now ({exc.strerror or exc}); re-index", "NotFound"
        )
    if len(content) > MAX_FILE_BYTES:
        raise ConfigError(f"{rel[:200]!r} is larger than the page draws ({MAX_FILE_BYTES} bytes)")
    content = content.removeprefix(BOM)
    module_row = con.execute("SELECT module FROM files WHERE path = ?", [rel]).fetchone()
    from gbr.core.parse.chunker import new_parser

    tree = new_parser().parse(content)
    links = [
        Link(line, col, target)
        for line, col, target in con.execute(
            "SELECT line, col, target_module || '.' || target_name FROM graph_refs "
            "WHERE path = ? UNION ALL SELECT line, col, module || '.' || name "
            "FROM graph_symbols WHERE path = ?",
            [rel, rel],
        ).fetchall()
    ]
    try:
        drawn = lines(content, spans(tree.root_node, content), links)
    except UnicodeDecodeError:
        raise ConfigError(f"{rel[:200]!r} is not UTF-8 text; it cannot be shown") from None
    module = module_row[0] if module_row else ""
    definitions = [
        {
            "name": name,
            "kind": kind,
            "start_line": start,
            "end_line": end,
            "signature": signature or "",
            "public": visibility == "pub",
            "target": f"{module}.{name}",
        }
        for name, kind, start, end, signature, visibility in con.execute(
            "SELECT name, kind, start_line, end_line, signature, visibility FROM chunks "
            "WHERE path = ? AND part = 0 AND kind <> 'module' ORDER BY start_line",
            [rel],
        ).fetchall()
    ]
    return {"path": rel, "module": module, "lines": drawn, "definitions": definitions}


def example_queries(con: Any) -> list[str]:
    """Public function names of the package (not its tests), and one doc line to ask in words."""
    rows = con.execute(
        "SELECT name, doc FROM chunks WHERE kind = 'function' AND visibility = 'pub' "
        "AND part = 0 AND path NOT LIKE 'test/%' ORDER BY hash(name), name LIMIT 40"
    ).fetchall()
    names = list(dict.fromkeys(name for name, _ in rows))[:EXAMPLE_NAMES]
    docs = [_first_line(doc) for _, doc in rows if doc and 3 <= len(_first_line(doc).split()) <= 10]
    return names + docs[:1]


def _first_line(doc: str) -> str:
    for line in doc.splitlines():
        text = line.strip().lstrip("/").strip().rstrip(".")
        if text:
            return text
    return ""
