//// Topic names and subscription patterns.
////
//// A topic is a slash separated path such as `sensors/kitchen/temp`. A
//// pattern may additionally contain `*`, standing for exactly one level, and
//// a final `#`, standing for any number of remaining levels (including none).
////
//// Topics whose first level starts with `$` (for example `$sys/uptime`) are
//// reserved for the broker. A pattern that begins with a wildcard never
//// matches them; clients have to spell out the `$` level explicitly.

import gleam/bool
import gleam/int
import gleam/list
import gleam/order.{type Order}
import gleam/result
import gleam/string

/// Character separating the levels of a topic.
pub const separator = "/"

/// Pattern segment standing for exactly one level.
pub const single_wildcard = "*"

/// Pattern segment standing for every remaining level.
pub const multi_wildcard = "#"

/// Deepest topic (in levels) the broker accepts.
pub const max_depth = 16

/// Longest single level, counted in graphemes.
pub const max_level_length = 64

/// Characters that may never appear inside a level.
const forbidden_characters = ["+", " ", "\t", "\n", "\r"]

/// The levels of a topic, outermost first.
pub type Levels =
  List(String)

/// A validated, concrete topic name. It can never contain wildcards, so a
/// value of this type is always safe to publish to.
pub opaque type Topic {
  Topic(levels: Levels)
}

/// One piece of a subscription pattern.
pub type Segment {
  /// Matches a level equal to the given string.
  Literal(String)
  /// `*`: matches any single level.
  AnyLevel
  /// `#`: matches whatever is left, only allowed at the end.
  AnyRest
}

/// A parsed subscription filter together with the text it came from.
pub type Pattern {
  Pattern(segments: List(Segment), source: String)
}

/// Why a topic or pattern was rejected.
pub type TopicError {
  EmptyTopic
  EmptyLevel(position: Int)
  TooDeep(depth: Int)
  LevelTooLong(position: Int, length: Int)
  WildcardInTopic(position: Int)
  MisplacedRest(position: Int)
  ForbiddenCharacter(position: Int, character: String)
}

/// Parse a concrete topic name such as `"sensors/kitchen/temp"`.
///
/// Wildcards are rejected: use `parse_pattern` for subscription filters.
pub fn parse(name: String) -> Result(Topic, TopicError) {
  use levels <- result.try(split_levels(name))
  let wildcard =
    levels
    |> list.index_map(fn(level, index) { #(index, level) })
    |> list.find(fn(pair) {
      pair.1 == single_wildcard || pair.1 == multi_wildcard
    })
  case wildcard {
    Ok(#(position, _)) -> Error(WildcardInTopic(position))
    Error(Nil) -> Ok(Topic(levels))
  }
}

/// Parse a subscription filter such as `"sensors/*/temp"` or `"logs/#"`.
pub fn parse_pattern(source: String) -> Result(Pattern, TopicError) {
  use levels <- result.try(split_levels(source))
  let last = list.length(levels) - 1
  use segments <- result.try(
    levels
    |> list.index_map(fn(level, index) { #(index, level) })
    |> list.try_map(fn(pair) {
      case pair {
        #(index, "#") if index == last -> Ok(AnyRest)
        #(index, "#") -> Error(MisplacedRest(index))
        #(_, "*") -> Ok(AnyLevel)
        #(_, level) -> Ok(Literal(level))
      }
    }),
  )
  Ok(Pattern(segments: segments, source: source))
}

/// A pattern that matches exactly one topic and nothing else.
pub fn exact(topic: Topic) -> Pattern {
  Pattern(
    segments: list.map(topic.levels, Literal),
    source: to_string(topic),
  )
}

fn split_levels(name: String) -> Result(Levels, TopicError) {
  use <- bool.guard(name == "", Error(EmptyTopic))
  let levels = string.split(name, separator)
  let depth = list.length(levels)
  use <- bool.guard(depth > max_depth, Error(TooDeep(depth)))
  levels
  |> list.index_map(fn(level, index) { #(index, level) })
  |> list.try_each(fn(pair) { validate_level(pair.1, pair.0) })
  |> result.replace(levels)
}

fn validate_level(level: String, position: Int) -> Result(Nil, TopicError) {
  let length = string.length(level)
  let too_long = length > max_level_length
  case level {
    "" -> Error(EmptyLevel(position))
    _ if too_long -> Error(LevelTooLong(position, length))
    _ ->
      case find_forbidden(level) {
        Ok(character) -> Error(ForbiddenCharacter(position, character))
        Error(Nil) -> Ok(Nil)
      }
  }
}

fn find_forbidden(level: String) -> Result(String, Nil) {
  level
  |> string.to_graphemes
  |> list.find(fn(character) { list.contains(forbidden_characters, character) })
}

/// Render a topic back to its slash separated form.
pub fn to_string(topic: Topic) -> String {
  string.join(topic.levels, separator)
}

/// The levels of a topic, outermost first.
pub fn levels(topic: Topic) -> Levels {
  topic.levels
}

/// Number of levels in the topic.
pub fn depth(topic: Topic) -> Int {
  list.length(topic.levels)
}

/// True for broker-internal topics such as `$sys/clients`.
pub fn is_system(topic: Topic) -> Bool {
  case topic.levels {
    ["$" <> _, ..] -> True
    _ -> False
  }
}

/// The topic one level up, or `Error(Nil)` for a single-level topic.
pub fn parent(topic: Topic) -> Result(Topic, Nil) {
  case list.reverse(topic.levels) {
    [] | [_] -> Error(Nil)
    [_, ..rest] -> Ok(Topic(list.reverse(rest)))
  }
}

/// Append one more level below `topic`.
pub fn child(topic: Topic, level: String) -> Result(Topic, TopicError) {
  let position = list.length(topic.levels)
  use <- bool.guard(position + 1 > max_depth, Error(TooDeep(position + 1)))
  use <- bool.guard(
    level == single_wildcard || level == multi_wildcard,
    Error(WildcardInTopic(position)),
  )
  use _ <- result.try(validate_level(level, position))
  Ok(Topic(list.append(topic.levels, [level])))
}

/// Does `ancestor` contain `descendant` (strictly) in the topic tree?
pub fn is_ancestor(ancestor: Topic, of descendant: Topic) -> Bool {
  let a = list.length(ancestor.levels)
  let d = list.length(descendant.levels)
  a < d && list.take(descendant.levels, a) == ancestor.levels
}

/// Check whether a subscription pattern selects a topic.
///
/// `*` consumes exactly one level and a trailing `#` consumes the rest.
/// Leading wildcards never select `$`-prefixed system topics.
pub fn matches(pattern: Pattern, topic: Topic) -> Bool {
  case pattern.segments, topic.levels {
    [AnyLevel, ..], ["$" <> _, ..] -> False
    [AnyRest], ["$" <> _, ..] -> False
    segments, levels -> match_segments(segments, levels)
  }
}

fn match_segments(segments: List(Segment), levels: Levels) -> Bool {
  case segments, levels {
    [], [] -> True
    [AnyRest], _ -> True
    [AnyLevel, ..rest], [_, ..more] -> match_segments(rest, more)
    [Literal(expected), ..rest], [level, ..more] if expected == level ->
      match_segments(rest, more)
    _, _ -> False
  }
}

/// Parse both arguments and match them in one go. Handy in tests and at
/// the protocol boundary where both sides are still plain strings.
pub fn matches_string(
  pattern source: String,
  topic name: String,
) -> Result(Bool, TopicError) {
  use pattern <- result.try(parse_pattern(source))
  use topic <- result.try(parse(name))
  Ok(matches(pattern, topic))
}

/// True when the pattern contains at least one wildcard segment.
pub fn has_wildcard(pattern: Pattern) -> Bool {
  list.any(pattern.segments, fn(segment) {
    case segment {
      Literal(_) -> False
      AnyLevel | AnyRest -> True
    }
  })
}

/// A score used to order overlapping patterns: literals weigh the most,
/// single-level wildcards less and the trailing `#` nothing at all.
pub fn specificity(pattern: Pattern) -> Int {
  list.fold(pattern.segments, 0, fn(score, segment) {
    case segment {
      Literal(_) -> score + 10
      AnyLevel -> score + 1
      AnyRest -> score
    }
  })
}

/// Order two patterns so that the most specific one comes first.
pub fn compare_specificity(a: Pattern, b: Pattern) -> Order {
  case int.compare(specificity(b), specificity(a)) {
    order.Eq -> string.compare(a.source, b.source)
    other -> other
  }
}

/// A human readable explanation suitable for an `ERR` frame.
pub fn error_to_string(error: TopicError) -> String {
  case error {
    EmptyTopic -> "topic is empty"
    EmptyLevel(position) ->
      "level " <> int.to_string(position) <> " is empty"
    TooDeep(depth) ->
      "topic has "
      <> int.to_string(depth)
      <> " levels, the limit is "
      <> int.to_string(max_depth)
    LevelTooLong(position, length) ->
      "level "
      <> int.to_string(position)
      <> " is "
      <> int.to_string(length)
      <> " characters long"
    WildcardInTopic(position) ->
      "wildcard at level " <> int.to_string(position) <> " in a topic name"
    MisplacedRest(position) ->
      "'#' at level " <> int.to_string(position) <> " must be the last level"
    ForbiddenCharacter(position, character) ->
      "level "
      <> int.to_string(position)
      <> " contains forbidden character "
      <> string.inspect(character)
  }
}
