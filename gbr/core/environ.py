"""The environment as core code sees it, and the one registry of gbr's own variables.

Nothing under `gbr/core` reads `os.environ`. The front doors (`gbr/commands`, the daemon's
start-up, bench scripts) read the process environment once and pass it down, so a library
caller or a test states exactly which variables apply, and two indexes in one process can
be configured differently.

Every `GBR_*` variable gbr reads is named here once, with its kind, its default and what it
does (`VARIABLES`; tests/core/test_environ.py checks that the code reads no other), and is
read through it: one spelling for "off" (`off`, `none`, `0`, `false` or `no`, any case),
one place where GBR_HOME is resolved (`gbr_home`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Literal

NO_ENV: Mapping[str, str] = MappingProxyType({})
"""No variables set: the defaults alone."""

OFF_WORDS = ("off", "none", "0", "false", "no")
"""What turns a feature off, for every switch (and in settings files and flags alike)."""

Kind = Literal["switch", "path", "paths", "size", "seconds", "number", "choice", "text", "secret"]


def is_off(value: str | None) -> bool:
    """Whether a setting's text says "off" (blank is not off: it means unset)."""
    return value is not None and value.strip().lower() in OFF_WORDS


@dataclass(frozen=True, slots=True)
class Variable:
    """One environment variable: its name, its kind, its default (as text), what it does."""

    name: str
    kind: Kind
    default: str
    meaning: str

    def text(self, env: Mapping[str, str]) -> str:
        """The value, stripped; "" when unset or blank (which means the default)."""
        return env.get(self.name, "").strip()

    def off(self, env: Mapping[str, str]) -> bool:
        """Whether the value turns the feature off (see OFF_WORDS)."""
        return is_off(self.text(env))

    def path(self, env: Mapping[str, str]) -> Path | None:
        """The value as a path, `~` expanded; None when unset."""
        text = self.text(env)
        return Path(text).expanduser() if text else None


HOME = Variable(
    "GBR_HOME",
    "path",
    "~/.cache/gbr (config.toml: ~/.config/gbr)",
    "gbr's own files: the shared embed cache, kept ONNX graphs and the LLM config.toml",
)
CEILING_DIRECTORIES = Variable(
    "GBR_CEILING_DIRECTORIES",
    "paths",
    "",
    "colon-separated folders the search for a package's root never climbs into",
)
MODEL_DIR = Variable(
    "GBR_MODEL_DIR", "path", "the bundled model", "a folder with model.onnx and tokenizer.json"
)
MODEL_ONNX = Variable("GBR_MODEL_ONNX", "path", "", "the embedder's ONNX file (with TOKENIZER)")
TOKENIZER = Variable("GBR_TOKENIZER", "path", "", "the embedder's tokenizer.json (with ONNX)")
DEVICE = Variable("GBR_DEVICE", "choice", "auto", "where to embed: auto, cpu or cuda")
EMBED_CACHE = Variable(
    "GBR_EMBED_CACHE", "switch", "on", "vectors shared by every index of the user; off: none"
)
EMBED_CACHE_SIZE = Variable(
    "GBR_EMBED_CACHE_SIZE", "size", "512MB", "the shared embed cache's cap, like 512MB"
)
ONNX_GRAPHS = Variable(
    "GBR_ONNX_GRAPHS",
    "path",
    "$GBR_HOME/onnx",
    "where optimised ONNX graphs are kept; off keeps none",
)
RANKER = Variable(
    "GBR_RANKER", "text", "off", "the learned ranker: on (the shipped file) or a file; off"
)
TEST_WORDS = Variable(
    "GBR_TEST_WORDS",
    "text",
    "off",
    "index time: test names lend their words to the BM25 text of what they call; on, off "
    "or TARGETS,WORDS[,WEIGHT]",
)
SECOND_OPINION = Variable(
    "GBR_SECOND_OPINION", "switch", "on", "the second embedding model's vote; off turns it off"
)
SECOND_OPINION_FILL = Variable(
    "GBR_SECOND_OPINION_FILL",
    "seconds",
    "30",
    "quiet seconds before a daemon embeds the index with the second model (0: at once); off",
)
RERANK_MODEL_DIR = Variable(
    "GBR_RERANK_MODEL_DIR", "path", "", "a cross-encoder folder: --rerank then uses it"
)
MODELS_URL = Variable(
    "GBR_MODELS_URL",
    "text",
    "https://huggingface.co",
    "where `models fetch` downloads from: a mirror laid out like the Hugging Face hub",
)
TOKEN = Variable("GBR_TOKEN", "secret", "", "the daemon's bearer token, for it and its clients")
PORT = Variable("GBR_PORT", "number", "7717", "the port `serve` listens on")
FAULTS = Variable("GBR_FAULTS", "text", "", "crash drills for tests (stage@N, ...); never in use")
OPENAI_API_KEY = Variable("GBR_OPENAI_API_KEY", "secret", "", "the key of an OpenAI-style API")
OPENAI_BASE_URL = Variable(
    "GBR_OPENAI_BASE_URL", "text", "http://127.0.0.1:11434/v1", "an OpenAI-style API's address"
)
OPENAI_MODEL = Variable("GBR_OPENAI_MODEL", "text", "", "the model asked of the OpenAI-style API")
GROQ_BASE_URL = Variable("GBR_GROQ_BASE_URL", "text", "", "Groq's API address")
GROQ_MODEL = Variable("GBR_GROQ_MODEL", "text", "", "the model asked of Groq")
GEMINI_BASE_URL = Variable("GBR_GEMINI_BASE_URL", "text", "", "Gemini's API address")
GEMINI_MODEL = Variable("GBR_GEMINI_MODEL", "text", "", "the model asked of Gemini")
ASK_DEADLINE = Variable(
    "GBR_ASK_DEADLINE", "seconds", "", "seconds a whole answer may take (else 4 x --timeout)"
)
ASK_MAX_ANSWER = Variable("GBR_ASK_MAX_ANSWER", "size", "256KiB", "the largest answer, like 512k")

VARIABLES: Mapping[str, Variable] = MappingProxyType(
    {
        v.name: v
        for v in (
            HOME,
            CEILING_DIRECTORIES,
            MODEL_DIR,
            MODEL_ONNX,
            TOKENIZER,
            DEVICE,
            EMBED_CACHE,
            EMBED_CACHE_SIZE,
            ONNX_GRAPHS,
            RANKER,
            TEST_WORDS,
            SECOND_OPINION,
            SECOND_OPINION_FILL,
            RERANK_MODEL_DIR,
            MODELS_URL,
            TOKEN,
            PORT,
            FAULTS,
            OPENAI_API_KEY,
            OPENAI_BASE_URL,
            OPENAI_MODEL,
            GROQ_BASE_URL,
            GROQ_MODEL,
            GEMINI_BASE_URL,
            GEMINI_MODEL,
            ASK_DEADLINE,
            ASK_MAX_ANSWER,
        )
    }
)


def gbr_home(env: Mapping[str, str], kind: Literal["cache", "config"]) -> Path | None:
    """gbr's home for its own files, the one place GBR_HOME is read: GBR_HOME itself, else
    the user's XDG cache or config folder (an absolute XDG_*_HOME, else under HOME), read
    from `env` only; None when `env` names no home at all, so a caller that passes a bare
    mapping never touches the user's real files."""
    home = HOME.path(env)
    if home is not None:
        return home
    xdg = env.get("XDG_CACHE_HOME" if kind == "cache" else "XDG_CONFIG_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "gbr"
    user = env.get("HOME")
    return Path(user) / f".{kind}" / "gbr" if user else None
