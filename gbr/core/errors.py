"""Errors that reach people.

GbrError                 every error gbr raises on purpose; its message ends with the fix
├── ConfigError          a bad option, path or model location
├── StoreError           the DuckDB file cannot be opened, read or written
├── IndexEmptyError      a query against an index that holds nothing yet
└── SupervisionError     an actor kept crashing and its supervisor gave up
"""


class GbrError(Exception):
    """Base of the tree; the CLI prints its message on one line and exits non-zero."""

    exit_code = 1


class ConfigError(GbrError):
    """A bad option, path or model location."""

    exit_code = 2


class StoreError(GbrError):
    """The DuckDB file cannot be opened, read or written."""


class IndexEmptyError(GbrError):
    """A query against an index that holds nothing yet."""


class SupervisionError(GbrError):
    """An actor kept crashing and its supervisor gave up on the run."""
