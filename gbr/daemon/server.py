"""`gleambrctl serve`: start the daemon, publish where it listens, stop it cleanly.

uvicorn runs in a thread, so the main thread owns the signals: SIGINT, SIGTERM or SIGHUP (a
closed terminal) sets one event, and the shutdown then goes in a fixed order. The discovery
file goes first (new clients stop coming), then the HTTP server (requests in flight finish,
up to a grace period), then the watcher and the actors (a running pass stops early, keeping
what it wrote), then a final checkpoint folds the WAL into the DuckDB file, and the lock
goes last.

A stop is bounded: each step runs even if the one before failed, logging never raises (a
dead stderr, see telemetry.py), and if the clean stop has not finished STOP_SECONDS after it
began, or a second signal comes, the process removes its discovery file and exits at once.
The discovery file also goes at interpreter exit (atexit); only a SIGKILL leaves it, and the
next client finds it stale (discovery.py).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import errno
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType

import uvicorn
from threadpoolctl import threadpool_limits

from gbr.access.discovery import (
    DaemonInfo,
    DaemonLock,
    already_serving,
    describe_stale,
    discovery_path,
    find_daemon,
    remove_discovery,
    write_discovery,
)
from gbr.core.embed.embedder import OnnxEmbedder
from gbr.core.errors import ConfigError, DaemonError
from gbr.core.store.facade import prepare_folder
from gbr.core.telemetry import log, reopen_events
from gbr.daemon.app import create_app
from gbr.daemon.gate import HttpPolicy, is_loopback
from gbr.daemon.overload import LoopErrors, Throttle, report_held
from gbr.daemon.service import Daemon, DaemonConfig

GRACE_SECONDS = 5  # requests in flight (an answer streaming) get this long at shutdown
STARTUP_SECONDS = 30
# How many connections asyncio's accept loop takes per wake-up. uvicorn's default of 2048 is
# also how many times that loop logs (and retries) one failed accept: see overload.py.
ACCEPT_BATCH = 128
STOP_SECONDS = GRACE_SECONDS + 15  # a clean stop that takes longer is cut short
DEFAULT_PORT = 7717


def check_config(config: DaemonConfig) -> None:
    """Refuse what would expose the index: a non-loopback host needs a token."""
    if not is_loopback(config.host) and not config.token:
        raise ConfigError(
            f"--host {config.host} accepts connections from other machines; pass --token "
            "(or set GBR_TOKEN) so that clients must send `Authorization: Bearer <token>`"
        )
    if not 0 <= config.port <= 65535:
        raise ConfigError(f"--port {config.port} is not a port; use 0 to pick a free one")


def refuse_second_daemon(db: Path, note: Callable[[str], None]) -> None:
    """Raise DaemonError if a live daemon serves `db`; clean a stale discovery file."""

    info = find_daemon(db, on_stale=lambda dead, why: note(describe_stale(dead, why)))
    if info is not None:
        raise DaemonError(already_serving(db, info.pid, f"port {info.port}"))


def bind(host: str, port: int, on_busy: Callable[[str], None] | None = None) -> socket.socket:
    """Listen on host:port. When the port is taken and `on_busy` is given (the user left
    the port to us: clients find it in daemon.json anyway), listen on a free one and tell
    `on_busy` in one line; otherwise a taken port is a ConfigError."""
    try:
        return _listen(host, port)
    except OSError as exc:
        if on_busy is not None and exc.errno == errno.EADDRINUSE:
            sock = _listen(host, 0)
            on_busy(
                f"port {port} is in use; listening on port {sock.getsockname()[1]} instead "
                "(clients find it through .gbr/daemon.json; --port fixes one)"
            )
            return sock
        raise ConfigError(
            f"cannot listen on {host}:{port} ({exc.strerror or exc}); pick another --port, "
            "or 0 for a free one"
        ) from None


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP spelled out: asyncio sets TCP_NODELAY on accepted connections only when
    # the listening socket says TCP, and without it every keep-alive reply waited ~40 ms
    # for a delayed ACK (Nagle: the body held back behind the headers).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(False)
    return sock


class _ToStructlog(logging.Handler):
    """uvicorn and asyncio log through `logging`; send their records to our JSON lines
    instead, at most one per kind and interval (the rest are counted, see overload.py)."""

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.throttle = Throttle()

    def emit(self, record: logging.LogRecord) -> None:
        report_held(self.throttle)  # what an earlier interval held back, if it is over
        if not self.throttle.admit(f"{record.name}: {record.msg}"):
            return
        fields = {"logger": record.name, "message": record.getMessage()}
        if record.exc_info:
            fields["traceback"] = logging.Formatter().formatException(record.exc_info)
        emit = log().error if record.levelno >= logging.ERROR else log().warning
        emit("server_log", **fields)


def _route_uvicorn_logs() -> None:
    handler = _ToStructlog(level=logging.WARNING)
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "asyncio"):
        logger = logging.getLogger(name)
        logger.handlers = [handler]
        logger.propagate = False
        logger.setLevel(logging.WARNING)


class _Server(uvicorn.Server):
    """uvicorn with the event loop's errors handled by `LoopErrors` (overload.py)."""

    def __init__(self, config: uvicorn.Config, listener: socket.socket) -> None:
        super().__init__(config)
        self.loop_errors = LoopErrors(listener)

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        asyncio.get_running_loop().set_exception_handler(self.loop_errors)
        try:
            await super().serve(sockets)
        finally:
            self.loop_errors.reserve.close()


def serve(
    config: DaemonConfig,
    load_model: Callable[[], OnnxEmbedder],
    announce: Callable[[DaemonInfo], None],
    note: Callable[[str], None],
    allow_hosts: Iterable[str] = (),
    max_body_bytes: int | None = None,
    any_port_if_busy: bool = False,
) -> int:
    """Run the daemon until SIGINT, SIGTERM or SIGHUP; returns the exit code (0 on a clean stop).

    `allow_hosts` are the `Host` names it answers to besides loopback and its own (for a
    proxy; `*` is any); `max_body_bytes` caps a request body (see gate.py);
    `any_port_if_busy`: the port is the default, not the user's choice, so a taken one is
    replaced by a free one (with a note) rather than refused.

    When the index file is deleted under it (`rm -rf .gbr`), the daemon stops serving the
    deleted file and starts again in this process, on the same port, indexing into a new
    one; when the package folder is gone, it stops (see `Daemon.lost`)."""
    check_config(config)
    policy = HttpPolicy.for_bind(config.host, allow_hosts, max_body_bytes)
    db = config.db.resolve()
    refuse_second_daemon(db, note)
    stopper = _Stopper(db)
    previous = _trap_signals(stopper)
    # Each search's cosine product is small; extra BLAS threads only spin after it, on the
    # cores an index batch needs. bench/daemon_load.py at 10k chunks, one client polling:
    # a save took 1.85 s to become searchable with them and 1.30 s without.
    threadpool_limits(limits=1, user_api="blas")
    try:
        model = load_model()
        recovering: str | None = None
        while True:
            ended = _serve_once(
                config, model, policy, stopper, announce, note, any_port_if_busy, recovering
            )
            if isinstance(ended, int):
                return ended
            recovering = ended.reason
            # The same port, so clients that knew it keep it; another if it was taken meanwhile.
            config = replace(config, port=ended.port)
            any_port_if_busy = True
            prepare_folder(db)
            reopen_events()
            log().warning("index_recreating", reason=ended.reason, db=str(db))
    finally:
        _restore_signals(previous)


@dataclass(frozen=True)
class _Recreate:
    """A run of the daemon ended because its index file was lost: start again."""

    reason: str
    port: int


CHECK_SECONDS = 1.0  # how often the daemon looks for its package folder and index file


def _serve_once(
    config: DaemonConfig,
    model: OnnxEmbedder,
    policy: HttpPolicy,
    stopper: _Stopper,
    announce: Callable[[DaemonInfo], None],
    note: Callable[[str], None],
    any_port_if_busy: bool,
    recovering: str | None,
) -> int | _Recreate:
    """One daemon over the index, until a signal (an exit code) or its index file is lost."""
    db = stopper.db
    stop = stopper.requested
    lock = DaemonLock(db)
    lock.acquire()
    daemon: Daemon | None = None
    server: _Server | None = None
    thread: threading.Thread | None = None
    info: DaemonInfo | None = None
    try:
        daemon = Daemon(config, model)
        daemon.recovering = recovering
        daemon.open()
        sock = bind(config.host, config.port, note if any_port_if_busy else None)
        port = sock.getsockname()[1]
        daemon.port = port
        _route_uvicorn_logs()
        server = _Server(
            uvicorn.Config(
                create_app(daemon, policy),
                log_config=None,
                access_log=False,
                lifespan="off",
                timeout_graceful_shutdown=GRACE_SECONDS,
                timeout_keep_alive=30,
                loop="asyncio",  # LoopErrors relies on asyncio's accept loop, not uvloop's
                backlog=ACCEPT_BATCH,
            ),
            sock,
        )
        thread = threading.Thread(
            target=server.run, kwargs={"sockets": [sock]}, name="gbr-http", daemon=True
        )
        thread.start()
        _wait_started(server, thread)
        info = DaemonInfo(
            pid=os.getpid(),
            host=config.host,
            port=port,
            db=str(db),
            root=str(config.root.resolve()),
            started_at=daemon.started_at,
            token_required=bool(config.token),
        )
        stopper.publish(info)
        daemon.start_watching()
        log().info("daemon_started", url=info.url, pid=info.pid, db=info.db, root=info.root)
        if recovering is None:
            announce(info)
        checked = time.monotonic()
        while not stop.wait(0.5):
            if not thread.is_alive():
                log().error("http_server_stopped")
                return 1
            if time.monotonic() - checked < CHECK_SECONDS:
                continue
            checked = time.monotonic()
            lost = daemon.lost()
            if lost is None:
                stopper.republish_if_gone()
            elif lost.package_gone:
                log().error("package_gone", reason=lost.reason)
                return 1
            else:
                log().warning("index_lost", reason=lost.reason)
                return _Recreate(lost.reason, port)
        return 0
    finally:
        watchdog = stopper.arm(STOP_SECONDS)
        log().info("daemon_stopping")
        _run_steps(
            ("remove_discovery", stopper.forget),
            ("begin_shutdown", daemon.begin_shutdown if daemon is not None else None),
            ("stop_http", (lambda: setattr(server, "should_exit", True)) if server else None),
            ("join_http", (lambda: thread.join(GRACE_SECONDS + 5)) if thread else None),
            ("close_daemon", daemon.close if daemon is not None else None),
            ("release_lock", lock.release),
        )
        watchdog.cancel()
        log().info("daemon_stopped")


def _run_steps(*steps: tuple[str, Callable[[], object] | None]) -> None:
    """Run every step of a stop, in order, even after one failed (the failure is logged)."""
    for name, step in steps:
        if step is None:
            continue
        try:
            step()
        except Exception as exc:
            log().error("stop_step_failed", step=name, error=f"{type(exc).__name__}: {exc}")


class _Stopper:
    """How the daemon stops: the event the main thread waits on, the discovery file it must
    not leave behind, and the way out when a clean stop does not come."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self.requested = threading.Event()
        self._published: int | None = None  # the pid in the discovery file we wrote
        self._info: DaemonInfo | None = None

    def publish(self, info: DaemonInfo) -> None:
        write_discovery(info)
        self._published = info.pid
        self._info = info
        atexit.register(self.forget)  # an exit that skips the finally still removes it

    def republish_if_gone(self) -> None:
        """Write the discovery file again if someone deleted it: clients find the daemon
        through it, and a second `serve` would otherwise start on the same index."""
        if self._info is not None and not discovery_path(self.db).exists():
            write_discovery(self._info)
            log().warning("discovery_rewritten", path=str(discovery_path(self.db)))

    def forget(self) -> None:
        pid, self._published = self._published, None
        self._info = None
        if pid is not None:
            remove_discovery(self.db, pid=pid)

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.requested.is_set():  # a second Ctrl-C or TERM: stop waiting for a clean stop
            self.force(128 + signum, f"second {name}")
        log().info("signal_received", signal=name)
        self.requested.set()

    def arm(self, seconds: float) -> threading.Timer:
        """Force the exit if the clean stop is still going after `seconds`."""
        timer = threading.Timer(seconds, self.force, args=(1, f"still stopping after {seconds} s"))
        timer.daemon = True
        timer.start()
        return timer

    def force(self, code: int, why: str) -> None:
        """Exit now: the discovery file goes, the kernel drops the lock and the port."""
        log().warning("stop_forced", reason=why, exit_code=code)
        with contextlib.suppress(Exception):
            self.forget()
        os._exit(code)


def _wait_started(server: _Server, thread: threading.Thread) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while not server.started:
        if not thread.is_alive():
            raise DaemonError("the HTTP server failed to start; see the log lines above")
        if time.monotonic() > deadline:
            raise DaemonError(f"the HTTP server did not start within {STARTUP_SECONDS} s")
        time.sleep(0.01)


SignalHandler = Callable[[int, FrameType | None], object] | int | None


def _trap_signals(stopper: _Stopper) -> dict[int, SignalHandler]:
    previous: dict[int, SignalHandler] = {}
    # SIGHUP: the terminal or SSH session the daemon runs in was closed. Its default action
    # kills the process at once, without the checkpoint and leaving daemon.json behind. A
    # daemon started to outlive its terminal (`nohup`, which ignores it) keeps ignoring it.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if sig == signal.SIGHUP and signal.getsignal(sig) == signal.SIG_IGN:
            continue
        previous[sig] = signal.signal(sig, stopper.on_signal)
    return previous


def _restore_signals(previous: dict[int, SignalHandler]) -> None:
    for sig, handler in previous.items():
        with contextlib.suppress(TypeError, ValueError):
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
