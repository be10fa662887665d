"""The one seam between the front doors (CLI, chat, MCP, HTTP) and the work: `CodeIndex`.

A front door parses, calls a `CodeIndex` and renders; it never knows whether the work runs
in this process (`LocalIndex`) or in the daemon that serves the index (`RemoteIndex`), and
`choose` picks between the two for each call. Hits and answers cross the seam as records;
JSON is made at the edges (the CLI's `--json`, MCP's structured content, the HTTP API).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from gbr.access.requests import LlmChoice as LlmChoice  # the seam's name for it
from gbr.core.records import Hit

# Names only the signatures use: importing the seam must not load the Oracle, the LLM
# providers and pyarrow behind them, which a cold `search` never needs.
if TYPE_CHECKING:
    from gbr.access.requests import AskRequest, SearchRequest
    from gbr.core.answer.oracle import AskOutcome, TokenSink
    from gbr.core.records import IndexSummary, ProgressCallback


@dataclass(frozen=True, slots=True)
class Found:
    """What a search found (iterating gives the hits, best first), and why nothing when a
    filter excludes everything (`hint`)."""

    query: str
    mode: str
    hits: tuple[Hit, ...]
    hint: str | None = None
    # (chunks with a vector, all chunks): dense search saw only the first while an index
    # run was still embedding (or was cut short); BM25 saw them all.
    embedded: tuple[int, int] | None = None

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def as_dict(self) -> dict[str, Any]:
        """The `search --json` object, which the daemon and the MCP tool return as well."""
        data: dict[str, Any] = {
            "query": self.query,
            "mode": self.mode,
            "results": [h.as_dict() for h in self.hits],
        }
        if self.hint is not None:
            data["hint"] = self.hint
        if self.embedded is not None:
            data["embedded"] = {"chunks": self.embedded[0], "of": self.embedded[1]}
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Found:
        hits = tuple(Hit.from_dict(hit) for hit in data["results"])
        cover = data.get("embedded")
        embedded = (int(cover["chunks"]), int(cover["of"])) if cover else None
        return cls(str(data["query"]), str(data["mode"]), hits, data.get("hint"), embedded)


class CodeIndex(Protocol):
    """Search, ask, index and report on one package's index, wherever the work runs."""

    via: str | None
    """None in this process; else "daemon pid N at URL", said once to the user."""

    @property
    def root(self) -> Path:
        """The package's root folder."""
        ...

    @property
    def db(self) -> Path: ...

    def has_index(self) -> bool: ...

    def search(self, request: SearchRequest) -> Found:
        """The hits for `request`, checked against the limits every door shares."""
        ...

    def ask(self, request: AskRequest, on_token: TokenSink | None = None) -> AskOutcome:
        """Answer, streaming to `on_token`. Ctrl-C cancels the stream and returns what came
        (`result.cancelled`); a missing or failing provider is the outcome's `error`."""
        ...

    def check_llm(self, llm: LlmChoice) -> tuple[str, str]:
        """(provider, model) that `llm` resolves to; raises the GbrError that says why not."""
        ...

    def index(
        self, path: Path | None = None, progress: ProgressCallback | None = None
    ) -> IndexSummary:
        """A pass over the package (or over `path`'s package, which the index then follows)."""
        ...

    def status(self) -> dict[str, Any]:
        """The `status --json` object (a daemon adds what only it knows)."""
        ...

    def indexed_root(self) -> str | None:
        """The folder the index was built from (with `--db` elsewhere, not the folder it
        sits in); what `--json` output is stamped with."""
        ...

    def graph(self, op: str, name: str | None, depth: int = 1) -> dict[str, Any]:
        """A code graph question (`refs`, `callers`, `callees`, `graph`): the object
        `gleambrctl OP --json` prints, before the CLI stamps it."""
        ...

    def close(self) -> None: ...
