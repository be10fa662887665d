"""The supervised pykka actors that run gbr's work: the index pipeline and the Oracle.

Each name is imported on first use (PEP 562), so that importing one actor module does not
start loading every other one, and the front doors stay quick to start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gbr.core.lazy import lazy_names

if TYPE_CHECKING:
    from gbr.actors.pipeline import IndexOptions, run_index
    from gbr.actors.supervisor import RestartPolicy, Supervisor

_HOMES = {
    "IndexOptions": "gbr.actors.pipeline",
    "run_index": "gbr.actors.pipeline",
    "RestartPolicy": "gbr.actors.supervisor",
    "Supervisor": "gbr.actors.supervisor",
}

__all__ = [
    "IndexOptions",
    "RestartPolicy",
    "Supervisor",
    "run_index",
]


__getattr__ = lazy_names(__name__, _HOMES)
