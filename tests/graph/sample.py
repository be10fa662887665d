"""Hand-built code graphs of a small web package, stored as `index` would store them.

They let storage, CLI, HTTP and MCP tests run without the extractor: the records are the
ones gbr.core.graph.model defines, written through the store's own per-file path.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.graph.model import FileGraph, Import, Reference, Symbol
from gbr.core.parse.chunker import CHUNKER_VERSION
from gbr.core.records import SourceFile
from gbr.core.store.facade import Store


def source(path: str, text: str = "x") -> SourceFile:
    data = text.encode()
    return SourceFile(
        path=path,
        module=path.removeprefix("src/").removesuffix(".gleam"),
        package="web",
        content=data,
        content_hash=hashlib.sha256(data).hexdigest(),
        size=len(data),
        mtime=0.0,
    )


def fn(path: str, module: str, name: str, line: int) -> Symbol:
    return Symbol(path, module, name, "function", line, 8, True)


def call(path: str, line: int, module: str, name: str, source_name: str, kind="call") -> Reference:
    return Reference(path, line, 3, kind, module, name, source_name)


# web/cookie: set_cookie calls sign and gleam/list.map; web/handler: handle calls
# cookie.set_cookie, respond pipes into cookie.set_cookie; web/util has its own `sign`.
COOKIE = FileGraph(
    "src/web/cookie.gleam",
    "web/cookie",
    imports=(Import("src/web/cookie.gleam", 1, 1, "gleam/list", "list"),),
    symbols=(
        fn("src/web/cookie.gleam", "web/cookie", "set_cookie", 3),
        fn("src/web/cookie.gleam", "web/cookie", "sign", 9),
    ),
    references=(
        call("src/web/cookie.gleam", 4, "web/cookie", "sign", "set_cookie"),
        call("src/web/cookie.gleam", 5, "gleam/list", "map", "set_cookie"),
        call("src/web/cookie.gleam", 6, "", "local_var", "set_cookie"),  # unresolved: kept out
    ),
)
HANDLER = FileGraph(
    "src/web/handler.gleam",
    "web/handler",
    imports=(Import("src/web/handler.gleam", 1, 1, "web/cookie", "cookie"),),
    symbols=(
        fn("src/web/handler.gleam", "web/handler", "handle", 3),
        fn("src/web/handler.gleam", "web/handler", "respond", 8),
    ),
    references=(
        call("src/web/handler.gleam", 4, "web/cookie", "set_cookie", "handle"),
        call("src/web/handler.gleam", 9, "web/cookie", "set_cookie", "respond", "pipe"),
        call("src/web/handler.gleam", 10, "web/handler", "handle", "respond"),
    ),
)
UTIL = FileGraph(
    "src/web/util.gleam",
    "web/util",
    symbols=(fn("src/web/util.gleam", "web/util", "sign", 1),),
)

# web/form, shaped like gleam_time's RFC 3339 parser (issue 30): `parse` calls `parse_year`
# and `parse_month`, which both call `digits`, each from its own line; `parse_month` also
# calls `parse_year`, a definition already met one level up.
FORM = FileGraph(
    "src/web/form.gleam",
    "web/form",
    symbols=(
        fn("src/web/form.gleam", "web/form", "parse", 1),
        fn("src/web/form.gleam", "web/form", "parse_year", 6),
        fn("src/web/form.gleam", "web/form", "parse_month", 10),
        fn("src/web/form.gleam", "web/form", "digits", 15),
    ),
    references=(
        call("src/web/form.gleam", 2, "web/form", "parse_year", "parse"),
        call("src/web/form.gleam", 3, "web/form", "parse_month", "parse", "use"),
        call("src/web/form.gleam", 7, "web/form", "digits", "parse_year"),
        call("src/web/form.gleam", 11, "web/form", "digits", "parse_month"),
        call("src/web/form.gleam", 12, "web/form", "digits", "parse_month"),
        call("src/web/form.gleam", 13, "web/form", "parse_year", "parse_month"),
    ),
)
# Each (line, caller, callee) of FORM's calls, read from the lines above by hand.
FORM_EDGES = {
    (2, "parse", "parse_year"),
    (3, "parse", "parse_month"),
    (7, "parse_year", "digits"),
    (11, "parse_month", "digits"),
    (12, "parse_month", "digits"),
    (13, "parse_month", "parse_year"),
}


def sample_store(db: Path, model: OnnxEmbedder, root: Path | None = None) -> Store:
    """An index at `db` holding the three sample files' graphs (and no chunks)."""
    s = Store.open(db)
    s.prepare(model_id=model.model_id, chunker_version=CHUNKER_VERSION, dim=model.dim)
    s.set_meta(root=str(root or db.parent))
    for graph in (COOKIE, HANDLER, UTIL):
        s.replace_file(source(graph.path), [], graph=graph)
    return s
