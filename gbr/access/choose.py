"""The one place that picks where the work runs: the daemon serving the index, else here.

Called again for every CLI command, MCP tool call and chat: a daemon started meanwhile is
used from the next call on, and one that stopped is replaced by in-process work. With no
daemon this costs one failed file read; a stale discovery file left by a daemon that died
is removed, and `on_stale` hears about it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from gbr.access.discovery import DaemonInfo, find_daemon

if TYPE_CHECKING:
    from gbr.access.base import CodeIndex
    from gbr.access.local import LocalIndex

StaleNote = Callable[[DaemonInfo | None, str], None]


def choose(local: LocalIndex, on_stale: StaleNote | None = None) -> CodeIndex:
    """The daemon's API when one serves `local`'s index file, else `local` itself.

    A `RemoteIndex` returned here is the caller's to close (`chosen` does it).
    """
    info = find_daemon(local.db, on_stale=on_stale)
    if info is None:
        return local
    # Only with a daemon: the client and its records are no cost to a search without one.
    from gbr.access.client import TOKEN_ENV, DaemonClient
    from gbr.access.remote import RemoteIndex

    cancel = local.settings.cancel_on_ctrl_c
    token = local.env.get(TOKEN_ENV, "").strip() or None
    client = DaemonClient(info, token, env=local.env)  # its provider settings go along
    return RemoteIndex(client, local.root, cancel_on_ctrl_c=cancel)


@contextlib.contextmanager
def chosen(local: LocalIndex, on_stale: StaleNote | None = None) -> Iterator[CodeIndex]:
    """`choose` for the length of one call; a daemon's client is closed after it."""
    index = choose(local, on_stale)
    try:
        yield index
    finally:
        if index is not local:
            index.close()
