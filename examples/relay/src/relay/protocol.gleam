//// The line based wire protocol spoken between relay and its clients.
////
//// Every frame is one line ending in `\n`; a `\r` just before it is
//// tolerated. The first word is the verb. Clients send:
////
//// ```text
//// CONNECT client-42 30
//// SUB sensors/*/temp
//// UNSUB sensors/*/temp
//// PUB sensors/kitchen/temp 21.5
//// PUBR sensors/kitchen/temp 21.5
//// JOIN lobby alice
//// LEAVE lobby
//// SAY lobby hello everyone
//// PING
//// QUIT
//// ```
////
//// The server answers with `WELCOME`, `OK`, `MSG`, `CHAT`, `PONG`, `PING`,
//// `ERR` and `BYE` frames. Payloads may contain spaces; a newline or a
//// backslash inside a payload is escaped as `\n` or `\\`.

import gleam/bool
import gleam/int
import gleam/list
import gleam/result
import gleam/string

/// Longest line, in bytes, that the parser accepts.
pub const max_line_length = 4096

/// Largest payload, in bytes, accepted by `PUB` and `SAY`.
pub const max_payload_bytes = 2048

/// Keepalive used when `CONNECT` omits the second argument.
pub const default_keepalive_seconds = 60

/// Terminator appended to every encoded frame.
pub const line_terminator = "\n"

/// A request sent by a client.
pub type Command {
  Connect(client_id: String, keepalive_seconds: Int)
  Subscribe(pattern: String)
  Unsubscribe(pattern: String)
  Publish(topic: String, payload: String, retain: Bool)
  Join(room: String, nick: String)
  Leave(room: String)
  Say(room: String, text: String)
  Ping
  Quit
}

/// Machine readable error category carried by `ERR` frames.
pub type ErrorCode {
  UnknownCommand
  MissingArgument
  BadArgument
  BadTopic
  PayloadTooLarge
  RateLimited
  NotConnected
  Forbidden
  ServerError
}

/// A frame sent by the server.
pub type Frame {
  Welcome(session_id: String)
  Ack(verb: String)
  Deliver(topic: String, sequence: Int, payload: String)
  ChatLine(room: String, nick: String, text: String)
  Pong
  Probe
  Failure(code: ErrorCode, detail: String)
  Bye(reason: String)
}

/// Why a client line could not be turned into a `Command`.
pub type ParseError {
  EmptyLine
  LineTooLong(length: Int)
  UnknownVerb(verb: String)
  MissingArg(verb: String, argument: String)
  InvalidNumber(verb: String, text: String)
  PayloadOverLimit(size: Int)
}

/// Parse one client line into a command.
///
/// Verbs are case-insensitive; arguments are not. The last argument of
/// `PUB`, `PUBR` and `SAY` runs to the end of the line and is unescaped.
pub fn parse_line(line: String) -> Result(Command, ParseError) {
  let line = strip_terminator(line)
  let length = string.byte_size(line)
  use <- bool.guard(length > max_line_length, Error(LineTooLong(length)))
  let #(verb, rest) = split_word(string.trim_start(line))
  let verb = string.uppercase(verb)
  case verb, rest {
    "", _ -> Error(EmptyLine)
    "PING", _ -> Ok(Ping)
    "QUIT", _ -> Ok(Quit)

    "CONNECT", "" -> Error(MissingArg(verb, "client_id"))
    "CONNECT", args ->
      case words(args) {
        [client_id] -> Ok(Connect(client_id, default_keepalive_seconds))
        [client_id, keepalive, ..] ->
          case int.parse(keepalive) {
            Ok(seconds) if seconds >= 0 -> Ok(Connect(client_id, seconds))
            _ -> Error(InvalidNumber(verb, keepalive))
          }
        [] -> Error(MissingArg(verb, "client_id"))
      }

    "SUB", "" | "UNSUB", "" -> Error(MissingArg(verb, "pattern"))
    "SUB", args -> {
      let #(pattern, _) = split_word(args)
      Ok(Subscribe(pattern))
    }
    "UNSUB", args -> {
      let #(pattern, _) = split_word(args)
      Ok(Unsubscribe(pattern))
    }

    "PUB", "" | "PUBR", "" -> Error(MissingArg(verb, "topic"))
    "PUB", args | "PUBR", args -> {
      let #(topic, payload) = split_word(args)
      let size = string.byte_size(payload)
      case payload {
        "" -> Error(MissingArg(verb, "payload"))
        _ if size > max_payload_bytes -> Error(PayloadOverLimit(size))
        _ ->
          Ok(Publish(
            topic: topic,
            payload: unescape_payload(payload),
            retain: verb == "PUBR",
          ))
      }
    }

    "JOIN", args ->
      case words(args) {
        [room, nick, ..] -> Ok(Join(room: room, nick: nick))
        [_] -> Error(MissingArg(verb, "nick"))
        [] -> Error(MissingArg(verb, "room"))
      }

    "LEAVE", "" -> Error(MissingArg(verb, "room"))
    "LEAVE", args -> {
      let #(room, _) = split_word(args)
      Ok(Leave(room))
    }

    "SAY", "" -> Error(MissingArg(verb, "room"))
    "SAY", args -> {
      let #(room, text) = split_word(args)
      let size = string.byte_size(text)
      case text {
        "" -> Error(MissingArg(verb, "text"))
        _ if size > max_payload_bytes -> Error(PayloadOverLimit(size))
        _ -> Ok(Say(room: room, text: unescape_payload(text)))
      }
    }

    _, _ -> Error(UnknownVerb(verb))
  }
}

/// Split everything received so far into complete lines and a remainder.
///
/// The remainder is the bytes after the last newline: they belong to a
/// line that has not finished arriving and must be kept for the next read.
pub fn parse_buffer(
  buffer: String,
) -> #(List(Result(Command, ParseError)), String) {
  let pieces = string.split(buffer, line_terminator)
  let #(complete, remainder) = case list.reverse(pieces) {
    [] -> #([], "")
    [last, ..earlier] -> #(list.reverse(earlier), last)
  }
  let commands =
    complete
    |> list.filter(fn(line) { strip_terminator(line) != "" })
    |> list.map(parse_line)
  #(commands, remainder)
}

/// Render a client command as a wire line, terminator included.
pub fn encode_command(command: Command) -> String {
  let body = case command {
    Connect(client_id, keepalive) ->
      "CONNECT " <> client_id <> " " <> int.to_string(keepalive)
    Subscribe(pattern) -> "SUB " <> pattern
    Unsubscribe(pattern) -> "UNSUB " <> pattern
    Publish(topic, payload, False) ->
      "PUB " <> topic <> " " <> escape_payload(payload)
    Publish(topic, payload, True) ->
      "PUBR " <> topic <> " " <> escape_payload(payload)
    Join(room, nick) -> "JOIN " <> room <> " " <> nick
    Leave(room) -> "LEAVE " <> room
    Say(room, text) -> "SAY " <> room <> " " <> escape_payload(text)
    Ping -> "PING"
    Quit -> "QUIT"
  }
  body <> line_terminator
}

/// Render a server frame as a wire line, terminator included.
pub fn encode_frame(frame: Frame) -> String {
  let body = case frame {
    Welcome(session_id) -> "WELCOME " <> session_id
    Ack(verb) -> "OK " <> verb
    Deliver(topic, sequence, payload) ->
      "MSG "
      <> topic
      <> " "
      <> int.to_string(sequence)
      <> " "
      <> escape_payload(payload)
    ChatLine(room, nick, text) ->
      "CHAT " <> room <> " " <> nick <> " " <> escape_payload(text)
    Pong -> "PONG"
    Probe -> "PING"
    Failure(code, detail) ->
      "ERR " <> error_code_to_string(code) <> " " <> escape_payload(detail)
    Bye(reason) -> "BYE " <> escape_payload(reason)
  }
  body <> line_terminator
}

/// Parse a line sent by the server. This is what a client library uses;
/// the server itself never needs it.
pub fn parse_frame(line: String) -> Result(Frame, ParseError) {
  let line = strip_terminator(line)
  let #(verb, rest) = split_word(line)
  case verb, rest {
    "", _ -> Error(EmptyLine)
    "PONG", _ -> Ok(Pong)
    "PING", _ -> Ok(Probe)
    "WELCOME", "" -> Error(MissingArg(verb, "session_id"))
    "WELCOME", session_id -> Ok(Welcome(session_id))
    "OK", acknowledged -> Ok(Ack(acknowledged))
    "BYE", reason -> Ok(Bye(unescape_payload(reason)))
    "MSG", args -> {
      let #(topic, rest) = split_word(args)
      let #(sequence, payload) = split_word(rest)
      case int.parse(sequence) {
        Ok(n) -> Ok(Deliver(topic, n, unescape_payload(payload)))
        Error(Nil) -> Error(InvalidNumber(verb, sequence))
      }
    }
    "CHAT", args -> {
      let #(room, rest) = split_word(args)
      let #(nick, text) = split_word(rest)
      Ok(ChatLine(room, nick, unescape_payload(text)))
    }
    "ERR", args -> {
      let #(code, detail) = split_word(args)
      use code <- result.try(
        error_code_from_string(code)
        |> result.replace_error(UnknownVerb("ERR " <> code)),
      )
      Ok(Failure(code, unescape_payload(detail)))
    }
    _, _ -> Error(UnknownVerb(verb))
  }
}

/// Turn a parse failure into the `ERR` frame sent back to the client.
pub fn parse_error_to_frame(error: ParseError) -> Frame {
  case error {
    EmptyLine -> Failure(BadArgument, "empty line")
    LineTooLong(length) ->
      Failure(PayloadTooLarge, "line of " <> int.to_string(length) <> " bytes")
    UnknownVerb(verb) -> Failure(UnknownCommand, verb)
    MissingArg(verb, argument) ->
      Failure(MissingArgument, verb <> " needs " <> argument)
    InvalidNumber(verb, text) ->
      Failure(BadArgument, verb <> ": not a number: " <> text)
    PayloadOverLimit(size) ->
      Failure(PayloadTooLarge, "payload of " <> int.to_string(size) <> " bytes")
  }
}

/// The wire spelling of an error code, e.g. `"rate_limited"`.
pub fn error_code_to_string(code: ErrorCode) -> String {
  case code {
    UnknownCommand -> "unknown_command"
    MissingArgument -> "missing_argument"
    BadArgument -> "bad_argument"
    BadTopic -> "bad_topic"
    PayloadTooLarge -> "payload_too_large"
    RateLimited -> "rate_limited"
    NotConnected -> "not_connected"
    Forbidden -> "forbidden"
    ServerError -> "server_error"
  }
}

/// Inverse of `error_code_to_string`.
pub fn error_code_from_string(text: String) -> Result(ErrorCode, Nil) {
  case text {
    "unknown_command" -> Ok(UnknownCommand)
    "missing_argument" -> Ok(MissingArgument)
    "bad_argument" -> Ok(BadArgument)
    "bad_topic" -> Ok(BadTopic)
    "payload_too_large" -> Ok(PayloadTooLarge)
    "rate_limited" -> Ok(RateLimited)
    "not_connected" -> Ok(NotConnected)
    "forbidden" -> Ok(Forbidden)
    "server_error" -> Ok(ServerError)
    _ -> Error(Nil)
  }
}

/// The verb a command is introduced by on the wire.
pub fn verb(command: Command) -> String {
  case command {
    Connect(..) -> "CONNECT"
    Subscribe(_) -> "SUB"
    Unsubscribe(_) -> "UNSUB"
    Publish(retain: True, ..) -> "PUBR"
    Publish(..) -> "PUB"
    Join(..) -> "JOIN"
    Leave(_) -> "LEAVE"
    Say(..) -> "SAY"
    Ping -> "PING"
    Quit -> "QUIT"
  }
}

/// Escape backslashes and line breaks so a payload fits on one line.
pub fn escape_payload(payload: String) -> String {
  payload
  |> string.replace("\\", "\\\\")
  |> string.replace("\r", "\\r")
  |> string.replace("\n", "\\n")
}

/// Undo `escape_payload`. Unknown escapes are kept verbatim.
pub fn unescape_payload(payload: String) -> String {
  unescape_loop(string.to_graphemes(payload), "")
}

fn unescape_loop(graphemes: List(String), acc: String) -> String {
  case graphemes {
    [] -> acc
    ["\\", "n", ..rest] -> unescape_loop(rest, acc <> "\n")
    ["\\", "r", ..rest] -> unescape_loop(rest, acc <> "\r")
    ["\\", "\\", ..rest] -> unescape_loop(rest, acc <> "\\")
    [g, ..rest] -> unescape_loop(rest, acc <> g)
  }
}

fn strip_terminator(line: String) -> String {
  case string.ends_with(line, "\r\n"), string.ends_with(line, "\n") {
    True, _ -> string.drop_end(line, 2)
    False, True -> string.drop_end(line, 1)
    False, False ->
      case string.ends_with(line, "\r") {
        True -> string.drop_end(line, 1)
        False -> line
      }
  }
}

/// Split off the first space separated word; the rest keeps its inner
/// spacing but loses the single separating space.
fn split_word(text: String) -> #(String, String) {
  case string.split_once(text, " ") {
    Ok(#(word, rest)) -> #(word, rest)
    Error(Nil) -> #(text, "")
  }
}

fn words(text: String) -> List(String) {
  text
  |> string.split(" ")
  |> list.filter(fn(word) { word != "" })
}
