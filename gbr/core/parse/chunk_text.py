"""The two texts made from a chunk: what the model embeds and what BM25 indexes."""

from __future__ import annotations

import hashlib
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
    return header_of(chunk.module, chunk.kind, chunk.name, chunk.signature, chunk.doc)


def header_of(module: str, kind: str, name: str, signature: str, doc: str) -> str:
    """context_header from the fields alone (a search hit has them, not a Chunk)."""
    doc_line = doc.split(". ")[0][:120] if doc else ""
    head = f"{module} {kind} {name}: {signature}"
    return f"{head}\n{doc_line}" if doc_line else head


_FENCE = re.compile(r"```.*?(```|$)", re.DOTALL)
_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
_DOC_LINE = re.compile(r"^\s*///.*(\n|$)", re.MULTILINE)


def doc_prose(doc: str) -> str:
    """The prose of a doc comment: fenced examples, HTML tags and link targets removed.

    Why: libraries written by others put long usage examples and `<details>` blocks in
    their docs; embedded as they are, they fill the model's window with code that says
    little about what the function does, and push its own code out of the window.
    """
    text = _LINK.sub(r"\1", _TAG.sub(" ", _FENCE.sub(" ", doc)))
    return " ".join(text.split())


def without_doc_lines(text: str) -> str:
    """The chunk's code without its `///` lines (the doc is given once, cleaned, above)."""
    return _DOC_LINE.sub("", text)


DEFAULT_EMBED_FORMAT = "header"


def embed_key(model_id: str, text: str) -> str:
    """Same text under the same model gives the same vector, so this keys the vector cache."""
    return hashlib.sha256(f"{model_id}\0{text}".encode()).hexdigest()


def embed_text(chunk: Chunk, embed_format: str = DEFAULT_EMBED_FORMAT) -> str:
    """The code, after a line naming module, kind, name and signature unless format is plain.

    `prose` (for bench/eval.py) gives the doc once, as prose (doc_prose), above the code
    without its `///` lines; on the devcorpus dev half it did worse than `header` (dense
    R@5 0.869 -> 0.857, MRR@10 0.693 -> 0.654): the examples in docs name the function and
    show it in use, which the model matches well."""
    if embed_format == "header":
        # The context header already carries the signature that later parts repeat.
        return f"{context_header(chunk)}\n{chunk.text}"
    if embed_format == "prose":
        head = f"{chunk.module} {chunk.kind} {chunk.name}: {chunk.signature}"
        doc = doc_prose(chunk.doc)
        return "\n".join(t for t in (head, doc, without_doc_lines(chunk.text)) if t)
    return f"{chunk.header}\n{chunk.text}" if chunk.header else chunk.text


# Tokens kept free for the context header when the chunker sizes chunks: the p90 header
# on our examples is 54 tokens, the median 36 (measured with the default tokenizer).
HEADER_RESERVE = 48


def chunk_budget(window: int, embed_format: str = DEFAULT_EMBED_FORMAT) -> int:
    """Tokens of code a chunk may hold so that what is embedded fits the model's window."""
    budget = window - 2  # [CLS] and [SEP]
    return budget if embed_format == "plain" else budget - HEADER_RESERVE


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
    for the eval harness to compare. `prose-` before a weight name gives the doc once, as
    prose, and the code without its `///` lines; it stays off: per repository it gained on
    the devcorpus dev half (R@5 / MRR@10 0.930 / 0.791 -> 0.939 / 0.800) but not on the
    held-out half (0.859 / 0.697 both) nor on `examples/` (R@5 0.926 -> 0.919).
    """
    if variant == "plain":
        return code_words(chunk.text)
    if variant.startswith("prose-"):
        name, module, sig, doc, body = SEARCH_TEXT_WEIGHTS[variant.removeprefix("prose-")]
        doc_text, body_text = doc_prose(chunk.doc), code_words(without_doc_lines(chunk.text))
    else:
        name, module, sig, doc, body = SEARCH_TEXT_WEIGHTS[variant]
        doc_text, body_text = chunk.doc, code_words(chunk.text)
    fields = [
        (code_words(chunk.name), name),
        (code_words(chunk.module.replace("/", " ")), module),
        (code_words(chunk.signature), sig),
        (doc_text, doc),
        (body_text, body),
    ]
    return " ".join(text for text, times in fields for _ in range(times))
