//// JSON representation of relay messages.
////
//// The line protocol is what interactive clients speak, but bridges between
//// brokers, the HTTP admin endpoint and the message log all exchange JSON.
//// Field names are snake_case; commands are tagged with a `"type"` field.

import gleam/dict
import gleam/dynamic/decode.{type Decoder}
import gleam/int
import gleam/json.{type Json}
import gleam/list
import gleam/option.{type Option, None, Some}
import gleam/result
import gleam/string
import relay/broker.{type BrokerStats, type Delivery}
import relay/protocol.{type Command}

/// Version written into every envelope; decoders reject newer ones.
pub const schema_version = 1

/// Header name carrying the id of the original publisher.
pub const origin_header = "x-relay-origin"

/// Extra string metadata attached to an envelope.
pub type Headers =
  List(#(String, String))

/// A published message as stored in the log or forwarded over a bridge.
pub type Envelope {
  Envelope(
    version: Int,
    id: String,
    topic: String,
    payload: String,
    sequence: Int,
    published_at: Int,
    headers: Headers,
    expires_at: Option(Int),
  )
}

/// Why some JSON could not be turned into a value.
pub type CodecError {
  MalformedJson(detail: String)
  UnexpectedShape(errors: List(decode.DecodeError))
  UnsupportedVersion(found: Int)
}

/// An envelope for a fresh message with no headers and no expiry.
pub fn envelope(
  id id: String,
  topic topic: String,
  payload payload: String,
  sequence sequence: Int,
  at published_at: Int,
) -> Envelope {
  Envelope(
    version: schema_version,
    id: id,
    topic: topic,
    payload: payload,
    sequence: sequence,
    published_at: published_at,
    headers: [],
    expires_at: None,
  )
}

/// Build an envelope from a broker delivery.
pub fn from_delivery(delivery: Delivery, id: String, now: Int) -> Envelope {
  Envelope(
    ..envelope(
      id: id,
      topic: delivery.topic,
      payload: delivery.payload,
      sequence: delivery.sequence,
      at: now,
    ),
    headers: case delivery.retained {
      True -> [#("x-relay-retained", "true")]
      False -> []
    },
  )
}

/// Add or replace one header.
pub fn with_header(envelope: Envelope, name: String, value: String) -> Envelope {
  let name = string.lowercase(name)
  let others = list.filter(envelope.headers, fn(h) { h.0 != name })
  Envelope(..envelope, headers: list.append(others, [#(name, value)]))
}

// ---------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------

/// The JSON value of an envelope.
pub fn envelope_to_json(envelope: Envelope) -> Json {
  json.object([
    #("version", json.int(envelope.version)),
    #("id", json.string(envelope.id)),
    #("topic", json.string(envelope.topic)),
    #("payload", json.string(envelope.payload)),
    #("sequence", json.int(envelope.sequence)),
    #("published_at", json.int(envelope.published_at)),
    #("headers", headers_to_json(envelope.headers)),
    #("expires_at", json.nullable(envelope.expires_at, json.int)),
  ])
}

fn headers_to_json(headers: Headers) -> Json {
  headers
  |> list.map(fn(h) { #(h.0, json.string(h.1)) })
  |> json.object
}

/// Serialise an envelope to a compact JSON string.
pub fn encode_envelope(envelope: Envelope) -> String {
  envelope |> envelope_to_json |> json.to_string
}

/// The JSON value of a broker statistics snapshot.
pub fn stats_to_json(stats: BrokerStats) -> Json {
  json.object([
    #("subscriptions", json.int(stats.subscriptions)),
    #("subscribers", json.int(stats.subscribers)),
    #("published", json.int(stats.published)),
    #("delivered", json.int(stats.delivered)),
    #("retained", json.int(stats.retained)),
  ])
}

/// The JSON value of a client command, tagged with `"type"`.
pub fn command_to_json(command: Command) -> Json {
  let tagged = fn(kind, fields) {
    json.object([#("type", json.string(kind)), ..fields])
  }
  case command {
    protocol.Connect(client_id, keepalive) ->
      tagged("connect", [
        #("client_id", json.string(client_id)),
        #("keepalive", json.int(keepalive)),
      ])
    protocol.Subscribe(pattern) ->
      tagged("subscribe", [#("pattern", json.string(pattern))])
    protocol.Unsubscribe(pattern) ->
      tagged("unsubscribe", [#("pattern", json.string(pattern))])
    protocol.Publish(topic, payload, retain) ->
      tagged("publish", [
        #("topic", json.string(topic)),
        #("payload", json.string(payload)),
        #("retain", json.bool(retain)),
      ])
    protocol.Join(room, nick) ->
      tagged("join", [#("room", json.string(room)), #("nick", json.string(nick))])
    protocol.Leave(room) -> tagged("leave", [#("room", json.string(room))])
    protocol.Say(room, text) ->
      tagged("say", [#("room", json.string(room)), #("text", json.string(text))])
    protocol.Ping -> tagged("ping", [])
    protocol.Quit -> tagged("quit", [])
  }
}

// ---------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------

/// Decoder for envelopes. `headers` and `expires_at` are optional.
pub fn envelope_decoder() -> Decoder(Envelope) {
  use version <- decode.optional_field("version", schema_version, decode.int)
  use id <- decode.field("id", decode.string)
  use topic <- decode.field("topic", decode.string)
  use payload <- decode.field("payload", decode.string)
  use sequence <- decode.field("sequence", decode.int)
  use published_at <- decode.field("published_at", decode.int)
  use headers <- decode.optional_field("headers", [], headers_decoder())
  use expires_at <- decode.optional_field(
    "expires_at",
    None,
    decode.optional(decode.int),
  )
  decode.success(Envelope(
    version: version,
    id: id,
    topic: topic,
    payload: payload,
    sequence: sequence,
    published_at: published_at,
    headers: headers,
    expires_at: expires_at,
  ))
}

fn headers_decoder() -> Decoder(Headers) {
  decode.dict(decode.string, decode.string)
  |> decode.map(fn(d) { d |> dict.to_list |> list.sort(compare_header) })
}

fn compare_header(a: #(String, String), b: #(String, String)) {
  string.compare(a.0, b.0)
}

/// Parse an envelope from a JSON string, rejecting future schema versions.
pub fn decode_envelope(text: String) -> Result(Envelope, CodecError) {
  use envelope <- result.try(
    json.parse(text, envelope_decoder()) |> result.map_error(from_json_error),
  )
  let supported = schema_version
  case envelope.version {
    v if v > supported -> Error(UnsupportedVersion(v))
    _ -> Ok(envelope)
  }
}

/// Decoder for statistics snapshots.
pub fn stats_decoder() -> Decoder(BrokerStats) {
  use subscriptions <- decode.field("subscriptions", decode.int)
  use subscribers <- decode.field("subscribers", decode.int)
  use published <- decode.field("published", decode.int)
  use delivered <- decode.field("delivered", decode.int)
  use retained <- decode.optional_field("retained", 0, decode.int)
  decode.success(broker.BrokerStats(
    subscriptions: subscriptions,
    subscribers: subscribers,
    published: published,
    delivered: delivered,
    retained: retained,
  ))
}

/// Decoder for commands tagged with a `"type"` field.
///
/// The tag is read first and selects which other fields are required.
/// Unknown tags fail with a decode error naming the tag so the caller can
/// report something more useful than "expected Command".
pub fn command_decoder() -> Decoder(Command) {
  use kind <- decode.field("type", decode.string)
  case kind {
    "connect" -> {
      use client_id <- decode.field("client_id", decode.string)
      use keepalive <- decode.optional_field(
        "keepalive",
        protocol.default_keepalive_seconds,
        decode.int,
      )
      decode.success(protocol.Connect(client_id, keepalive))
    }
    "subscribe" -> {
      use pattern <- decode.field("pattern", decode.string)
      decode.success(protocol.Subscribe(pattern))
    }
    "unsubscribe" -> {
      use pattern <- decode.field("pattern", decode.string)
      decode.success(protocol.Unsubscribe(pattern))
    }
    "publish" -> {
      use topic <- decode.field("topic", decode.string)
      use payload <- decode.field("payload", decode.string)
      use retain <- decode.optional_field("retain", False, decode.bool)
      decode.success(protocol.Publish(topic, payload, retain))
    }
    "join" -> {
      use room <- decode.field("room", decode.string)
      use nick <- decode.field("nick", decode.string)
      decode.success(protocol.Join(room, nick))
    }
    "leave" -> {
      use room <- decode.field("room", decode.string)
      decode.success(protocol.Leave(room))
    }
    "say" -> {
      use room <- decode.field("room", decode.string)
      use text <- decode.field("text", decode.string)
      decode.success(protocol.Say(room, text))
    }
    "ping" -> decode.success(protocol.Ping)
    "quit" -> decode.success(protocol.Quit)
    other -> decode.failure(protocol.Ping, "command type (got " <> other <> ")")
  }
}

/// Parse a JSON command.
pub fn decode_command(text: String) -> Result(Command, CodecError) {
  json.parse(text, command_decoder()) |> result.map_error(from_json_error)
}

/// Parse a JSON array of envelopes, e.g. a page of the message log.
pub fn decode_envelopes(text: String) -> Result(List(Envelope), CodecError) {
  json.parse(text, decode.list(envelope_decoder()))
  |> result.map_error(from_json_error)
}

fn from_json_error(error: json.DecodeError) -> CodecError {
  case error {
    json.UnexpectedEndOfInput -> MalformedJson("unexpected end of input")
    json.UnexpectedByte(byte) -> MalformedJson("unexpected byte " <> byte)
    json.UnexpectedSequence(sequence) ->
      MalformedJson("unexpected sequence " <> sequence)
    json.UnableToDecode(errors) -> UnexpectedShape(errors)
  }
}

/// Describe a codec error in one line, e.g. for an HTTP 400 body.
pub fn error_to_string(error: CodecError) -> String {
  case error {
    MalformedJson(detail) -> "malformed JSON: " <> detail
    UnsupportedVersion(found) ->
      "unsupported schema version " <> int.to_string(found)
    UnexpectedShape(errors) ->
      errors
      |> list.map(fn(e) {
        let path = case e.path {
          [] -> "<root>"
          segments -> string.join(segments, ".")
        }
        path <> ": expected " <> e.expected <> ", found " <> e.found
      })
      |> string.join("; ")
  }
}

/// True when the envelope has an expiry time at or before `now`.
pub fn is_expired(envelope: Envelope, now: Int) -> Bool {
  case envelope.expires_at {
    Some(at) -> at <= now
    None -> False
  }
}
