"""GBR_TEST_WORDS through `serve`: the daemon lends test names' words, and a saved test file
updates them in the watch's pass (the real daemon in a subprocess, real grammar and DuckDB)."""

from __future__ import annotations

from pathlib import Path

from tests.core.test_test_words import TESTS, write_package
from tests.daemon.conftest import clean_env, start_daemon, wait_until


def bm25_names(daemon_search: dict[str, object]) -> list[str]:
    results = daemon_search["results"]
    assert isinstance(results, list)
    return [str(r["name"]) for r in results]


def test_a_saved_test_file_moves_its_words_in_the_daemons_index(tmp_path: Path) -> None:
    root = write_package(tmp_path / "pkg")
    env = clean_env(tmp_path / "home", GBR_TEST_WORDS="on")
    daemon = start_daemon(root, "--debounce-ms", "100", env=env)
    try:
        daemon.wait_idle()
        assert "remove" in bm25_names(daemon.search("expired", mode="bm25"))
        (root / "test/cookie_test.gleam").write_text(
            TESTS.replace("expired_cookie_is_removed_test", "stale_token_purged_test")
        )
        wait_until(
            lambda: "remove" in bm25_names(daemon.search("purged", mode="bm25")),
            "the renamed test's words to reach `remove`",
        )
        assert "remove" not in bm25_names(daemon.search("expired", mode="bm25"))
    finally:
        daemon.stop()
