"""The bounds on one answer as a whole: a total deadline and a size cap.

`--timeout` bounds each read from the provider, so a stream that trickles a token every
few seconds, or never ends, kept `ask` (and a daemon's worker) busy for as long as the
server went on: 90 s with `--timeout 5`, or for ever. Every front door (the CLI, chat, the
daemon's /ask and MCP) hands these bounds to the Oracle, which stops the answer at
whichever comes first and says so in one line, keeping the text so far.
"""

from __future__ import annotations

from collections.abc import Mapping

from gbr.core.environ import ASK_DEADLINE, ASK_MAX_ANSWER
from gbr.core.errors import ConfigError
from gbr.core.sizes import option_size

DEADLINE_ENV = ASK_DEADLINE.name
MAX_ANSWER_ENV = ASK_MAX_ANSWER.name
DEADLINE_PER_TIMEOUT = 4  # the total deadline, in per-read timeouts, when none is given
DEFAULT_DEADLINE = 120.0  # seconds: 4 x the default --timeout of 30 s
DEFAULT_MAX_ANSWER = 256 * 1024  # bytes (UTF-8) of answer text: far above max_answer_tokens
MAX_DEADLINE = 3600.0  # what a request to the daemon may ask for, at most
MAX_MAX_ANSWER = 64 * 1024 * 1024


def answer_deadline(
    env: Mapping[str, str], given: float | None = None, timeout: float | None = None
) -> float:
    """Seconds for a whole answer: `given`, else $GBR_ASK_DEADLINE, else a multiple of the
    per-read `timeout` (when one is given), else the default."""
    if given is None and env.get(DEADLINE_ENV, "").strip():
        raw = env[DEADLINE_ENV].strip()
        try:
            given = float(raw)
        except ValueError:
            raise ConfigError(f"{DEADLINE_ENV}={raw!r} is not a number of seconds") from None
    if given is None:
        return DEADLINE_PER_TIMEOUT * timeout if timeout is not None else DEFAULT_DEADLINE
    if not 0 < given <= MAX_DEADLINE:
        raise ConfigError(f"the answer deadline must be between 0 and {MAX_DEADLINE:g} seconds")
    return given


def answer_cap(env: Mapping[str, str], given: str | None = None) -> int:
    """Bytes an answer may hold: `given` (a size like 512k), else $GBR_ASK_MAX_ANSWER, else
    the default."""
    raw = given if given is not None else env.get(MAX_ANSWER_ENV, "").strip() or None
    if raw is None:
        return DEFAULT_MAX_ANSWER
    cap = option_size(raw, "--max-answer" if given is not None else MAX_ANSWER_ENV)
    return min(cap, MAX_MAX_ANSWER)


def deadline_message(seconds: float) -> str:
    return (
        f"the answer took longer than {seconds:g} s and was stopped; the text so far is "
        f"partial (a longer limit: --deadline or {DEADLINE_ENV})"
    )


def cap_message(cap: int) -> str:
    return (
        f"the answer passed {_size(cap)} and was stopped; the text so far is partial "
        f"(a larger cap: --max-answer or {MAX_ANSWER_ENV})"
    )


def _size(count: int) -> str:
    if count % 1024 == 0 and count >= 1024:
        return f"{count // 1024} KiB"
    return f"{count} bytes"
