"""The code graph's tables: written with a file's chunks, replaced and removed with them,
and read by name (qualified, bare, ambiguous), by depth, and as an import graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.errors import (
    AmbiguousNameError,
    GraphMissingError,
    IndexEmptyError,
    NameNotFoundError,
)
from gbr.core.graph.model import FileGraph
from gbr.core.graph.store import GraphReader
from gbr.core.parse.chunker import CHUNKER_VERSION
from gbr.core.records import FileProblem
from gbr.core.store.facade import Store
from tests.graph.sample import (
    FORM,
    FORM_EDGES,
    HANDLER,
    UTIL,
    call,
    fn,
    sample_store,
    source,
)


@pytest.fixture
def store(tmp_path: Path, model: OnnxEmbedder) -> Store:
    return sample_store(tmp_path / "index.duckdb", model)


def test_a_qualified_name_finds_its_definition_and_references_grouped_by_position(store):
    data = GraphReader(store).refs("web/cookie.set_cookie")
    assert data["target"] == {"module": "web/cookie", "name": "set_cookie", "internal": True}
    assert [(d["path"], d["line"]) for d in data["definitions"]] == [("src/web/cookie.gleam", 3)]
    assert [(r["path"], r["line"], r["kind"], r["source"]) for r in data["references"]] == [
        ("src/web/handler.gleam", 4, "call", "handle"),
        ("src/web/handler.gleam", 9, "pipe", "respond"),
    ]
    # The last segment of the module is enough, as an alias would be written.
    assert GraphReader(store).refs("cookie.set_cookie")["target"] == data["target"]


def test_a_bare_name_resolves_when_unique_and_lists_the_candidates_when_not(store):
    reader = GraphReader(store)
    assert reader.refs("set_cookie")["target"]["module"] == "web/cookie"
    with pytest.raises(AmbiguousNameError) as caught:
        reader.refs("sign")
    assert "web/cookie.sign" in str(caught.value) and "web/util.sign" in str(caught.value)
    assert reader.refs("util.sign")["target"]["module"] == "web/util"


def test_a_module_named_in_full_wins_over_modules_ending_with_its_path(store):
    vendored = FileGraph(
        "src/vendor/web/util.gleam",
        "vendor/web/util",
        symbols=(fn("src/vendor/web/util.gleam", "vendor/web/util", "sign", 1),),
    )
    store.replace_file(source(vendored.path), [], graph=vendored)
    reader = GraphReader(store)
    assert reader.refs("web/util.sign")["target"]["module"] == "web/util"
    with pytest.raises(AmbiguousNameError, match=r"vendor/web/util\.sign"):
        reader.refs("util.sign")


def test_an_unknown_name_says_so_with_close_names(store):
    with pytest.raises(NameNotFoundError, match="did you mean set_cookie"):
        GraphReader(store).refs("set_cooky")


def test_an_external_target_stays_an_external_node(store):
    data = GraphReader(store).refs("gleam/list.map")
    assert data["target"] == {"module": "gleam/list", "name": "map", "internal": False}
    assert data["definitions"] == []
    assert [r["source"] for r in data["references"]] == ["set_cookie"]
    # An unresolved reference (no target module) was never stored.
    with pytest.raises(NameNotFoundError):
        GraphReader(store).refs("local_var")


def test_an_external_target_resolves_once_its_dependency_is_indexed(store):
    dep = FileGraph(
        "build/packages/gleam_stdlib/src/gleam/list.gleam",
        "gleam/list",
        symbols=(fn("build/packages/gleam_stdlib/src/gleam/list.gleam", "gleam/list", "map", 40),),
    )
    store.replace_file(source(dep.path), [], graph=dep)
    data = GraphReader(store).refs("list.map")
    assert data["target"]["internal"] is True
    assert data["definitions"][0]["line"] == 40


def test_callers_and_callees_follow_depth(store):
    reader = GraphReader(store)
    one = reader.callers("cookie.sign", 1)
    assert [(c["module"], c["name"], c["depth"]) for c in one["callers"]] == [
        ("web/cookie", "set_cookie", 1)
    ]
    three = reader.callers("cookie.sign", 3)
    assert [(c["name"], c["depth"]) for c in three["callers"]] == [
        ("set_cookie", 1),
        ("handle", 2),
        ("respond", 2),
    ]
    respond = next(c for c in three["callers"] if c["name"] == "respond")
    assert respond["via"] == "web/cookie.set_cookie"
    assert [s["line"] for s in respond["sites"]] == [9]
    down = reader.callees("respond", 2)
    assert [(c["module"], c["name"], c["depth"], c["internal"]) for c in down["callees"]] == [
        ("web/cookie", "set_cookie", 1, True),
        ("web/handler", "handle", 1, True),
        ("gleam/list", "map", 2, False),
        ("web/cookie", "sign", 2, True),
    ]


def edges(entries: list[dict], way: str) -> set[tuple[int, str, str]]:
    """(line, caller, callee) of every site listed, each labelled with its entry's `via`."""
    out = set()
    for entry in entries:
        via = entry["via"].rpartition(".")[2]
        pair = (entry["name"], via) if way == "callers" else (via, entry["name"])
        out |= {(site["line"], *pair) for site in entry["sites"]}
    return out


def test_each_site_at_depth_two_is_labelled_with_its_own_caller(store):
    """`digits` is called from `parse_year` and `parse_month`: at depth 2 each site names
    its own caller (they were all shown as coming from the first, `parse_year`)."""
    store.replace_file(source(FORM.path), [], graph=FORM)
    reader = GraphReader(store)
    down = reader.callees("form.parse", 2)["callees"]
    assert edges(down, "callees") == FORM_EDGES - {(13, "parse_month", "parse_year")}
    assert [(c["name"], c["depth"], c["via"]) for c in down] == [
        ("parse_month", 1, "web/form.parse"),
        ("parse_year", 1, "web/form.parse"),
        ("digits", 2, "web/form.parse_year"),
        ("digits", 2, "web/form.parse_month"),
    ]
    up = reader.callers("form.digits", 2)["callers"]
    assert edges(up, "callers") == FORM_EDGES - {(13, "parse_month", "parse_year")}
    assert [(c["name"], c["depth"], c["via"]) for c in up] == [
        ("parse_month", 1, "web/form.digits"),
        ("parse_year", 1, "web/form.digits"),
        ("parse", 2, "web/form.parse_year"),
        ("parse", 2, "web/form.parse_month"),
    ]
    # The call graph drawn around `parse_month`: one edge per pair, each the right way.
    near = reader.neighbourhood("form.parse_month", 2)
    pairs = {
        (e["source"].rpartition(".")[2], e["target"].rpartition(".")[2]) for e in near["edges"]
    }
    assert pairs == {(a, b) for _, a, b in FORM_EDGES if "parse_month" in (a, b)}


def test_a_changed_file_replaces_its_own_rows_only(store):
    new_handler = FileGraph(
        "src/web/handler.gleam",
        "web/handler",
        symbols=(fn("src/web/handler.gleam", "web/handler", "handle", 3),),
        references=(call("src/web/handler.gleam", 4, "web/util", "sign", "handle"),),
    )
    store.replace_file(source(HANDLER.path, "v2"), [], graph=new_handler)
    reader = GraphReader(store)
    assert reader.refs("cookie.set_cookie")["references"] == []
    assert [c["name"] for c in reader.callers("util.sign")["callers"]] == ["handle"]
    assert [c["name"] for c in reader.callers("cookie.sign")["callers"]] == ["set_cookie"]
    with pytest.raises(NameNotFoundError):
        reader.refs("respond")


def test_a_deleted_file_takes_its_rows_along(store):
    store.remove_files([HANDLER.path])
    reader = GraphReader(store)
    assert reader.refs("cookie.set_cookie")["references"] == []
    with pytest.raises(NameNotFoundError):
        reader.refs("handle")
    assert reader.refs("set_cookie")["definitions"]  # the other files are untouched


def test_a_file_that_breaks_keeps_its_last_good_edges_with_its_stale_chunks(store):
    problem = FileProblem(HANDLER.path, "syntax error", "parse_failed")
    store.mark_failed(problem, source(HANDLER.path, "broken"))
    assert len(GraphReader(store).refs("cookie.set_cookie")["references"]) == 2


def test_a_failed_write_leaves_the_old_graph(store):
    def fail() -> None:
        raise OSError("No space left on device")

    store.before_commit = fail
    with pytest.raises(Exception, match="No space left"):
        store.replace_file(source(HANDLER.path, "v3"), [], graph=UTIL)
    store.before_commit = None
    assert len(GraphReader(store).refs("cookie.set_cookie")["references"]) == 2


def test_the_import_graph_and_one_module_neighbourhood(store):
    reader = GraphReader(store)
    whole = reader.imports()
    assert whole["edges"] == [
        {"source": "web/cookie", "target": "gleam/list"},
        {"source": "web/handler", "target": "web/cookie"},
    ]
    nodes = {n["id"]: n["internal"] for n in whole["nodes"]}
    assert nodes["gleam/list"] is False and nodes["web/cookie"] is True
    assert reader.find_module("cookie") == "web/cookie"
    near = reader.imports("web/handler")
    assert near["edges"] == [{"source": "web/handler", "target": "web/cookie"}]


def test_an_index_from_before_the_graph_says_to_index_again(tmp_path, model, store):
    store.con.execute("DELETE FROM meta WHERE key = 'graph_version'")
    with pytest.raises(GraphMissingError, match="run `gleambrctl index` again"):
        GraphReader(store).refs("set_cookie")


def test_opening_an_index_from_before_the_graph_re_reads_every_file(tmp_path, model, store):
    store.con.execute("DROP TABLE graph_refs")
    store.con.execute("DELETE FROM meta WHERE key = 'graph_version'")
    store.prepare(model_id=model.model_id, chunker_version=CHUNKER_VERSION, dim=model.dim)
    assert {s.content_hash for s in store.file_states().values()} == {""}
    assert store.meta()["graph_version"]
    assert store.con.execute("SELECT count(*) FROM graph_refs").fetchone() == (0,)


def test_an_index_that_holds_nothing_yet_says_to_run_index(tmp_path):
    with Store.open(tmp_path / "new.duckdb") as empty, pytest.raises(IndexEmptyError):
        GraphReader(empty).callers("set_cookie")
