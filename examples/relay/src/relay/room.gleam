//// Chat rooms layered on top of the broker.
////
//// A room has occupants identified by nickname, each with a role. The
//// first occupant becomes the owner. Owners and moderators may kick, ban,
//// promote and change the rules; every line said in the room is checked
//// against those rules before it is broadcast. Repeated offences earn
//// strikes, and enough strikes get the offender removed automatically.

import gleam/dict.{type Dict}
import gleam/int
import gleam/list
import gleam/option.{type Option, None, Some}
import gleam/order
import gleam/result
import gleam/set.{type Set}
import gleam/string

/// Longest nickname accepted.
pub const max_nick_length = 24

/// Most occupants a room can hold.
pub const max_occupants = 200

/// Strikes after which an occupant is removed automatically.
pub const strikes_before_kick = 3

/// Lines of history a room keeps for newcomers.
pub const history_length = 50

/// Nicknames nobody may take.
const reserved_nicks = ["admin", "server", "relay", "system", "moderator"]

/// A nickname, unique within a room.
pub type Nick =
  String

/// What an occupant is allowed to do, from most to least powerful.
pub type Role {
  Owner
  Moderator
  Participant
  Muted
}

/// Someone currently in a room.
pub type Occupant {
  Occupant(
    nick: Nick,
    session_id: String,
    role: Role,
    joined_at: Int,
    last_spoke: Option(Int),
    strikes: Int,
  )
}

/// A moderation rule applied to every line said in the room.
pub type Rule {
  /// Reject lines longer than this many graphemes.
  MaxLength(Int)
  /// Reject lines written mostly in capital letters.
  NoShouting
  /// Strike lines containing any of these words (case-insensitive).
  BannedWords(List(String))
  /// Require this many milliseconds between two lines of one occupant.
  SlowMode(Int)
  /// Strike lines containing URLs.
  NoLinks
}

/// Result of checking a line against the room's rules.
pub type Verdict {
  Accept
  Reject(reason: String)
  Strike(reason: String)
}

/// A line that was said in the room.
pub type ChatLine {
  ChatLine(nick: Nick, text: String, at: Int)
}

/// A chat room.
pub type Room {
  Room(
    name: String,
    occupants: Dict(Nick, Occupant),
    banned: Set(String),
    rules: List(Rule),
    history: List(ChatLine),
  )
}

/// Why a room operation failed.
pub type RoomError {
  InvalidNick(reason: String)
  NickTaken(nick: Nick)
  AlreadyJoined(nick: Nick)
  BannedFromRoom
  RoomFull(capacity: Int)
  NotInRoom(nick: Nick)
  NotPermitted(action: String)
  MessageRejected(reason: String)
}

/// What happened when someone spoke.
pub type SayOutcome {
  /// Broadcast this line to every occupant.
  Broadcast(room: Room, line: ChatLine)
  /// The line was refused but the speaker stays.
  Refused(room: Room, reason: String)
  /// The speaker collected too many strikes and was removed.
  Removed(room: Room, nick: Nick, reason: String)
}

/// An empty room with the default rules.
pub fn new(name: String) -> Room {
  Room(
    name: name,
    occupants: dict.new(),
    banned: set.new(),
    rules: [MaxLength(500), NoShouting, SlowMode(500)],
    history: [],
  )
}

/// Check that a nickname is acceptable: 2 to `max_nick_length` characters,
/// starting with a letter, made of letters, digits, `-` and `_`, and not
/// one of the reserved names.
pub fn validate_nick(nick: String) -> Result(Nick, RoomError) {
  let length = string.length(nick)
  let lowered = string.lowercase(nick)
  let graphemes = string.to_graphemes(nick)
  let too_long = length > max_nick_length
  case graphemes {
    [] | [_] -> Error(InvalidNick("must be at least 2 characters"))
    _ if too_long ->
      Error(InvalidNick(
        "must be at most " <> int.to_string(max_nick_length) <> " characters",
      ))
    [first, ..rest] ->
      case is_letter(first), list.all(rest, is_nick_character) {
        False, _ -> Error(InvalidNick("must start with a letter"))
        True, False ->
          Error(InvalidNick("only letters, digits, '-' and '_' are allowed"))
        True, True ->
          case list.contains(reserved_nicks, lowered) {
            True -> Error(InvalidNick(nick <> " is reserved"))
            False -> Ok(nick)
          }
      }
  }
}

fn is_letter(grapheme: String) -> Bool {
  string.lowercase(grapheme) != string.uppercase(grapheme)
}

fn is_nick_character(grapheme: String) -> Bool {
  is_letter(grapheme)
  || grapheme == "-"
  || grapheme == "_"
  || result.is_ok(int.parse(grapheme))
}

/// Add a session to the room under `nick`.
///
/// The nickname is validated and must not be in use by another session
/// (nicknames are compared case-insensitively). Banned sessions and full
/// rooms are refused. A session that is already present under the same
/// nickname gets `AlreadyJoined`. The first occupant of an empty room
/// becomes its owner; later ones join as participants.
pub fn join(
  room: Room,
  nick: String,
  session_id session_id: String,
  now now: Int,
) -> Result(#(Room, Occupant), RoomError) {
  use nick <- result.try(validate_nick(nick))
  let size = dict.size(room.occupants)
  let existing =
    room.occupants
    |> dict.values
    |> list.find(fn(o) { string.lowercase(o.nick) == string.lowercase(nick) })
  let banned = set.contains(room.banned, session_id)
  let full = size >= max_occupants
  case existing, banned {
    _, True -> Error(BannedFromRoom)
    Ok(occupant), False ->
      case occupant.session_id == session_id {
        True -> Error(AlreadyJoined(occupant.nick))
        False -> Error(NickTaken(occupant.nick))
      }
    Error(Nil), False if full -> Error(RoomFull(max_occupants))
    Error(Nil), False -> {
      let role = case size {
        0 -> Owner
        _ -> Participant
      }
      let occupant =
        Occupant(
          nick: nick,
          session_id: session_id,
          role: role,
          joined_at: now,
          last_spoke: None,
          strikes: 0,
        )
      let room =
        Room(..room, occupants: dict.insert(room.occupants, nick, occupant))
      Ok(#(room, occupant))
    }
  }
}

/// Remove an occupant who is leaving voluntarily. If the owner leaves, the
/// longest-present moderator (or else participant) inherits ownership.
pub fn leave(room: Room, nick: Nick) -> Result(Room, RoomError) {
  use occupant <- result.try(find(room, nick))
  let occupants = dict.delete(room.occupants, nick)
  let room = Room(..room, occupants: occupants)
  case occupant.role {
    Owner -> Ok(hand_over_ownership(room))
    Moderator | Participant | Muted -> Ok(room)
  }
}

fn hand_over_ownership(room: Room) -> Room {
  let heir =
    room.occupants
    |> dict.values
    |> list.filter(fn(o) { o.role != Muted })
    |> list.sort(fn(a, b) {
      case int.compare(role_rank(b.role), role_rank(a.role)) {
        order.Eq -> int.compare(a.joined_at, b.joined_at)
        other -> other
      }
    })
    |> list.first
  case heir {
    Ok(o) ->
      Room(
        ..room,
        occupants: dict.insert(room.occupants, o.nick, Occupant(..o, role: Owner)),
      )
    Error(Nil) -> room
  }
}

/// Look up an occupant by nickname.
pub fn find(room: Room, nick: Nick) -> Result(Occupant, RoomError) {
  dict.get(room.occupants, nick) |> result.replace_error(NotInRoom(nick))
}

/// Numeric power of a role; higher may act on lower.
pub fn role_rank(role: Role) -> Int {
  case role {
    Owner -> 3
    Moderator -> 2
    Participant -> 1
    Muted -> 0
  }
}

/// May `actor` moderate `target`? Only owners and moderators moderate, and
/// only occupants of strictly lower rank.
pub fn can_moderate(actor: Occupant, target: Occupant) -> Bool {
  let actor_rank = role_rank(actor.role)
  actor_rank >= 2 && actor_rank > role_rank(target.role)
}

/// Remove `target` on behalf of `by`.
pub fn kick(
  room: Room,
  by by: Nick,
  target target: Nick,
) -> Result(Room, RoomError) {
  use actor <- result.try(find(room, by))
  use victim <- result.try(find(room, target))
  case can_moderate(actor, victim) {
    False -> Error(NotPermitted("kick " <> target))
    True -> Ok(Room(..room, occupants: dict.delete(room.occupants, target)))
  }
}

/// Kick `target` and refuse its session for good.
pub fn ban(
  room: Room,
  by by: Nick,
  target target: Nick,
) -> Result(Room, RoomError) {
  use victim <- result.try(find(room, target))
  use room <- result.try(kick(room, by: by, target: target))
  Ok(Room(..room, banned: set.insert(room.banned, victim.session_id)))
}

/// Change the role of `target`. Nobody can grant a role at or above their
/// own, and ownership is transferred only by leaving.
pub fn set_role(
  room: Room,
  by by: Nick,
  target target: Nick,
  role role: Role,
) -> Result(Room, RoomError) {
  use actor <- result.try(find(room, by))
  use subject <- result.try(find(room, target))
  let allowed =
    can_moderate(actor, subject) && role_rank(role) < role_rank(actor.role)
  case allowed {
    False -> Error(NotPermitted("change role of " <> target))
    True ->
      Ok(Room(
        ..room,
        occupants: dict.insert(
          room.occupants,
          target,
          Occupant(..subject, role: role),
        ),
      ))
  }
}

/// Replace the room's rules; only the owner may do this.
pub fn set_rules(
  room: Room,
  by by: Nick,
  rules rules: List(Rule),
) -> Result(Room, RoomError) {
  use actor <- result.try(find(room, by))
  case actor.role {
    Owner -> Ok(Room(..room, rules: rules))
    _ -> Error(NotPermitted("change rules"))
  }
}

/// Check a line against every rule. The first rule that objects decides.
///
/// Rules that merely annoy (length, shouting, slow mode) reject the line;
/// rules about content (banned words, links) also give a strike.
pub fn moderate(
  rules: List(Rule),
  speaker: Occupant,
  text: String,
  now: Int,
) -> Verdict {
  let lowered = string.lowercase(text)
  let length = string.length(text)
  let check = fn(rule) {
    case rule {
      MaxLength(limit) if length > limit ->
        Reject("line is longer than " <> int.to_string(limit) <> " characters")
      MaxLength(_) -> Accept

      NoShouting ->
        case is_shouting(text) {
          True -> Reject("please do not shout")
          False -> Accept
        }

      BannedWords(words) -> {
        let hit =
          list.find(words, fn(word) {
            string.contains(lowered, string.lowercase(word))
          })
        case hit {
          Ok(word) -> Strike("banned word: " <> word)
          Error(Nil) -> Accept
        }
      }

      SlowMode(interval) ->
        case speaker.last_spoke {
          Some(at) if now - at < interval ->
            Reject(
              "slow mode: wait "
              <> int.to_string(interval - { now - at })
              <> "ms",
            )
          _ -> Accept
        }

      NoLinks ->
        case contains_link(lowered) {
          True -> Strike("links are not allowed")
          False -> Accept
        }
    }
  }
  case speaker.role {
    Muted -> Reject("you are muted")
    Owner | Moderator -> Accept
    Participant ->
      list.fold_until(rules, Accept, fn(_verdict, rule) {
        case check(rule) {
          Accept -> list.Continue(Accept)
          objection -> list.Stop(objection)
        }
      })
  }
}

/// Mostly capital letters, ignoring short lines and non-letters.
pub fn is_shouting(text: String) -> Bool {
  let letters = string.to_graphemes(text) |> list.filter(is_letter)
  let upper = list.count(letters, fn(g) { string.uppercase(g) == g })
  let total = list.length(letters)
  total >= 8 && upper * 10 >= total * 7
}

/// Does the text look like it contains a URL?
pub fn contains_link(text: String) -> Bool {
  string.contains(text, "http://")
  || string.contains(text, "https://")
  || string.contains(text, "www.")
}

/// Let `nick` say `text` at `now`, applying moderation.
pub fn say(
  room: Room,
  nick: Nick,
  text: String,
  now: Int,
) -> Result(SayOutcome, RoomError) {
  use speaker <- result.try(find(room, nick))
  case moderate(room.rules, speaker, text, now) {
    Accept -> {
      let line = ChatLine(nick: nick, text: text, at: now)
      let speaker = Occupant(..speaker, last_spoke: Some(now))
      let room =
        Room(
          ..room,
          occupants: dict.insert(room.occupants, nick, speaker),
          history: list.take([line, ..room.history], history_length),
        )
      Ok(Broadcast(room, line))
    }
    Reject(reason) -> Ok(Refused(room, reason))
    Strike(reason) -> {
      let strikes = speaker.strikes + 1
      case strikes >= strikes_before_kick {
        True ->
          Ok(Removed(
            Room(..room, occupants: dict.delete(room.occupants, nick)),
            nick,
            reason,
          ))
        False -> {
          let speaker = Occupant(..speaker, strikes: strikes)
          let room =
            Room(..room, occupants: dict.insert(room.occupants, nick, speaker))
          Ok(Refused(room, reason))
        }
      }
    }
  }
}

/// The room's recent lines, oldest first.
pub fn recent_lines(room: Room) -> List(ChatLine) {
  list.reverse(room.history)
}

/// Nicknames of everyone present, alphabetically.
pub fn nicks(room: Room) -> List(Nick) {
  room.occupants |> dict.keys |> list.sort(string.compare)
}

/// The nickname a session uses in this room, if it is present.
pub fn nick_of_session(room: Room, session_id: String) -> Result(Nick, Nil) {
  room.occupants
  |> dict.values
  |> list.find(fn(o) { o.session_id == session_id })
  |> result.map(fn(o) { o.nick })
}

/// True when nobody is left in the room.
pub fn is_empty(room: Room) -> Bool {
  dict.is_empty(room.occupants)
}

/// Explain a room error to the client.
pub fn error_to_string(error: RoomError) -> String {
  case error {
    InvalidNick(reason) -> "invalid nickname: " <> reason
    NickTaken(nick) -> nick <> " is already taken"
    AlreadyJoined(nick) -> "already joined as " <> nick
    BannedFromRoom -> "you are banned from this room"
    RoomFull(capacity) ->
      "room is full (" <> int.to_string(capacity) <> " occupants)"
    NotInRoom(nick) -> nick <> " is not in this room"
    NotPermitted(action) -> "not permitted: " <> action
    MessageRejected(reason) -> "message rejected: " <> reason
  }
}

/// Human readable role name.
pub fn role_to_string(role: Role) -> String {
  case role {
    Owner -> "owner"
    Moderator -> "moderator"
    Participant -> "participant"
    Muted -> "muted"
  }
}
