"""The seam between the front doors (CLI, chat, MCP, the daemon's HTTP app) and the work.

local = LocalIndex(LocalSettings(root), load_model, env=os.environ)
with chosen(local) as index:          # the daemon serving the index, else this process
    for hit in index.search("parse an isbn", 5).hits:
        print(hit.path, hit.start_line)
"""

from gbr.access.answering import Answering, open_provider, open_reranker, resolve
from gbr.access.base import CodeIndex, Found, LlmChoice
from gbr.access.choose import choose, chosen
from gbr.access.config import PackageConfig, package_config
from gbr.access.local import LocalIndex, LocalSettings
from gbr.access.remote import RemoteIndex

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
