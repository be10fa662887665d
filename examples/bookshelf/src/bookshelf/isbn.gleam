//// ISBN-10 and ISBN-13 parsing, validation and conversion.
////
//// Input is accepted in the forms people actually type: with or without
//// hyphens and spaces, with a lowercase `x` check digit, with an `ISBN`
//// prefix. Once parsed, an `Isbn` is always stored normalised as its
//// 13-digit form, which is what the catalog uses as a key.

import gleam/int
import gleam/list
import gleam/result
import gleam/string

/// A validated ISBN, always held in its 13-digit canonical form.
pub opaque type Isbn {
  Isbn(digits: String)
}

/// Why a piece of text is not a valid ISBN.
pub type IsbnError {
  /// After stripping separators the input had neither 10 nor 13 characters.
  WrongLength(length: Int)
  /// A character that is not a digit (or `X` in the last ISBN-10 position).
  InvalidCharacter(char: String, position: Int)
  /// The check digit does not match the rest of the number.
  BadChecksum(expected: String, found: String)
  /// Only 978-prefixed ISBN-13s have an ISBN-10 equivalent.
  NoIsbn10Equivalent
}

/// Parse an ISBN-10 or ISBN-13 in any common notation.
///
/// ```gleam
/// parse("0-306-40615-2") |> result.map(to_string)
/// // -> Ok("9780306406157")
/// ```
pub fn parse(input: String) -> Result(Isbn, IsbnError) {
  let cleaned = normalise(input)
  case string.length(cleaned) {
    10 -> {
      use _ <- result.try(validate_isbn10(cleaned))
      Ok(Isbn(isbn10_to_13_unchecked(cleaned)))
    }
    13 -> {
      use _ <- result.try(validate_isbn13(cleaned))
      Ok(Isbn(cleaned))
    }
    n -> Error(WrongLength(n))
  }
}

/// `True` when `input` is a valid ISBN-10 or ISBN-13.
pub fn is_valid(input: String) -> Bool {
  result.is_ok(parse(input))
}

/// The canonical 13-digit representation, without separators.
pub fn to_string(isbn: Isbn) -> String {
  isbn.digits
}

/// The ISBN-10 equivalent, when one exists. ISBN-13s in the 979 range were
/// never issued as ISBN-10 and return `NoIsbn10Equivalent`.
pub fn to_isbn10(isbn: Isbn) -> Result(String, IsbnError) {
  case isbn.digits {
    "978" <> rest -> {
      let body = string.drop_end(rest, 1)
      Ok(body <> isbn10_check_digit(body))
    }
    _ -> Error(NoIsbn10Equivalent)
  }
}

/// Hyphenate for display as `978-X-XXXX-XXXX-X`. Proper hyphenation depends
/// on registration-group ranges we do not ship, so this uses a fixed layout
/// that is readable but not authoritative.
pub fn format(isbn: Isbn) -> String {
  let d = isbn.digits
  [
    string.slice(d, 0, 3),
    string.slice(d, 3, 1),
    string.slice(d, 4, 4),
    string.slice(d, 8, 4),
    string.slice(d, 12, 1),
  ]
  |> string.join("-")
}

/// Strip an optional `ISBN`/`ISBN-13:` prefix, spaces and hyphens, and
/// upper-case the result so a trailing `x` becomes `X`.
pub fn normalise(input: String) -> String {
  let upper = string.uppercase(string.trim(input))
  let without_prefix = case upper {
    "ISBN-13:" <> rest | "ISBN-10:" <> rest -> rest
    "ISBN:" <> rest | "ISBN" <> rest -> rest
    other -> other
  }
  without_prefix
  |> string.to_graphemes
  |> list.filter(fn(c) { c != "-" && c != " " })
  |> string.concat
}

/// Convert a valid ISBN-10 string to ISBN-13. Returns the validation error
/// if the input is not a valid ISBN-10.
pub fn convert_10_to_13(isbn10: String) -> Result(String, IsbnError) {
  let cleaned = normalise(isbn10)
  case string.length(cleaned) {
    10 -> {
      use _ <- result.try(validate_isbn10(cleaned))
      Ok(isbn10_to_13_unchecked(cleaned))
    }
    n -> Error(WrongLength(n))
  }
}

/// Describe an `IsbnError` for API clients.
pub fn describe_error(error: IsbnError) -> String {
  case error {
    WrongLength(n) ->
      "an ISBN has 10 or 13 digits, this one has " <> int.to_string(n)
    InvalidCharacter(c, pos) ->
      "unexpected character "
      <> string.inspect(c)
      <> " at position "
      <> int.to_string(pos + 1)
    BadChecksum(expected, found) ->
      "check digit should be " <> expected <> " but is " <> found
    NoIsbn10Equivalent -> "979-prefixed ISBNs have no ISBN-10 form"
  }
}

fn validate_isbn10(s: String) -> Result(Nil, IsbnError) {
  let chars = string.to_graphemes(s)
  let body = list.take(chars, 9)
  let assert [check] = list.drop(chars, 9)
  use _ <- result.try(all_digits(body, 0))
  use _ <- result.try(case check {
    "X" -> Ok(Nil)
    c ->
      case int.parse(c) {
        Ok(_) -> Ok(Nil)
        Error(_) -> Error(InvalidCharacter(c, 9))
      }
  })
  let expected = isbn10_check_digit(string.concat(body))
  case expected == check {
    True -> Ok(Nil)
    False -> Error(BadChecksum(expected: expected, found: check))
  }
}

fn validate_isbn13(s: String) -> Result(Nil, IsbnError) {
  let chars = string.to_graphemes(s)
  use _ <- result.try(all_digits(chars, 0))
  let body = list.take(chars, 12) |> string.concat
  let found = string.slice(s, 12, 1)
  let expected = isbn13_check_digit(body)
  case expected == found {
    True -> Ok(Nil)
    False -> Error(BadChecksum(expected: expected, found: found))
  }
}

fn all_digits(chars: List(String), position: Int) -> Result(Nil, IsbnError) {
  case chars {
    [] -> Ok(Nil)
    [c, ..rest] ->
      case int.parse(c) {
        Ok(_) -> all_digits(rest, position + 1)
        Error(_) -> Error(InvalidCharacter(c, position))
      }
  }
}

fn digits_of(s: String) -> List(Int) {
  s
  |> string.to_graphemes
  |> list.filter_map(int.parse)
}

/// Check digit for the first 9 digits of an ISBN-10: weights 10 down to 2,
/// result modulo 11, with 10 written as `X`.
fn isbn10_check_digit(body: String) -> String {
  let sum =
    digits_of(body)
    |> list.index_fold(0, fn(acc, digit, i) { acc + digit * { 10 - i } })
  case { 11 - sum % 11 } % 11 {
    10 -> "X"
    n -> int.to_string(n)
  }
}

/// Check digit for the first 12 digits of an ISBN-13: alternating weights
/// 1 and 3, result modulo 10.
fn isbn13_check_digit(body: String) -> String {
  let sum =
    digits_of(body)
    |> list.index_fold(0, fn(acc, digit, i) {
      case i % 2 {
        0 -> acc + digit
        _ -> acc + digit * 3
      }
    })
  int.to_string({ 10 - sum % 10 } % 10)
}

fn isbn10_to_13_unchecked(isbn10: String) -> String {
  let body = "978" <> string.slice(isbn10, 0, 9)
  body <> isbn13_check_digit(body)
}
