"""The daemon tests' `daemons` fixture, so MCP tests can start a real daemon too."""

from tests.daemon.conftest import daemons

__all__ = ["daemons"]
