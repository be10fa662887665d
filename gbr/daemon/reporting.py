"""What the daemon says about itself: the parts that are down (`/health`), the Prometheus
metrics it describes (`/metrics`), and a `/status` object that can always be encoded."""

from __future__ import annotations

from typing import Any, Protocol

from gbr.actors.pykka_gaps import queued
from gbr.actors.supervisor import Supervisor
from gbr.core.store.facade import ThreadLocalStore, storable_text
from gbr.daemon.metrics import Metrics
from gbr.daemon.oracles import Oracles
from gbr.daemon.watcher import Watcher


class Observed(Protocol):
    """What reporting reads of the daemon: typed here so reporting never imports the
    service that calls it."""

    metrics: Metrics
    store: ThreadLocalStore | None
    supervisor: Supervisor
    watcher: Watcher
    index_problem: str | None
    recovering: str | None
    pipeline_restarts: int
    oracles: Oracles

    def queue_depth(self) -> int: ...

    def uptime(self) -> float: ...


def degraded(daemon: Observed) -> list[dict[str, str]]:
    """Each part that is down or was given up on, with its state and the reason."""
    parts = []
    watcher = daemon.watcher
    if watcher.state in ("restarting", "failed"):
        what = "gave up restarting" if watcher.state == "failed" else "restarting"
        parts.append(
            {
                "component": "watcher",
                "state": watcher.state,
                "reason": f"the file watcher died ({watcher.error}); {what}: saves are "
                + (
                    "no longer indexed; restart the daemon"
                    if watcher.state == "failed"
                    else "indexed again once it is back"
                ),
            }
        )
    if daemon.recovering is not None:
        parts.append({"component": "index", "state": "recreating", "reason": daemon.recovering})
    if daemon.index_problem is not None:
        parts.append({"component": "indexer", "state": "retrying", "reason": daemon.index_problem})
    if daemon.supervisor.given_up is not None:
        parts.append(
            {
                "component": "supervisor",
                "state": "failed",
                "reason": str(daemon.supervisor.given_up),
            }
        )
    return parts


def describe_metrics(daemon: Observed) -> None:
    """Declare the daemon's metrics; the gauges read the daemon when scraped."""
    m = daemon.metrics

    def files() -> list[tuple[dict[str, str], float]]:
        assert daemon.store is not None
        counts = daemon.store.counts()
        return [
            ({"status": "ok"}, counts["files_ok"]),
            ({"status": "failed"}, counts["files_failed"]),
            ({"status": "partial"}, counts["files_partial"]),
        ]

    def chunks() -> list[tuple[dict[str, str], float]]:
        assert daemon.store is not None
        counts = daemon.store.counts()
        return [
            ({"stale": "false"}, counts["chunks"] - counts["stale_chunks"]),
            ({"stale": "true"}, counts["stale_chunks"]),
        ]

    def queues() -> list[tuple[dict[str, str], float]]:
        samples: list[tuple[dict[str, str], float]] = [({"actor": "indexer"}, daemon.queue_depth())]
        for child in daemon.oracles.children():
            samples.append(({"actor": child.name}, queued(child.actor_ref)))
        return samples

    m.describe("gbr_files", "gauge", "Files in the index, by status.", collect=files)
    m.describe("gbr_chunks", "gauge", "Chunks in the index.", collect=chunks)
    m.describe("gbr_parse_failures_total", "counter", "Files dropped for a syntax error.")
    m.describe("gbr_files_dropped_total", "counter", "Files dropped, by reason.")
    m.describe("gbr_files_indexed_total", "counter", "Files (re-)indexed by the daemon.")
    m.describe("gbr_files_removed_total", "counter", "Deleted files removed from the index.")
    m.describe(
        "gbr_actor_restarts_total",
        "counter",
        "Actors restarted by a supervisor (daemon and pipeline).",
        collect=lambda: [
            ({"scope": "daemon"}, daemon.supervisor.restarts),
            ({"scope": "pipeline"}, daemon.pipeline_restarts),
        ],
    )
    m.describe("gbr_queue_depth", "gauge", "Messages waiting in an actor's inbox.", collect=queues)
    m.describe("gbr_index_runs_total", "counter", "Index runs, by kind and outcome.")
    m.describe("gbr_index_run_seconds", "histogram", "Duration of index runs.")
    m.describe(
        "gbr_change_to_searchable_seconds",
        "histogram",
        "From a batch of file changes to its chunks being searchable.",
    )
    m.describe("gbr_ask_seconds", "histogram", "Duration of /ask answers.")
    m.describe("gbr_http_requests_total", "counter", "HTTP requests, by route and status.")
    m.describe("gbr_http_request_seconds", "histogram", "HTTP request latency, by route.")
    m.describe(
        "gbr_uptime_seconds",
        "gauge",
        "Seconds since the daemon started.",
        collect=lambda: [({}, daemon.uptime())],
    )
    m.describe(
        "gbr_watcher_up",
        "gauge",
        "1 while the file watcher runs.",
        collect=lambda: [({}, 1.0 if daemon.watcher.state == "watching" else 0.0)],
    )


def printable(value: Any) -> Any:
    """`value` with every string valid UTF-8, so that /status can always be encoded."""
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, dict):
        return {k: printable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable(v) for v in value]
    return value
