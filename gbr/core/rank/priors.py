"""Priors on where an answer lives: library code before tests and example apps, type
questions toward type chunks, public before private, module chunks after definitions for
"how do I" questions.

Why: on code written by others, the misses of plain hybrid search share a few shapes (see
issue 10): `*_test` functions and files under `test/` crowd the top slots, module chunks
(imports and a module doc) and example apps win "how do I" questions, and a type question
lands on a function that merely mentions the type. Each prior is a plain factor on the
fused score, switchable on its own, so bench/eval.py can measure each alone and together.

The prior values are chosen on the dev half of the devcorpus (bench/eval.py --devcorpus).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal, get_args

from gbr.core.graph.model import Node, in_degrees
from gbr.core.records import DEFAULT_TEST_POLICY, TestPolicy

__all__ = [
    "DEFAULT_TEST_POLICY",
    "NO_PRIORS",
    "TEST_POLICIES",
    "TEST_POLICY_HELP",
    "Intent",
    "NamedQuery",
    "Priors",
    "TestPolicy",
    "effective_policy",
    "is_aside",
    "is_example",
    "is_test",
    "named_in",
    "parse_test_policy",
    "query_intent",
]

TEST_POLICIES: tuple[TestPolicy, ...] = get_args(TestPolicy)
TEST_POLICY_HELP = "Test and example code: include, demote (below library code), or exclude."

Intent = Literal["identifier", "type", "howto", "nl"]

_TEST_DIRS = frozenset({"test", "tests", "integration_test", "integration_tests"})
_EXAMPLE_DIRS = frozenset({"example", "examples", "demo", "demos"})


def _dirs(path: str) -> list[str]:
    return path.split("/")[:-1]


def is_test(path: str, name: str = "") -> bool:
    """Test code: a file under a `test/` folder, a `*_test.gleam` module, a `*_test` function."""
    stem = path.rsplit("/", 1)[-1].removesuffix(".gleam")
    return (
        any(d in _TEST_DIRS for d in _dirs(path))
        or stem.endswith("_test")
        or name.endswith("_test")
    )


def is_example(path: str) -> bool:
    """Example code: anything under an `examples/` (or `example/`, `demo/`) folder, which
    is also where nested example packages live."""
    return any(d in _EXAMPLE_DIRS for d in _dirs(path))


def is_aside(path: str, name: str = "") -> bool:
    """Not the library itself: tests or examples. `--tests` demotes or excludes these.

    `--tests exclude` asks the store, which mirrors this in SQL (store_queries.ASIDE_SQL)."""
    return is_test(path, name) or is_example(path)


_HOWTO = re.compile(
    r"^\s*(how\s+(do|can|should|would|to)\b|what'?s\s+the\s+way\s+to\b|is\s+there\s+a\s+way\b)",
    re.IGNORECASE,
)
_TYPE_WORDS = re.compile(
    r"\b(type|types|record|records|variant|variants|constructor|constructors|enum|struct|"
    r"union|alias|opaque|fields?|shape|signature|kinds\s+of|cases|can\s+(fail|go\s+wrong))\b",
    re.IGNORECASE,
)
# Wider cues of a question about the shape of data rather than an action: "either A or B",
# "what does a hit contain", "what do I get back", "which errors can ...", "ways it can fail".
_SHAPE_WORDS = re.compile(
    r"\beither\b.+\bor\b|\bwhat\s+(does|do)\s+.*\b(contain|hold|carry|look\s+like)\b|"
    r"\bget\s+back\b|\b(what|which)\s+(\w+\s+){0,2}(errors?|messages?|options?|states?)\b|"
    r"\bways\b.*\b(fail|go\s+wrong)\b",
    re.IGNORECASE,
)


# A question that asks for tests ("a test that...", "unit tests for", `parse_test`) is
# answered by test code, so `demote` stands down for it; "test whether" (a verb) does not.
_ASKS_FOR_TESTS = re.compile(
    r"\b(unit\s+tests?|tests|test\s+(that|making|checking|case|cases|suite|fixtures?|helpers?)|"
    r"(a|an|the|example)\s+test)\b|\w_test\b",
    re.IGNORECASE,
)


def effective_policy(policy: TestPolicy, query: str) -> TestPolicy:
    """The policy a query gets: `demote` becomes `include` when the query asks for tests."""
    if policy == "demote" and _ASKS_FOR_TESTS.search(query):
        return "include"
    return policy


def query_intent(query: str, looks_like_code: bool, wide_types: bool = False) -> Intent:
    """A rough class of question, which decides the priors that apply and the features the
    learned ranker crosses with kind. Checked in order: identifier, how-to, type, prose.
    `wide_types` also reads the shape cues of _SHAPE_WORDS as a type question."""
    if looks_like_code:
        return "identifier"
    if _HOWTO.search(query):
        return "howto"
    if _TYPE_WORDS.search(query) or (wide_types and _SHAPE_WORDS.search(query)):
        return "type"
    return "nl"


_QUOTED = re.compile(r"[\"`]([^\"`]{4,})[\"`]")


def literal_phrase(query: str) -> str | None:
    """The words a query quotes (`"No such file"`), or the whole query when it is several
    words: code holding it verbatim (a message, a usage string) is what the user saw."""
    quoted = _QUOTED.search(query)
    phrase = quoted.group(1) if quoted else query.strip().rstrip("?.!")
    phrase = " ".join(phrase.split()).lower()
    if quoted is None and len(phrase.split()) < 2:
        return None  # one bare word is an identifier, found elsewhere in many chunks
    return phrase or None


def holds_phrase(phrase: str | None, text: str) -> bool:
    """Whether the chunk's code holds the phrase, ignoring case and runs of white space."""
    return bool(phrase) and phrase in " ".join(text.split()).lower()  # type: ignore[operator]


# One name, bare or module-qualified: `Duration`, `duration.Duration`,
# `gleam/time/duration.Duration`, in backticks or not.
_NAME = re.compile(
    r"`?(?:(?P<module>[a-z_][a-z0-9_]*(?:/[a-z_][a-z0-9_]*)*)\.)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)`?"
)
# A question that asks what one name is, where it is, or what it does.
_ASKS_ABOUT_NAME = re.compile(
    r"(?:what\s*(?:'s|is|are)|where\s+is|show\s+me)\s+(?:an?\s+|the\s+)?(?P<ref>\S+?)"
    r"(?:\s+(?:type|function|constant|record|defined|declared))?"
    r"|what\s+does\s+(?P<does>\S+)\s+(?:do|mean|hold|return)",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class NamedQuery:
    """A definition the query names: `module` is empty for a bare name, else the module
    or its trailing path (`duration` for gleam/time/duration)."""

    name: str
    module: str = ""

    def matches(self, module: str, name: str) -> bool:
        """Whether a definition is the one named: the name in any case, the module in full
        or by its trailing path."""
        if name.lower() != self.name.lower():
            return False
        return not self.module or module == self.module or module.endswith("/" + self.module)


def named_in(query: str) -> NamedQuery | None:
    """The definition a query is exactly the name of, or asks about ("what is a Duration?").

    Why: a definition's own name is the most precise query there is, yet dense search
    reads `Duration` as the idea of time spans, and BM25 finds the word in every function
    that takes or returns one, so the type itself sank below them (issue 30)."""
    text = " ".join(query.split()).rstrip("?.! ")
    asked = _ASKS_ABOUT_NAME.fullmatch(text)
    if asked is not None:
        text = asked.group("ref") or asked.group("does")
    found = _NAME.fullmatch(text)
    if found is None:
        return None
    return NamedQuery(found.group("name"), found.group("module") or "")


@dataclass(frozen=True, slots=True)
class Priors:
    """Factors on a hit's fused score; 1.0 switches a prior off.

    `aside` is the factor for test and example code under `--tests demote`; `type_lean`
    multiplies type and type-alias chunks for type questions; `private` multiplies private
    definitions; `module_howto` multiplies module chunks for how-to questions, `howto_type`
    type chunks for them ("how do I ..." is answered by a function to call); `literal`
    multiplies chunks whose code holds the query's phrase verbatim (see literal_phrase).
    `prose_type` multiplies type chunks for the other prose questions (intent `nl`: no type
    or shape words, no "how do I"): a sentence describing what happens, "parse a connection
    string into pool settings", is answered by the function that does it, and a record type
    full of the same nouns outranked it in a quarter of the dev half's misses.
    `wide_types` widens what counts as a type question (see query_intent). `central` is the
    factor for the most referenced definition of the index, and scales down to 1.0 for one
    nothing references; `central_by` is how centrality is read: `callers` (how many
    definitions reference it, see centrality) or `pagerank` (see pagerank).
    `names_first` is a stage rather than a factor: when the query is a definition's name or
    asks what one is (see named_in), that definition's chunk goes first whatever its score
    (gbr.core.rank.search.Searcher.candidates), its own spelling before other cases.
    """

    tests: TestPolicy = DEFAULT_TEST_POLICY
    aside: float = 0.5
    type_lean: float = 1.0
    private: float = 1.0
    module_howto: float = 1.0
    howto_type: float = 1.0
    prose_type: float = 1.0
    literal: float = 1.0
    wide_types: bool = False
    central: float = 1.0
    central_by: Literal["callers", "pagerank"] = "callers"
    names_first: bool = False

    def with_tests(self, tests: TestPolicy) -> Priors:
        return replace(self, tests=tests)

    def intent(self, query: str, looks_like_code: bool) -> Intent:
        return query_intent(query, looks_like_code, self.wide_types)

    def named(self, query: str) -> NamedQuery | None:
        """The definition the query names, when the names-first stage is on."""
        return named_in(query) if self.names_first else None

    def factor(
        self,
        intent: Intent,
        path: str,
        name: str,
        kind: str,
        visibility: str,
        verbatim: bool = False,
        centrality: float = 0.0,
    ) -> float:
        """The product of the priors that apply; `verbatim`: the code holds the query's phrase,
        `centrality` (0..1): how referenced the definition is in the code graph."""
        f = 1.0 + (self.central - 1.0) * centrality
        if self.tests == "demote" and is_aside(path, name):
            f *= self.aside
        if intent == "type" and kind in _TYPE_KINDS:
            f *= self.type_lean
        if visibility == "private":
            f *= self.private
        if intent == "howto" and kind == "module":
            f *= self.module_howto
        if intent == "howto" and kind in _TYPE_KINDS:
            f *= self.howto_type
        if intent == "nl" and kind in _TYPE_KINDS:
            f *= self.prose_type
        if verbatim:
            f *= self.literal
        return f


NO_PRIORS = Priors(tests="include", aside=1.0)
_TYPE_KINDS = frozenset({"type", "type_alias", "external_type"})


Edge = tuple[Node, Node]  # (referring definition, the one it references)


def graph_centrality(edges: Sequence[Edge], by: str) -> dict[Node, float]:
    """Centrality 0..1 of each referenced definition, read the way `Priors.central_by` says."""
    if by == "pagerank":
        return pagerank(edges)
    return centrality(in_degrees(edges))


def pagerank(edges: Sequence[Edge], damping: float = 0.85, rounds: int = 50) -> dict[Node, float]:
    """PageRank over the reference graph, scaled so the top definition is 1.0: a definition
    counts more when central definitions reference it, not merely many leaves. A node
    with no references out spreads its rank evenly, as the usual formulation does."""
    nodes = sorted({n for edge in edges for n in edge})
    if not nodes:
        return {}
    index = {n: i for i, n in enumerate(nodes)}
    out: dict[int, list[int]] = {}
    for source, target in edges:
        out.setdefault(index[source], []).append(index[target])
    size = len(nodes)
    rank = [1.0 / size] * size
    for _ in range(rounds):
        spread = sum(rank[i] for i in range(size) if i not in out) / size
        nxt = [(1.0 - damping) / size + damping * spread] * size
        for origin, targets in out.items():
            share = damping * rank[origin] / len(targets)
            for aim in targets:
                nxt[aim] += share
        rank = nxt
    referenced = {index[t] for _, t in edges}
    top = max(rank[i] for i in referenced)
    return {nodes[i]: rank[i] / top for i in referenced}


def centrality(in_degrees: Mapping[Node, int]) -> dict[Node, float]:
    """Each definition's share of the code graph's attention, 0..1, from how many other
    definitions reference it: log-scaled, so the handful of core types that everything
    mentions do not drown the functions a few callers share (Aider's repository map ranks
    definitions the same way, by references, with PageRank)."""
    top = max(in_degrees.values(), default=0)
    if top <= 0:
        return {}
    scale = math.log1p(top)
    return {key: math.log1p(n) / scale for key, n in in_degrees.items() if n > 0}


def parse_test_policy(value: str) -> TestPolicy:
    """The `--tests` value, or a ConfigError naming the accepted ones."""
    from gbr.core.errors import ConfigError

    if value not in TEST_POLICIES:
        raise ConfigError(f"unknown --tests {value!r}; use one of {', '.join(TEST_POLICIES)}")
    return value
