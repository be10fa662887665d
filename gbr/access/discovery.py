"""How clients find the daemon serving an index: `daemon.json` next to the DuckDB file.

DuckDB lets one process write a file, so while a daemon runs, every other `gleambrctl`
command on the same index must go through it. The daemon writes `<db folder>/daemon.json`
once it answers HTTP, atomically (a temporary file renamed over), and removes it when it
stops cleanly. A daemon killed hard leaves the file behind: a reader treats it as stale
when the pid is gone or `/health` does not answer with that pid, and removes it.

Two daemons on one index are kept apart by an advisory lock on `daemon.lock`, held for the
daemon's life: the kernel drops it when the process dies, however it dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gbr.core.errors import DaemonError, GbrError

DISCOVERY_NAME = "daemon.json"
LOCK_NAME = "daemon.lock"
HEALTH_TIMEOUT = 2.0  # seconds; a live daemon answers /health from its event loop at once
_LOOPBACK_ANY = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}


@dataclass(frozen=True, slots=True)
class DaemonInfo:
    """The content of `daemon.json`."""

    pid: int
    host: str
    port: int
    db: str  # absolute path of the DuckDB file
    root: str  # absolute path of the indexed tree
    started_at: float  # Unix time
    token_required: bool

    @property
    def url(self) -> str:
        """Where to connect: a daemon bound to every interface is reached on loopback."""
        host = _LOOPBACK_ANY.get(self.host, self.host)
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def serves(self, root: Path) -> bool:
        """Whether this daemon indexes `root`: it indexes its own tree and no other."""
        return Path(self.root).resolve() == Path(root).expanduser().resolve()

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> DaemonInfo:
        """Validated, since the file may have been edited or written by another version."""
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        types = {"pid": int, "host": str, "port": int, "db": str, "root": str}
        for key, kind in types.items():
            if not isinstance(data.get(key), kind) or isinstance(data.get(key), bool):
                raise ValueError(f"{key} is missing or not a {kind.__name__}")
        return cls(
            pid=data["pid"],
            host=data["host"],
            port=data["port"],
            db=data["db"],
            root=data["root"],
            started_at=float(data.get("started_at") or 0.0),
            token_required=bool(data.get("token_required", False)),
        )


def discovery_path(db: Path) -> Path:
    return Path(db).absolute().parent / DISCOVERY_NAME


def write_discovery(info: DaemonInfo) -> Path:
    """Write `daemon.json` atomically: a reader sees the old file, no file, or the new one."""
    path = discovery_path(Path(info.db))
    tmp = path.with_name(f".{DISCOVERY_NAME}.{info.pid}.tmp")
    tmp.write_text(json.dumps(info.as_dict(), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_discovery(db: Path) -> DaemonInfo | None:
    """The file's content; None when there is none. A malformed file raises ValueError."""
    path = discovery_path(db)
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        return DaemonInfo.from_dict(json.loads(raw))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not JSON") from exc


def remove_discovery(db: Path, pid: int | None = None) -> bool:
    """Remove `daemon.json`; with `pid`, only if it is still that daemon's file."""
    path = discovery_path(db)
    if pid is not None:
        try:
            current = read_discovery(db)
        except ValueError:
            current = None
        if current is not None and current.pid != pid:
            return False
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, under another user
    return True


def probe_health(info: DaemonInfo, timeout: float = HEALTH_TIMEOUT) -> bool:
    """True when a daemon answers at `info.url` with the pid the file names.

    The pid check matters: after a crash, another program may have taken the port.
    """
    import httpx  # here, so that a command finding no daemon file never pays for it

    try:
        with httpx.Client(timeout=timeout, trust_env=False) as client:
            response = client.get(f"{info.url}/health")
        return response.status_code == 200 and response.json().get("pid") == info.pid
    except (httpx.HTTPError, ValueError, AttributeError):
        return False


def find_daemon(
    db: Path,
    *,
    on_stale: Callable[[DaemonInfo | None, str], None] | None = None,
    timeout: float = HEALTH_TIMEOUT,
) -> DaemonInfo | None:
    """The live daemon serving `db`, or None. A stale or malformed file is removed.

    `on_stale(info, why)` hears about each removal (info is None for a malformed file), so
    that a command can tell its user what it cleaned up.
    """
    try:
        info = read_discovery(db)
    except ValueError as exc:
        with contextlib.suppress(FileNotFoundError):
            discovery_path(db).unlink()
        if on_stale is not None:
            on_stale(None, str(exc))
        return None
    if info is None:
        return None
    if not pid_alive(info.pid):
        why = f"process {info.pid} is gone"
    elif not probe_health(info, timeout):
        if lock_held(db):
            # Alive and still serving, only slow (a pause, a busy machine): its file stays,
            # and nobody may open the index behind its back.
            raise DaemonError(
                f"the daemon serving {db} (pid {info.pid}) is not answering at {info.url}; "
                "try again in a moment, or stop it"
            )
        why = f"nothing answers at {info.url} for process {info.pid}"
    elif Path(info.db).resolve() != Path(db).resolve():
        return None  # a live daemon for this file under another path (a moved folder)
    else:
        return info
    remove_discovery(db, pid=info.pid)
    if on_stale is not None:
        on_stale(info, why)
    return None


def lock_held(db: Path) -> bool:
    """Whether a daemon holds this index's `daemon.lock` now (the kernel drops it at exit)."""
    path = Path(db).absolute().parent / LOCK_NAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing also drops the shared lock taken just now
    return False


def describe_stale(info: DaemonInfo | None, why: str) -> str:
    """The note a command prints when `find_daemon` removed a dead daemon's file."""
    owner = f" left by pid {info.pid}" if info is not None else ""
    return f"removed a stale daemon.json{owner} ({why})"


def already_serving(db: Path, pid: int | str, port: str) -> str:
    return f"a daemon is already serving {db} (pid {pid}, {port}); stop it first"


class DaemonLock:
    """An exclusive advisory lock on `daemon.lock`, held while a daemon serves the index."""

    def __init__(self, db: Path) -> None:
        from gbr.core.store.snapshot import WriterLock  # a daemon's: every command finds daemons

        self.db = Path(db).absolute()
        self.path = self.db.parent / LOCK_NAME
        self._fd: int | None = None
        self._writer = WriterLock(self.db, role="daemon")

    def acquire(self) -> None:
        """Take the lock, or raise DaemonError naming the daemon that holds it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 64).decode("ascii", "replace").strip() or "?"
            os.close(fd)
            try:
                info = read_discovery(self.db)
            except ValueError:
                info = None
            port = f"port {info.port}" if info is not None else "still starting"
            raise DaemonError(already_serving(self.db, holder, port)) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        try:  # the daemon writes the index in place: no `index` run may rename over it
            self._writer.acquire()
        except GbrError:
            self.release()
            raise

    def release(self) -> None:
        self._writer.release()
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing drops the lock
            self._fd = None
