"""Errors that reach people.

GbrError                 every error gbr raises on purpose; its message ends with the fix
├── ConfigError          a bad option, path or model location
│   └── AmbiguousNameError  a bare name the code graph knows in several modules
│   └── ModelMismatchError  the index's vectors are another model's than the query's
├── StoreError           the DuckDB file cannot be opened, read or written
│   └── IndexCorruptError  the file is damaged; `gleambrctl index --rebuild` recreates it
│   └── IndexBusyError   another process is writing the index; try again (exit code 75)
│   └── StoreWriteError  a write or commit failed (no permission, disk full...); retry later
│   └── GraphMissingError  the index predates the code graph; `gleambrctl index` builds it
├── IndexEmptyError      a query against an index that holds nothing yet
├── NameNotFoundError    `refs`/`callers`/`callees` of a name the code graph does not know
├── SupervisionError     an actor kept crashing and its supervisor gave up
├── DaemonError          a daemon cannot be reached, or one already serves the index
├── ModelFetchError      `models fetch` could not download a model whole; nothing was kept
└── ProviderError        an LLM provider failed (`.provider` names it)
    ├── MissingKeyError            no provider configured, or the chosen one lacks its key
    ├── ProviderAuthError          the provider rejected the key (401/403)
    ├── ProviderTimeoutError       no answer within the configured timeout
    ├── ProviderRateLimitError     still rate-limited (429) when retries ran out
    ├── ProviderResponseError      malformed, unexpected or cut-off response
    └── ProviderUnavailableError   network failure or 5xx when retries ran out
"""


class GbrError(Exception):
    """Base of the tree; the CLI prints its message on one line and exits non-zero."""

    exit_code = 1


class ConfigError(GbrError):
    """A bad option, path or model location."""

    exit_code = 2


class ModelMismatchError(ConfigError):
    """The index's vectors come from another model than the one that would embed the query."""


class StoreError(GbrError):
    """The DuckDB file cannot be opened, read or written."""


class IndexCorruptError(StoreError):
    """The index file is damaged (bad checksum, header or length); a rebuild recreates it."""

    def __init__(self, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail  # what is wrong with the file, without the fix


class IndexBusyError(StoreError):
    """Another process writes the index and it could not be read within a short bound.

    75 is EX_TEMPFAIL from sysexits.h: a script may simply try again later.
    """

    exit_code = 75


class StoreWriteError(StoreError):
    """A write to the index failed and was rolled back: the cause is outside gbr and may pass.

    The daemon catches it to keep a batch and retry it; a run stops at the first one."""


class IndexEmptyError(GbrError):
    """A query against an index that holds nothing yet."""


class GraphMissingError(StoreError):
    """The index was built before the code graph (or by another version of it)."""


class NameNotFoundError(GbrError):
    """A name that no definition or reference in the code graph has."""


class AmbiguousNameError(ConfigError):
    """A name the code graph knows in several modules; the message lists them."""


class SupervisionError(GbrError):
    """An actor kept crashing and its supervisor gave up on the run."""


class DaemonError(GbrError):
    """A daemon cannot be reached or started: it stopped answering, or one already serves."""


class ModelFetchError(GbrError):
    """A model's download failed (network, HTTP status, cut short, wrong digest); the
    half-fetched files were removed, so the cache holds the model whole or not at all."""


class ProviderError(GbrError):
    """An LLM provider failed; `provider` names which one (None before one was chosen)."""

    exit_code = 4

    def __init__(self, message: str, *, provider: str | None = None) -> None:
        super().__init__(message)
        self.provider = provider


class MissingKeyError(ProviderError):
    """No provider is configured, or the chosen one lacks its API key."""

    exit_code = 3


class ProviderAuthError(ProviderError):
    """The provider rejected the API key (401 or 403)."""


class ProviderTimeoutError(ProviderError):
    """The provider sent nothing within the configured timeout."""


class AnswerLimitError(ProviderError):
    """An answer ran past its total deadline or its size cap and was stopped there."""


class ProviderRateLimitError(ProviderError):
    """The provider still answered 429 when the retries or the deadline ran out."""


class ProviderResponseError(ProviderError):
    """A malformed or unexpected response, or a stream cut before its end."""


class ProviderUnavailableError(ProviderError):
    """The provider could not be reached, or kept failing with 5xx, until retries ran out."""
