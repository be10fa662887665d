"""`gleambrctl chat`: an interactive session over one package, with slash commands.

commands.py parses lines, session.py keeps the state and acts, render.py shows results,
terminal.py is the prompt (or the pipe); the work runs behind a `gbr.access.CodeIndex` (in
this process, or in the daemon serving the package).
"""

from gbr.chat.render import Views
from gbr.chat.session import ChatSession, ChatSettings
from gbr.chat.terminal import run_interactive, run_piped

__all__ = [
    "ChatSession",
    "ChatSettings",
    "Views",
    "run_interactive",
    "run_piped",
]
