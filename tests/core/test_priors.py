"""Path and kind priors: which code counts as tests or examples, and what a question asks for."""

from __future__ import annotations

import pytest

from gbr.core.errors import ConfigError
from gbr.core.rank.priors import (
    NO_PRIORS,
    Priors,
    effective_policy,
    holds_phrase,
    is_aside,
    is_example,
    is_test,
    literal_phrase,
    parse_test_policy,
    query_intent,
)


@pytest.mark.parametrize(
    ("path", "name", "expected"),
    [
        ("test/isbn_test.gleam", "parse_isbn10_test", True),
        ("test/support/fixtures.gleam", "load", True),  # any file under test/
        ("src/glint_test.gleam", "helper", True),  # a *_test module outside test/
        ("src/pkg.gleam", "roundtrip_test", True),  # a *_test function
        ("pog/test/pog_test.gleam", "main", True),  # a package inside a bigger tree
        ("src/testing.gleam", "contest", False),  # "test" inside a word is not a test
        ("src/pog.gleam", "query", False),
    ],
)
def test_is_test(path: str, name: str, expected: bool) -> None:
    assert is_test(path, name) is expected


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("examples/todo/src/app.gleam", True),
        ("example/src/main.gleam", True),
        ("glisten/examples/echo/src/echo.gleam", True),
        ("src/lustre/example_helpers.gleam", False),
        ("src/examples.gleam", False),  # a module named examples is library code
    ],
)
def test_is_example(path: str, expected: bool) -> None:
    assert is_example(path) is expected


def test_is_aside_covers_both() -> None:
    assert is_aside("examples/a/src/a.gleam") and is_aside("test/a_test.gleam")
    assert not is_aside("src/a.gleam", "parse")


@pytest.mark.parametrize(
    ("query", "code", "intent"),
    [
        ("list.map", True, "identifier"),
        ("How do I open a connection pool?", False, "howto"),
        ("how to read a file line by line", False, "howto"),
        ("the record holding a connection's settings", False, "type"),
        ("what errors can a query return as variants", False, "type"),
        ("what can go wrong when unlocking", False, "type"),
        ("the signature of a request handler", False, "type"),
        ("split a string on a regular expression", False, "nl"),
    ],
)
def test_query_intent(query: str, code: bool, intent: str) -> None:
    assert query_intent(query, code) == intent


@pytest.mark.parametrize(
    ("query", "narrow", "wide"),
    [
        ("result of a search: either matching rows or a suggestion", "nl", "type"),
        ("what does each match contain - the text and the groups", "nl", "type"),
        ("what do I get back when the pattern is invalid", "nl", "type"),
        ("which posix errors can a file operation return", "nl", "type"),
        ("split a string on a regular expression", "nl", "nl"),  # an action stays prose
        ("how do I pick either a file or a folder", "howto", "howto"),  # how-to comes first
    ],
)
def test_wide_types_reads_shape_questions_as_type_questions(
    query: str, narrow: str, wide: str
) -> None:
    assert query_intent(query, False) == narrow
    assert query_intent(query, False, wide_types=True) == wide
    assert Priors(wide_types=True).intent(query, False) == wide


@pytest.mark.parametrize(
    ("query", "phrase"),
    [
        ('"No such file or directory"', "no such file or directory"),
        ("the error `Invalid   interface` here", "invalid interface"),
        ("Invalid interface provided", "invalid interface provided"),  # several words
        ("parse_config", None),  # one bare word: an identifier, not a phrase
        ('"ab"', None),  # too short a quote to mean anything; nor is it two words
    ],
)
def test_literal_phrase(query: str, phrase: str | None) -> None:
    assert literal_phrase(query) == phrase


def test_holds_phrase_ignores_case_and_white_space() -> None:
    code = 'Error(\n  "Invalid  Interface provided")'
    assert holds_phrase("invalid interface provided", code)
    assert not holds_phrase("invalid interface given", code)
    assert not holds_phrase(None, code)


def test_priors_factor_each_switch_alone() -> None:
    lib = ("src/a.gleam", "parse", "function", "pub")
    test = ("test/a_test.gleam", "parse_test", "function", "pub")
    assert Priors(aside=0.5).factor("nl", *test) == 0.5
    assert Priors(aside=0.5).factor("nl", *lib) == 1.0
    assert Priors(tests="include", aside=0.5).factor("nl", *test) == 1.0
    assert Priors(aside=1.0, type_lean=1.5).factor("type", "src/a.gleam", "T", "type", "pub") == 1.5
    assert Priors(aside=1.0, type_lean=1.5).factor("nl", "src/a.gleam", "T", "type", "pub") == 1.0
    assert Priors(private=0.8).factor("nl", "src/a.gleam", "f", "function", "private") == 0.8
    assert Priors(module_howto=0.5).factor("howto", "src/a.gleam", "a", "module", "pub") == 0.5
    assert Priors(module_howto=0.5).factor("nl", "src/a.gleam", "a", "module", "pub") == 1.0
    assert NO_PRIORS.factor("howto", *test) == 1.0
    assert Priors(howto_type=0.5).factor("howto", "src/a.gleam", "T", "type", "pub") == 0.5
    assert Priors(howto_type=0.5).factor("type", "src/a.gleam", "T", "type", "pub") == 1.0
    assert Priors(howto_type=0.5).factor("howto", *lib) == 1.0
    assert Priors(prose_type=0.5).factor("nl", "src/a.gleam", "T", "type_alias", "pub") == 0.5
    assert Priors(prose_type=0.5).factor("howto", "src/a.gleam", "T", "type", "pub") == 1.0
    assert Priors(prose_type=0.5).factor("nl", *lib) == 1.0
    assert Priors(literal=2.0).factor("nl", *lib, verbatim=True) == 2.0
    assert Priors(literal=2.0).factor("nl", *lib) == 1.0


def test_parse_test_policy_names_the_choices() -> None:
    assert parse_test_policy("exclude") == "exclude"
    with pytest.raises(ConfigError, match="include, demote, exclude"):
        parse_test_policy("hide")


@pytest.mark.parametrize(
    ("query", "policy"),
    [
        ("unit test checking that a late return is capped", "include"),
        ("where is the test for lowercase check digits", "include"),
        ("bad_checksum_test", "include"),
        ("sample_book test fixture", "include"),
        ("how do I test whether some text matches a regex", "demote"),  # the verb
        ("probabilistic primality check", "demote"),
    ],
)
def test_demote_stands_down_when_the_query_asks_for_tests(query: str, policy: str) -> None:
    assert effective_policy("demote", query) == policy
    assert effective_policy("exclude", query) == "exclude"  # an explicit choice stands
