"""`gleambrctl status`: what is indexed, the daemon serving it, and the embed cache."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.markup import escape

from gbr.commands.common import embedding_note, errors, note_stale, out
from gbr.commands.options import (
    DbOption,
    DebugOption,
    JsonOption,
)
from gbr.core.embed.model_files import DEFAULT_MODEL_ID, outdated_default_model

if TYPE_CHECKING:
    from gbr.core.embed.cache_config import CacheConfig


def status(
    db: DbOption = None,
    json_out: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """What is indexed: files, chunks, dropped files and why, model, size, last run."""
    with errors(debug) as command:
        from gbr.access.opening import find_package
        from gbr.core.store.snapshot import lock_holder

        package = find_package(db, os.environ, Path.cwd())
        db_path = command.db = package.db
        config = package.config
        with package.index(on_stale=note_stale) as (index, _):
            report = index.status()
            here = index.via is None
        if here:
            holder = lock_holder(db_path)
            if holder is not None and holder[1] == "index":
                report["index_run_pid"] = holder[0]  # the figures are of the last complete run
        report["kept_aside"] = _kept_aside(db_path)
        report["settings"] = config.settings.as_dict()
        report["model_outdated"] = outdated_default_model(report.get("model_id"))
        report["embed_cache"] = _cache_report(config.embed_cache, report.get("last_run"))
        if json_out:
            from gbr.commands.output import stamped

            sys.stdout.write(json.dumps(stamped(report, report.get("root")), indent=2) + "\n")
            return
        if "pid" in report:
            out.print(
                f"daemon pid {report['pid']} at http://{report['host']}:{report['port']}, "
                f"up {report['uptime_seconds']:.0f} s, watcher {report['watcher']}, "
                f"{report['restarts']} restarts, {report['queue_depth']} queued"
                + (f", indexing ({report['indexing']})" if report["indexing"] else "")
            )
            _print_daemon_llm(report.get("llm"))
        if report.get("index_run_pid"):
            out.print(
                f"an index run (pid {report['index_run_pid']}) is in progress; "
                "this is the last complete index"
            )
        out.print(f"index  {escape(report['db'])} ({report['db_bytes'] / 1e6:.1f} MB)")
        out.print(f"root   {escape(str(report['root']))}")
        out.print(
            f"model  {escape(str(report['model_id']))} "
            f"(chunker v{escape(str(report['chunker_version']))})"
        )
        out.print(
            f"files  {report['files_ok']} indexed, {report['files_failed']} dropped, "
            f"{report.get('files_partial', 0)} partial; "
            f"chunks {report['chunks']} ({report['stale_chunks']} stale)"
        )
        if report["model_outdated"]:
            out.print(
                "[yellow]embedded by an older gbr's default model[/yellow]: searches still "
                f"work; `gleambrctl index {escape(str(report['root']))}` re-embeds it once "
                f"with {DEFAULT_MODEL_ID}"
            )
        if note := embedding_note(report.get("embedded"), db_path, None if here else "daemon"):
            out.print(note)
        if report["settings"]:
            listed = ", ".join(f"{k} = {v}" for k, v in report["settings"].items())
            out.print(f"settings {escape(listed)} (gleambrctl settings)")
        last = report["last_run"]
        if last:
            out.print(
                f"last run: {last['files_indexed']} indexed, {last['files_unchanged']} unchanged, "
                f"{last['files_dropped']} dropped in {last['seconds']} s"
            )
        _print_cache(report["embed_cache"])
        for item in report["kept_aside"]:
            out.print(
                f"kept aside {escape(item['path'])} ({item['bytes'] / 1e6:.1f} MB), an earlier "
                "index moved out of the way; delete it when you no longer need it"
            )
        for item in report["dropped"]:
            stale = f" ({item['stale_chunks']} stale chunks kept)" if item["stale_chunks"] else ""
            out.print(
                f"  [red]dropped[/red] {escape(item['path'])}: {escape(item['error'])}{stale}"
            )
        for item in report.get("partial", []):
            stale = f" ({item['stale_chunks']} stale chunks kept)" if item["stale_chunks"] else ""
            out.print(
                f"  [yellow]partial[/yellow] {escape(item['path'])}: {escape(item['error'])}{stale}"
            )


def _print_daemon_llm(llm: dict[str, Any] | None) -> None:
    """Whose settings an ask through the daemon uses: the shell's own provider variables
    when it sets any, else these, the daemon's (gbr.daemon.oracles)."""
    if not llm:
        return
    if llm.get("provider") is None:
        own = f"no provider of its own ({llm.get('error') or 'none configured'})"
    else:
        own = f"{llm['provider']}, model {llm['model']}, at {llm['base_url']}"
    out.print(
        f"daemon llm {escape(own)}; an ask from a shell that sets provider variables "
        "uses the shell's"
    )


def _kept_aside(db: Path) -> list[dict[str, Any]]:
    """Index files a damaged index or a cut-short --rebuild left beside this one."""
    from gbr.core.store.files import kept_aside

    found = []
    for path in kept_aside(db):
        try:
            found.append({"path": str(path), "bytes": path.stat().st_size})
        except OSError:  # removed meanwhile
            continue
    return found


def _cache_report(cache: CacheConfig | None, last_run: dict[str, Any] | None) -> dict[str, Any]:
    """The shared embed cache for `status`: where, how big, and the last run's hits."""
    from gbr.core.embed.cache import describe

    report = describe(cache)
    if last_run:
        report["last_run_hits"] = last_run.get("cache_hits", 0)
        report["last_run_misses"] = last_run.get("cache_misses", 0)
    return report


def _print_cache(cache: dict[str, Any]) -> None:
    if not cache["enabled"]:
        out.print("embed cache off (the embed_cache setting, or GBR_EMBED_CACHE)")
        return
    line = (
        f"embed cache {escape(cache['path'])}: {cache['rows']} vectors, "
        f"{cache['bytes'] / 1e6:.1f} of {cache['max_bytes'] / 1e6:.0f} MB"
    )
    if "last_run_hits" in cache:
        line += f"; last run {cache['last_run_hits']} hits, {cache['last_run_misses']} misses"
    out.print(line + (f" [yellow]({escape(cache['error'])})[/yellow]" if "error" in cache else ""))
