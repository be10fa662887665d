"""Second-stage ranking of retrieved hits: a local ONNX cross-encoder, or an LLM listwise.

Retrieval (search.py) scores query and chunk apart; a reranker reads them together, which
is slower but sharper, so `ask` fetches more candidates, reranks them, then cuts (see
ARCHITECTURE.md §2). A reranker only reorders: it returns exactly the hits it was given,
best first, ranks renumbered from 1 and `score` set to its own score. A backend that fails
at query time must not fail the question, so both rerankers then keep the input order and
log a `rerank_failed` event; only configuration mistakes raise (ConfigError, at load).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from gbr.core import telemetry
from gbr.core.embed.embedder import onnx_session
from gbr.core.embed.model_folder import folder_files
from gbr.core.environ import NO_ENV, RERANK_MODEL_DIR, is_off
from gbr.core.errors import ConfigError
from gbr.core.llm.base import Message
from gbr.core.records import Hit

__all__ = [
    "RERANK_MODEL_DIR_ENV",
    "RERANK_SYSTEM_PROMPT",
    "RERANK_USER_PROMPT",
    "CompletionModel",
    "CrossEncoderReranker",
    "LlmReranker",
    "Message",
    "Reranker",
    "ask_reranker_spec",
    "default_reranker_spec",
    "load_reranker",
    "parse_ranking",
    "passage_text",
]


class CompletionModel(Protocol):
    """What the LLM reranker needs from a provider in gbr.core.llm (structural)."""

    name: str

    def complete(
        self, messages: Sequence[Message], *, max_tokens: int = 1024, temperature: float = 0.2
    ) -> str: ...


class Reranker(Protocol):
    """Reorders hits, never drops or adds one, and never raises once loaded (see module doc)."""

    name: str

    def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]: ...


def _reordered(hits: Sequence[Hit], order: Sequence[int], scores: Sequence[float]) -> list[Hit]:
    """`hits` in `order`, ranked from 1, each with `scores[i]` for the hit `order[i]`."""
    return [
        replace(hits[i], rank=rank, score=float(score))
        for rank, (i, score) in enumerate(zip(order, scores, strict=True), start=1)
    ]


def _input_order(reranker: str, hits: Sequence[Hit], exc: BaseException | str) -> list[Hit]:
    """The fallback: the hits as retrieved (ranks renumbered), and one event saying why."""
    reason = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    telemetry.log().warning("rerank_failed", reranker=reranker, hits=len(hits), reason=reason[:300])
    return [replace(hit, rank=rank) for rank, hit in enumerate(hits, start=1)]


# --- LLM, listwise ----------------------------------------------------------------------

# One call ranks every candidate at once (listwise), rather than one call per hit: the
# model compares candidates with each other, and a 30-hit rerank costs one round trip.
# Candidates are numbered because names repeat across modules; a bare JSON array of numbers
# is the cheapest reply to generate and the easiest to parse. "Every candidate exactly
# once" is asked for, not trusted: parse_ranking tolerates omissions and repeats.
RERANK_SYSTEM_PROMPT = (
    "You rank search results from a Gleam codebase by how well each one answers a "
    "developer's query. Judge the code itself: a definition that does what the query asks "
    "beats one that merely mentions the same words. Reply with only a JSON array of "
    "candidate numbers, most relevant first, listing every candidate exactly once, "
    "for example [3, 1, 2]."
)
RERANK_USER_PROMPT = """Query: {query}

Candidates:

{candidates}

Rank all {count} candidates. Reply with only the JSON array."""

# A reply whose numbers are the ranking: "[3, 1, 2]", "3 > 1 > 2", "[3] > [1] > [2]".
_ARRAY = re.compile(r"\[[^\[\]]*\]")
_NUMBER = re.compile(r"\d+")
# Reasoning models may think aloud first; numbers in there are not the answer.
_THINKING = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)


def parse_ranking(reply: str, count: int) -> list[int] | None:
    """0-based candidate indices, best first, from a reply numbering them 1..count.

    Prefers the longest JSON array of numbers in the reply; failing that, every number in
    order of appearance (`3 > 1 > 2`). Repeats and numbers outside 1..count are dropped;
    candidates the reply left out follow in their original order. None when the reply
    names no candidate at all, so the caller can tell garbage from a ranking.
    """
    text = _THINKING.sub(" ", reply)
    numbers = _numbers_from_arrays(text)
    if numbers is None:
        numbers = [int(n) for n in _NUMBER.findall(text)]
    order = list(dict.fromkeys(n - 1 for n in numbers if 1 <= n <= count))
    if not order:
        return None
    placed = set(order)
    return order + [i for i in range(count) if i not in placed]


def _numbers_from_arrays(text: str) -> list[int] | None:
    """The longest JSON array of integers; single-item arrays are read as `[3] > [1]`."""
    arrays = [a for a in map(_int_array, _ARRAY.findall(text)) if a]
    if not arrays:
        return None
    longest = max(arrays, key=len)
    if len(longest) > 1:
        return longest
    return [a[0] for a in arrays]


def _int_array(source: str) -> list[int]:
    try:
        value = json.loads(source)
    except ValueError:
        return []
    if not isinstance(value, list):
        return []
    out: list[int] = []
    for item in value:
        if isinstance(item, bool):
            continue
        if isinstance(item, int):
            out.append(item)
        elif isinstance(item, str) and item.strip().isdigit():
            out.append(int(item))
    return out


def _excerpt(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text.rstrip()
    return text[:max_chars].rstrip() + "\n…"


class LlmReranker:
    """Listwise reranking by a chat model: one prompt with all candidates, one JSON reply.

    Scores are positional (1.0 for the best, falling by 1/n per place): the model gives
    an order, not calibrated relevance, so the scores only say where each hit landed.
    """

    def __init__(self, model: CompletionModel, max_chars_per_hit: int = 600) -> None:
        if max_chars_per_hit < 1:
            raise ConfigError("max_chars_per_hit must be at least 1")
        self.model = model
        self.max_chars_per_hit = max_chars_per_hit
        self.name = f"llm:{model.name}"

    def prompt(self, query: str, hits: Sequence[Hit]) -> list[Message]:
        """The two messages sent for `hits`, numbered from 1 in input order."""
        candidates = "\n\n".join(self._candidate(n, hit) for n, hit in enumerate(hits, start=1))
        user = RERANK_USER_PROMPT.format(query=query, candidates=candidates, count=len(hits))
        return [
            Message(role="system", content=RERANK_SYSTEM_PROMPT),
            Message(role="user", content=user),
        ]

    def _candidate(self, number: int, hit: Hit) -> str:
        head = f"[{number}] {hit.path}:{hit.start_line}-{hit.end_line} {hit.name} ({hit.kind})"
        code = _excerpt(hit.text or hit.signature, self.max_chars_per_hit)
        return f"{head}\n```gleam\n{code}\n```"

    def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        if len(hits) < 2:  # nothing to order; spare the round trip
            return _reordered(hits, range(len(hits)), [1.0] * len(hits))
        try:
            # About 4 tokens per "12, ", plus room for a fence or a short preamble.
            reply = self.model.complete(
                self.prompt(query, hits), max_tokens=64 + 6 * len(hits), temperature=0.0
            )
        except Exception as exc:  # any provider failure: keep the retrieval order
            return _input_order(self.name, hits, exc)
        order = parse_ranking(reply, len(hits))
        if order is None:
            return _input_order(self.name, hits, f"no candidate numbers in reply: {reply!r}")
        n = len(hits)
        return _reordered(hits, order, [1.0 - place / n for place in range(n)])


# --- Cross-encoder, local ONNX ----------------------------------------------------------

_KNOWN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def passage_text(hit: Hit, max_chars: int) -> str:
    """What the cross-encoder reads for a hit: where and what it is, then its code."""
    head = " ".join(part for part in (hit.path, hit.name, hit.signature) if part)
    return f"{head}\n{hit.text}"[:max_chars]


def _model_files(model_dir: Path) -> tuple[Path, Path]:
    """`model.onnx` (or `onnx/model.onnx`, the Hugging Face layout) and `tokenizer.json`."""
    return folder_files(
        model_dir, "cross-encoder", "pass --reranker DIR or set GBR_RERANK_MODEL_DIR"
    )


class CrossEncoderReranker:
    """Scores each (query, passage) pair with an ONNX cross-encoder and sorts by the logit.

    Made for ms-marco-MiniLM style exports: BERT pair encoding, `logits` [batch, 1]. With
    more than one output column, column 0 is used.
    """

    def __init__(
        self,
        model_dir: Path,
        max_length: int = 512,
        max_chars_per_hit: int = 2000,
        batch_size: int = 16,
        threads: int | None = None,
    ) -> None:
        model_dir = Path(model_dir).expanduser()
        onnx_path, tokenizer_path = _model_files(model_dir)
        self.name = f"cross-encoder:{model_dir.name}"
        self.max_chars_per_hit = max_chars_per_hit
        self.batch_size = batch_size
        self._tokenizer, self._pad_id = _load_tokenizer(tokenizer_path, max_length)
        self._session = onnx_session(onnx_path, threads)
        self._inputs = _check_inputs(self._session, onnx_path)
        outputs = [o.name for o in self._session.get_outputs()]
        self._output = "logits" if "logits" in outputs else outputs[0]

    def rerank(self, query: str, hits: Sequence[Hit]) -> list[Hit]:
        if not hits:
            return []
        passages = [passage_text(hit, self.max_chars_per_hit) for hit in hits]
        try:
            scores = self.score(query, passages)
        except Exception as exc:  # a model that loads but cannot run these inputs
            return _input_order(self.name, hits, exc)
        if not np.all(np.isfinite(scores)):
            return _input_order(self.name, hits, "the model returned NaN or infinite scores")
        order = sorted(range(len(hits)), key=lambda i: -scores[i])  # stable: ties keep order
        return _reordered(hits, order, [float(scores[i]) for i in order])

    def score(self, query: str, passages: Sequence[str]) -> np.ndarray:
        """One relevance logit per passage, in input order; higher is more relevant."""
        encodings = self._tokenizer.encode_batch([(query, p) for p in passages])
        out = np.empty(len(encodings), dtype=np.float32)
        # Similar lengths share a batch, so little compute goes to padding.
        order = sorted(range(len(encodings)), key=lambda i: len(encodings[i].ids))
        for lo in range(0, len(order), self.batch_size):
            idx = order[lo : lo + self.batch_size]
            out[idx] = self._run([encodings[i] for i in idx])
        return out

    def _run(self, batch: Sequence[Any]) -> np.ndarray:
        width = max(len(e.ids) for e in batch)
        arrays = {name: np.zeros((len(batch), width), dtype=np.int64) for name in _KNOWN_INPUTS}
        arrays["input_ids"][:] = self._pad_id
        for row, enc in enumerate(batch):
            n = len(enc.ids)
            arrays["input_ids"][row, :n] = enc.ids
            arrays["attention_mask"][row, :n] = 1
            arrays["token_type_ids"][row, :n] = enc.type_ids
        feeds = {name: arrays[name] for name in self._inputs}
        logits = np.asarray(self._session.run([self._output], feeds)[0], dtype=np.float32)
        return logits if logits.ndim == 1 else logits.reshape(len(batch), -1)[:, 0]


def _load_tokenizer(path: Path, max_length: int) -> tuple[Any, int]:
    """The pair tokenizer, set to truncate and not pad, and the id to pad with."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:
        raise ConfigError(f"cannot load tokenizer {path}: {exc}") from exc
    pad_id = _pad_id(tokenizer)
    # We pad per batch ourselves; an exported tokenizer may carry fixed-length padding.
    tokenizer.no_padding()
    # longest_first trims the passage, not a short query, when a pair is too long.
    tokenizer.enable_truncation(max_length=max_length, strategy="longest_first")
    return tokenizer, pad_id


def _pad_id(tokenizer: Any) -> int:
    """The tokenizer's declared pad id, else its [PAD] or <pad> token, else 0 (BERT's)."""
    if tokenizer.padding:
        return int(tokenizer.padding["pad_id"])
    for token in ("[PAD]", "<pad>"):
        found = tokenizer.token_to_id(token)
        if found is not None:
            return int(found)
    return 0


def _check_inputs(session: Any, path: Path) -> tuple[str, ...]:
    """The inputs to feed, in the model's order; an input we cannot fill is a config error."""
    declared = tuple(i.name for i in session.get_inputs())
    unknown = [name for name in declared if name not in _KNOWN_INPUTS]
    if unknown or "input_ids" not in declared:
        raise ConfigError(
            f"{path} takes inputs {', '.join(declared)}; a cross-encoder needs input_ids "
            "and may take attention_mask and token_type_ids; export a BERT-style model"
        )
    return declared


# --- Choosing one -----------------------------------------------------------------------

RERANK_MODEL_DIR_ENV = RERANK_MODEL_DIR.name


def default_reranker_spec(env: Mapping[str, str]) -> str:
    """What `--rerank` uses when no reranker is named: a local model beats a paid round trip."""
    return "cross-encoder" if env.get(RERANK_MODEL_DIR_ENV, "").strip() else "llm"


def ask_reranker_spec(
    rerank: bool, named: str | None, model: CompletionModel | None, env: Mapping[str, str]
) -> str | None:
    """The reranker an ask with `rerank` uses: the one named, else the default above; None
    when that is the LLM and no provider is configured (retrieval order then stands)."""
    if not rerank:
        return None
    spec = named or default_reranker_spec(env)
    return None if spec.strip().lower() == "llm" and model is None else spec


def load_reranker(
    spec: str | None, model: CompletionModel | None, env: Mapping[str, str] = NO_ENV
) -> Reranker | None:
    """The reranker a setting names, or None for no reranking.

    `llm` uses `model`; `cross-encoder:DIR`, or a bare folder path, loads a local model;
    `cross-encoder` alone reads the folder from GBR_RERANK_MODEL_DIR in `env`; none/off
    disable.
    """
    if spec is None or not spec.strip() or is_off(spec):
        return None
    spec = spec.strip()
    if spec.lower() == "llm":
        if model is None:
            raise ConfigError(
                "the llm reranker needs a provider; set GROQ_API_KEY (or another provider's "
                "key), or use a local model with cross-encoder:DIR"
            )
        return LlmReranker(model)
    kind, _, rest = spec.partition(":")
    if kind.lower() == "cross-encoder":
        return CrossEncoderReranker(_cross_encoder_dir(rest.strip(), env))
    if _looks_like_path(spec):
        return CrossEncoderReranker(Path(spec))
    raise ConfigError(
        f"unknown reranker {spec!r}; use llm, cross-encoder:DIR, a model folder, or none"
    )


def _cross_encoder_dir(given: str, env: Mapping[str, str]) -> Path:
    folder = given or env.get(RERANK_MODEL_DIR_ENV, "").strip()
    if not folder:
        raise ConfigError(
            f"the cross-encoder reranker needs a model folder; use cross-encoder:DIR "
            f"or set {RERANK_MODEL_DIR_ENV}"
        )
    return Path(folder)


def _looks_like_path(spec: str) -> bool:
    return "/" in spec or os.sep in spec or spec.startswith(("~", ".")) or Path(spec).exists()
