"""`gleambrctl chat`: an interactive session over one package, with slash commands.

commands.py parses lines, session.py keeps the state and acts, render.py shows results,
terminal.py is the prompt (or the pipe), backend.py is where the work runs (in this
process; daemon_backend.py: in the daemon serving the package).
"""

from gbr.chat.backend import ChatBackend, LlmChoice, LocalBackend
from gbr.chat.daemon_backend import DaemonBackend
from gbr.chat.render import Views
from gbr.chat.session import ChatSession, ChatSettings
from gbr.chat.terminal import run_interactive, run_piped

__all__ = [
    "ChatBackend",
    "ChatSession",
    "ChatSettings",
    "DaemonBackend",
    "LlmChoice",
    "LocalBackend",
    "Views",
    "run_interactive",
    "run_piped",
]
