//// String utilities used across the service: URL slugs, display
//// truncation, title casing, fuzzy matching and fixed-width wrapping.
////
//// All functions operate on grapheme clusters rather than bytes or code
//// points, so accented titles and emoji in member names are never split in
//// the middle of a character.

import gleam/int
import gleam/list
import gleam/option.{type Option, None, Some}
import gleam/order
import gleam/string

/// Words kept in lowercase by `title_case` unless they start or end a title.
const small_words = [
  "a", "an", "and", "as", "at", "but", "by", "for", "in", "nor", "of", "on",
  "or", "the", "to", "up", "via", "with",
]

const ellipsis = "…"

/// Options controlling `distance_with`.
pub type DistanceOptions {
  DistanceOptions(
    /// Compare case-insensitively.
    ignore_case: Bool,
    /// Collapse runs of whitespace and trim both ends before comparing.
    collapse_whitespace: Bool,
    /// Stop early and return `None` once the distance is known to exceed
    /// this bound. `None` means no bound.
    max_distance: Option(Int),
  )
}

/// Exact, case-sensitive comparison without a bound.
pub fn strict() -> DistanceOptions {
  DistanceOptions(
    ignore_case: False,
    collapse_whitespace: False,
    max_distance: None,
  )
}

/// The options used for search suggestions: case-insensitive, whitespace
/// tolerant, and bounded to 3 edits.
pub fn lenient() -> DistanceOptions {
  DistanceOptions(
    ignore_case: True,
    collapse_whitespace: True,
    max_distance: Some(3),
  )
}

/// Turn arbitrary text into a URL-safe slug: lowercase ASCII letters and
/// digits separated by single hyphens. Common Latin accents are folded
/// (`é` → `e`), everything else that is not alphanumeric becomes a
/// separator, and leading/trailing separators are dropped.
///
/// ```gleam
/// slugify("  The Left Hand of Darkness!  ")
/// // -> "the-left-hand-of-darkness"
/// ```
pub fn slugify(text: String) -> String {
  text
  |> string.lowercase
  |> string.to_graphemes
  |> list.map(fold_accent)
  |> list.map(fn(c) {
    case is_alphanumeric(c) {
      True -> c
      False -> "-"
    }
  })
  |> string.concat
  |> string.split("-")
  |> list.filter(fn(part) { part != "" })
  |> string.join("-")
}

/// Shorten `text` to at most `max` graphemes including the trailing `…`.
/// When possible the cut is moved back to the previous space so words are
/// not chopped, but never by more than a third of the available length.
/// Text that already fits is returned unchanged; `max <= 1` yields just the
/// ellipsis for non-empty overflow.
pub fn truncate(text: String, max: Int) -> String {
  let length = string.length(text)
  case length <= max {
    True -> text
    False if max <= 1 -> ellipsis
    False -> {
      let hard = string.slice(text, 0, max - 1)
      let min_cut = { max - 1 } * 2 / 3
      let cut = case last_space_index(hard) {
        Some(i) if i >= min_cut -> string.slice(hard, 0, i)
        _ -> hard
      }
      string.trim_end(cut) <> ellipsis
    }
  }
}

/// Title-case a book title using the usual English conventions: every word
/// is capitalised except short articles, conjunctions and prepositions,
/// which stay lowercase unless they are the first or last word.
/// Words that are already all-caps (acronyms such as `NASA`) are kept.
pub fn title_case(text: String) -> String {
  let words =
    text
    |> string.split(" ")
    |> list.filter(fn(w) { w != "" })
  let last = list.length(words) - 1
  words
  |> list.index_map(fn(word, i) {
    let lower = string.lowercase(word)
    let inner = i != 0 && i != last
    case inner && list.contains(small_words, lower) {
      True -> lower
      False -> capitalise_word(word)
    }
  })
  |> string.join(" ")
}

fn capitalise_word(word: String) -> String {
  case string.uppercase(word) == word && string.length(word) > 1 {
    True -> word
    False ->
      word
      |> string.split("-")
      |> list.map(string.capitalise)
      |> string.join("-")
  }
}

/// Levenshtein edit distance with default (strict) options.
pub fn levenshtein(a: String, b: String) -> Int {
  case distance_with(a, b, strict()) {
    Some(d) -> d
    // Unreachable with no bound, but keep the function total.
    None -> int.max(string.length(a), string.length(b))
  }
}

/// Levenshtein edit distance between `a` and `b` under `options`.
///
/// The implementation keeps a single row of the dynamic-programming matrix
/// and trims the common prefix and suffix first, which makes the common
/// case of "almost identical titles" cheap. When `max_distance` is set the
/// computation stops as soon as every cell in the current row exceeds the
/// bound and returns `None`; the caller only learns that the strings are
/// "too far apart", not by how much.
pub fn distance_with(
  a: String,
  b: String,
  options: DistanceOptions,
) -> Option(Int) {
  let prepare = fn(s: String) -> List(String) {
    let s = case options.collapse_whitespace {
      True -> collapse_spaces(s)
      False -> s
    }
    let s = case options.ignore_case {
      True -> string.lowercase(s)
      False -> s
    }
    string.to_graphemes(s)
  }
  let #(xs, ys) = strip_common_affixes(prepare(a), prepare(b))
  let len_x = list.length(xs)
  let len_y = list.length(ys)
  // Put the shorter string on the inner loop so rows stay small.
  let #(outer, inner, len_inner) = case len_x < len_y {
    True -> #(ys, xs, len_x)
    False -> #(xs, ys, len_y)
  }
  let within = fn(d: Int) -> Bool {
    case options.max_distance {
      None -> True
      Some(bound) -> d <= bound
    }
  }
  // The length difference is a lower bound on the distance.
  case int.absolute_value(len_x - len_y) {
    gap if gap > 0 && len_inner == 0 ->
      case within(gap) {
        True -> Some(gap)
        False -> None
      }
    gap ->
      case within(gap) {
        False -> None
        True -> {
          let first_row = list.range(0, len_inner)
          let result =
            outer
            |> list.index_fold(Ok(first_row), fn(acc, outer_char, i) {
              case acc {
                Error(Nil) -> Error(Nil)
                Ok(previous) -> {
                  let start = i + 1
                  let #(reversed, _) =
                    list.zip(inner, list.window_by_2(previous))
                    |> list.fold(#([start], start), fn(state, item) {
                      let #(row, left) = state
                      let #(inner_char, #(diagonal, up)) = item
                      let cost = case inner_char == outer_char {
                        True -> 0
                        False -> 1
                      }
                      let cell =
                        int.min(left + 1, up + 1)
                        |> int.min(diagonal + cost)
                      #([cell, ..row], cell)
                    })
                  let row = list.reverse(reversed)
                  let best = list.fold(row, start, int.min)
                  case within(best) {
                    True -> Ok(row)
                    False -> Error(Nil)
                  }
                }
              }
            })
          case result {
            Error(Nil) -> None
            Ok(row) -> {
              let assert Ok(distance) = list.last(row)
              case within(distance) {
                True -> Some(distance)
                False -> None
              }
            }
          }
        }
      }
  }
}

/// From `candidates`, return those within `lenient()` distance of `query`,
/// closest first, ties broken alphabetically. Used for "did you mean"
/// suggestions on failed searches.
pub fn suggest(query: String, candidates: List(String), limit: Int) -> List(String) {
  candidates
  |> list.filter_map(fn(candidate) {
    case distance_with(query, candidate, lenient()) {
      Some(d) -> Ok(#(d, candidate))
      None -> Error(Nil)
    }
  })
  |> list.sort(fn(x, y) {
    case int.compare(x.0, y.0) {
      order.Eq -> string.compare(x.1, y.1)
      other -> other
    }
  })
  |> list.take(limit)
  |> list.map(fn(pair) { pair.1 })
}

/// Greedy word wrap to `width` columns. Existing line breaks are kept as
/// paragraph boundaries. Words longer than `width` are hard-split rather
/// than allowed to overflow, so every returned line is at most `width`
/// graphemes. A non-positive width returns the text as a single line.
pub fn word_wrap(text: String, width: Int) -> List(String) {
  case width <= 0 {
    True -> [text]
    False ->
      text
      |> string.split("\n")
      |> list.flat_map(fn(paragraph) { wrap_paragraph(paragraph, width) })
  }
}

fn wrap_paragraph(paragraph: String, width: Int) -> List(String) {
  let words =
    paragraph
    |> string.split(" ")
    |> list.filter(fn(w) { w != "" })
    |> list.flat_map(fn(w) { hard_split(w, width) })
  let #(lines, current) =
    list.fold(words, #([], ""), fn(acc, word) {
      let #(lines, current) = acc
      case current {
        "" -> #(lines, word)
        _ ->
          case string.length(current) + 1 + string.length(word) <= width {
            True -> #(lines, current <> " " <> word)
            False -> #([current, ..lines], word)
          }
      }
    })
  [current, ..lines]
  |> list.reverse
}

fn hard_split(word: String, width: Int) -> List(String) {
  case string.length(word) > width {
    False -> [word]
    True ->
      word
      |> string.to_graphemes
      |> list.sized_chunk(width)
      |> list.map(string.concat)
  }
}

/// Collapse every run of whitespace into a single space and trim the ends.
pub fn collapse_spaces(text: String) -> String {
  text
  |> string.replace("\t", " ")
  |> string.replace("\n", " ")
  |> string.split(" ")
  |> list.filter(fn(part) { part != "" })
  |> string.join(" ")
}

/// Left-pad or truncate `text` so it occupies exactly `width` columns.
/// Used by the plain-text reports.
pub fn fit(text: String, width: Int) -> String {
  case string.length(text) {
    n if n > width -> truncate(text, width)
    n -> text <> string.repeat(" ", width - n)
  }
}

fn strip_common_affixes(
  xs: List(String),
  ys: List(String),
) -> #(List(String), List(String)) {
  let #(xs, ys) = drop_common_prefix(xs, ys)
  let #(rx, ry) = drop_common_prefix(list.reverse(xs), list.reverse(ys))
  #(list.reverse(rx), list.reverse(ry))
}

fn drop_common_prefix(
  xs: List(String),
  ys: List(String),
) -> #(List(String), List(String)) {
  case xs, ys {
    [x, ..xs_rest], [y, ..ys_rest] if x == y ->
      drop_common_prefix(xs_rest, ys_rest)
    _, _ -> #(xs, ys)
  }
}

fn last_space_index(text: String) -> Option(Int) {
  text
  |> string.to_graphemes
  |> list.index_fold(None, fn(found, c, i) {
    case c {
      " " -> Some(i)
      _ -> found
    }
  })
}

fn is_alphanumeric(c: String) -> Bool {
  case c {
    "a" | "b" | "c" | "d" | "e" | "f" | "g" | "h" | "i" | "j" | "k" | "l" | "m" ->
      True
    "n" | "o" | "p" | "q" | "r" | "s" | "t" | "u" | "v" | "w" | "x" | "y" | "z" ->
      True
    "0" | "1" | "2" | "3" | "4" | "5" | "6" | "7" | "8" | "9" -> True
    _ -> False
  }
}

fn fold_accent(c: String) -> String {
  case c {
    "à" | "á" | "â" | "ã" | "ä" | "å" -> "a"
    "ç" -> "c"
    "è" | "é" | "ê" | "ë" -> "e"
    "ì" | "í" | "î" | "ï" -> "i"
    "ñ" -> "n"
    "ò" | "ó" | "ô" | "õ" | "ö" | "ø" -> "o"
    "ù" | "ú" | "û" | "ü" -> "u"
    "ý" | "ÿ" -> "y"
    "ß" -> "ss"
    "æ" -> "ae"
    "œ" -> "oe"
    other -> other
  }
}
