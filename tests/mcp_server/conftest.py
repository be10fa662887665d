"""Shared by the MCP tests: the daemon tests' `daemons` fixture, and a tool result's text."""

from typing import Any

from tests.daemon.conftest import daemons

__all__ = ["daemons", "text"]


def text(result: Any) -> str:
    """What an agent reads of a tool result: its text blocks, joined."""
    return "\n".join(block.text for block in result.content)
