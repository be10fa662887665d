"""The environment as core code sees it: a mapping handed down from the edge.

Nothing under `gbr/core` reads `os.environ`. The front doors (`gbr/commands`, the daemon's
start-up, bench scripts) read the process environment once and pass it down, so a library
caller or a test states exactly which variables apply, and two indexes in one process can
be configured differently.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

NO_ENV: Mapping[str, str] = MappingProxyType({})
"""No variables set: the defaults alone."""
