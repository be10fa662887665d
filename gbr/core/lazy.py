"""Package faces whose names load on first use (PEP 562)."""

from __future__ import annotations

import importlib
import types
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` that imports each public name from its home when first used,
    so importing the package loads none of them."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(home), name)

    return __getattr__


class _LazyModule(types.ModuleType):
    """A stand-in for a module that imports it at the first attribute read."""

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module(self.__name__), name)


def lazy_module(name: str) -> Any:
    """A module that loads when first used: httpx costs a cold `search` 0.1-0.2 s on 2
    cores, and only `ask` and a daemon's clients call it. Import the real module under
    TYPE_CHECKING for the type checker, and bind this at run time."""
    return _LazyModule(name)
