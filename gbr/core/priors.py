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

import re
from dataclasses import dataclass, replace
from typing import Literal, get_args

from gbr.core.records import DEFAULT_TEST_POLICY, TestPolicy

__all__ = [
    "DEFAULT_TEST_POLICY",
    "NO_PRIORS",
    "TEST_POLICIES",
    "TEST_POLICY_HELP",
    "Intent",
    "Priors",
    "TestPolicy",
    "effective_policy",
    "is_aside",
    "is_example",
    "is_test",
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


def query_intent(query: str, looks_like_code: bool) -> Intent:
    """A rough class of question, which decides the priors that apply and the features the
    learned ranker crosses with kind. Checked in order: identifier, how-to, type, prose."""
    if looks_like_code:
        return "identifier"
    if _HOWTO.search(query):
        return "howto"
    if _TYPE_WORDS.search(query):
        return "type"
    return "nl"


@dataclass(frozen=True, slots=True)
class Priors:
    """Factors on a hit's fused score; 1.0 switches a prior off.

    `aside` is the factor for test and example code under `--tests demote`; `type_lean`
    multiplies type and type-alias chunks for type questions; `private` multiplies private
    definitions; `module_howto` multiplies module chunks for how-to questions.
    """

    tests: TestPolicy = DEFAULT_TEST_POLICY
    aside: float = 0.5
    type_lean: float = 1.0
    private: float = 1.0
    module_howto: float = 1.0

    def with_tests(self, tests: TestPolicy) -> Priors:
        return replace(self, tests=tests)

    def factor(self, intent: Intent, path: str, name: str, kind: str, visibility: str) -> float:
        f = 1.0
        if self.tests == "demote" and is_aside(path, name):
            f *= self.aside
        if intent == "type" and kind in ("type", "type_alias", "external_type"):
            f *= self.type_lean
        if visibility == "private":
            f *= self.private
        if intent == "howto" and kind == "module":
            f *= self.module_howto
        return f


NO_PRIORS = Priors(tests="include", aside=1.0)


def parse_test_policy(value: str) -> TestPolicy:
    """The `--tests` value, or a ConfigError naming the accepted ones."""
    from gbr.core.errors import ConfigError

    if value not in TEST_POLICIES:
        raise ConfigError(f"unknown --tests {value!r}; use one of {', '.join(TEST_POLICIES)}")
    return value  # type: ignore[return-value]
