"""The request limits (gbr.access.requests) as pydantic field types, for the two doors that
validate a JSON body against a schema: the daemon's HTTP API and the MCP tools.

One declaration each, so the HTTP body and the MCP tool give the same bounds and the same
description; the CLI checks the same limits through gbr.access.requests without pydantic,
which a cold `search` never imports.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from gbr.access.requests import (
    MAX_ASK_K,
    MAX_BUDGET,
    MAX_FILTER_CHARS,
    MAX_KINDS,
    MAX_MODEL_CHARS,
    MAX_PROVIDER_CHARS,
    MAX_QUERY_CHARS,
    MAX_SEARCH_K,
    MIN_BUDGET,
)
from gbr.core.rank.priors import TEST_POLICY_HELP, TestPolicy
from gbr.core.records import ChunkKind

QueryText = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_QUERY_CHARS,
        description="Words (`parse an isbn`) or an identifier (`isbn.parse`).",
    ),
]
SearchK = Annotated[int, Field(ge=1, le=MAX_SEARCH_K, description="How many hits.")]
PathFilter = Annotated[
    str | None,
    Field(max_length=MAX_FILTER_CHARS, description="Only files under this prefix or glob."),
]
ModuleFilter = Annotated[
    str | None,
    Field(max_length=MAX_FILTER_CHARS, description="Only this module and its submodules."),
]
KindsFilter = Annotated[
    list[ChunkKind], Field(max_length=MAX_KINDS, description="Only these kinds.")
]
Tests = Annotated[TestPolicy, Field(description=TEST_POLICY_HELP)]

QuestionText = Annotated[
    str,
    Field(min_length=1, max_length=MAX_QUERY_CHARS, description="A question about the code."),
]
AskK = Annotated[int, Field(ge=1, le=MAX_ASK_K, description="Most chunks to send.")]
Budget = Annotated[
    int, Field(ge=MIN_BUDGET, le=MAX_BUDGET, description="Context budget, in tokens.")
]
ProviderName = Annotated[
    str | None, Field(max_length=MAX_PROVIDER_CHARS, description="groq, gemini or openai.")
]
ModelName = Annotated[str | None, Field(max_length=MAX_MODEL_CHARS, description="The model.")]
