"""The seam between the front doors (CLI, chat, MCP, the daemon's HTTP app) and the work.

local = LocalIndex(LocalSettings(root), load_model, env=os.environ)
with chosen(local) as index:          # the daemon serving the index, else this process
    for hit in index.search(SearchRequest("parse an isbn", 5)).hits:
        print(hit.path, hit.start_line)

Each name is imported on first use (PEP 562): a cold `search` must not pay for what only
`ask`, `index` or a chat loads (the LLM providers, the actors, pyarrow).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

# Not lazy: the module `choose` shares its function's name, and once loaded it would shadow
# the function here. It costs nothing: it reads the daemon's discovery file and no more.
from gbr.access.choose import choose, chosen
from gbr.core.lazy import lazy_names

if TYPE_CHECKING:
    from gbr.access.answering import Answering, open_provider, open_reranker, resolve
    from gbr.access.base import CodeIndex, Found, LlmChoice
    from gbr.access.config import PackageConfig, package_config
    from gbr.access.local import LocalIndex, LocalSettings
    from gbr.access.remote import RemoteIndex

_HOMES = {
    "Answering": "gbr.access.answering",
    "open_provider": "gbr.access.answering",
    "open_reranker": "gbr.access.answering",
    "resolve": "gbr.access.answering",
    "CodeIndex": "gbr.access.base",
    "Found": "gbr.access.base",
    "LlmChoice": "gbr.access.base",
    "PackageConfig": "gbr.access.config",
    "package_config": "gbr.access.config",
    "LocalIndex": "gbr.access.local",
    "LocalSettings": "gbr.access.local",
    "RemoteIndex": "gbr.access.remote",
}

__all__ = [
    "Answering",
    "CodeIndex",
    "Found",
    "LlmChoice",
    "LocalIndex",
    "LocalSettings",
    "PackageConfig",
    "RemoteIndex",
    "choose",
    "chosen",
    "open_provider",
    "open_reranker",
    "package_config",
    "resolve",
]


__getattr__ = lazy_names(__name__, _HOMES)
