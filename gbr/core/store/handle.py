"""What the store's parts need of the store: its connection, path, meta and transactions.

The parts (full text, writes) are called by the `Store` facade; typing them against this
protocol instead of `Store` keeps the arrow one way, facade -> part, with no circle.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Protocol

import duckdb


class StoreHandle(Protocol):
    @property
    def path(self) -> Path: ...

    @property
    def con(self) -> duckdb.DuckDBPyConnection: ...

    @property
    def before_commit(self) -> Callable[[], None] | None: ...

    def meta(self) -> dict[str, str]: ...

    def set_meta(self, /, **values: str) -> None: ...

    def transaction(self) -> AbstractContextManager[None]: ...
