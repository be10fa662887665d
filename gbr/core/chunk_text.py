"""The two texts made from a chunk: what the model embeds and what BM25 indexes."""

from __future__ import annotations

import re

from gbr.core.records import Chunk

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def split_identifier(ident: str) -> list[str]:
    """`map_loop` -> [map, loop]; `sendAfter` -> [send, after]; `HTTPError` -> [http, error]."""
    words: list[str] = []
    for piece in ident.split("_"):
        words.extend(w.lower() for w in _CAMEL.findall(piece))
    return words


def code_words(text: str) -> str:
    """Every identifier kept whole and, when compound, also split into its words."""
    out: list[str] = []
    for ident in _IDENT.findall(text):
        parts = split_identifier(ident)
        out.append(ident.lower())
        if len(parts) > 1:
            out.extend(parts)
    return " ".join(out)


def context_header(chunk: Chunk) -> str:
    """A short line naming where the code lives, prepended to the code the model embeds."""
    doc_line = chunk.doc.split(". ")[0][:120] if chunk.doc else ""
    head = f"{chunk.module} {chunk.kind} {chunk.name}: {chunk.signature}"
    return f"{head}\n{doc_line}" if doc_line else head


DEFAULT_EMBED_FORMAT = "header"


def embed_text(chunk: Chunk, embed_format: str = DEFAULT_EMBED_FORMAT) -> str:
    """The code, after a line naming module, kind, name and signature unless format is plain."""
    if embed_format == "header":
        # The context header already carries the signature that later parts repeat.
        return f"{context_header(chunk)}\n{chunk.text}"
    return f"{chunk.header}\n{chunk.text}" if chunk.header else chunk.text


# Tokens kept free for the context header when the chunker sizes chunks: the p90 header
# on our examples is 54 tokens, the median 36 (measured with the default tokenizer).
HEADER_RESERVE = 48


def chunk_budget(window: int, embed_format: str = DEFAULT_EMBED_FORMAT) -> int:
    """Tokens of code a chunk may hold so that what is embedded fits the model's window."""
    budget = window - 2  # [CLS] and [SEP]
    return budget - HEADER_RESERVE if embed_format == "header" else budget


# How often each field is repeated in the BM25 text, per search-text variant: name, module,
# signature, doc, body. "weighted" is what the index holds; the others are for bench/eval.py.
SEARCH_TEXT_WEIGHTS: dict[str, tuple[int, int, int, int, int]] = {
    "weighted": (3, 1, 2, 1, 1),
    "doc2": (3, 1, 2, 2, 1),
    "name5": (5, 1, 2, 1, 1),
    "no-module": (3, 0, 2, 1, 1),
    "no-body": (3, 1, 2, 1, 0),
}


def search_text(chunk: Chunk, variant: str = "weighted") -> str:
    """Names and signature are repeated so that BM25 weighs them above body words.

    `plain` (no repetition, no doc, no module) and the other SEARCH_TEXT_WEIGHTS are kept
    for the eval harness to compare.
    """
    if variant == "plain":
        return code_words(chunk.text)
    name, module, sig, doc, body = SEARCH_TEXT_WEIGHTS[variant]
    fields = [
        (code_words(chunk.name), name),
        (code_words(chunk.module.replace("/", " ")), module),
        (code_words(chunk.signature), sig),
        (chunk.doc, doc),
        (code_words(chunk.text), body),
    ]
    return " ".join(text for text, times in fields for _ in range(times))
