import gleam/json
import gleam/list
import gleam/result
import gleeunit
import gleeunit/should
import relay/codec
import relay/protocol
import relay/room
import relay/session
import relay/topic

pub fn main() -> Nil {
  gleeunit.main()
}

fn check(pattern: String, name: String) -> Bool {
  let assert Ok(matched) = topic.matches_string(pattern: pattern, topic: name)
  matched
}

pub fn single_level_wildcard_test() {
  check("sensors/*/temp", "sensors/kitchen/temp") |> should.be_true
  check("sensors/*/temp", "sensors/kitchen/humidity") |> should.be_false
  check("sensors/*/temp", "sensors/a/b/temp") |> should.be_false
}

pub fn trailing_hash_matches_rest_test() {
  check("sensors/#", "sensors/kitchen/temp") |> should.be_true
  check("sensors/#", "sensors") |> should.be_true
  check("#", "anything/at/all") |> should.be_true
}

pub fn system_topics_hidden_from_wildcards_test() {
  check("#", "$sys/uptime") |> should.be_false
  check("$sys/#", "$sys/uptime") |> should.be_true
}

pub fn misplaced_hash_rejected_test() {
  topic.parse_pattern("a/#/b")
  |> should.equal(Error(topic.MisplacedRest(1)))
}

pub fn wildcard_in_topic_rejected_test() {
  topic.parse("a/*/c") |> should.equal(Error(topic.WildcardInTopic(1)))
}

pub fn parent_of_topic_test() {
  let assert Ok(t) = topic.parse("a/b/c")
  topic.parent(t)
  |> result.map(topic.to_string)
  |> should.equal(Ok("a/b"))
}

pub fn parse_publish_with_spaces_test() {
  protocol.parse_line("PUB chat/general hello there world\r\n")
  |> should.equal(
    Ok(protocol.Publish("chat/general", "hello there world", False)),
  )
}

pub fn parse_connect_default_keepalive_test() {
  protocol.parse_line("connect client-7")
  |> should.equal(
    Ok(protocol.Connect("client-7", protocol.default_keepalive_seconds)),
  )
}

pub fn parse_missing_argument_test() {
  protocol.parse_line("SUB")
  |> should.equal(Error(protocol.MissingArg("SUB", "pattern")))
}

pub fn payload_escaping_round_trip_test() {
  let payload = "line one\nline two \\ end"
  payload
  |> protocol.escape_payload
  |> protocol.unescape_payload
  |> should.equal(payload)
}

pub fn parse_buffer_keeps_partial_line_test() {
  let #(commands, rest) = protocol.parse_buffer("PING\nSUB a/b\nPUB a/b pa")
  list.length(commands) |> should.equal(2)
  rest |> should.equal("PUB a/b pa")
}

pub fn frame_round_trip_test() {
  let frame = protocol.Deliver("a/b", 42, "x y")
  frame
  |> protocol.encode_frame
  |> protocol.parse_frame
  |> should.equal(Ok(frame))
}

pub fn session_requires_connect_test() {
  let s = session.new("s-1", 0)
  session.handle_command(s, protocol.Subscribe("a/#"), 10)
  |> result.is_error
  |> should.be_true
}

pub fn session_probes_after_silence_test() {
  let assert Ok(#(s, _)) =
    session.new("s-1", 0)
    |> session.handle_command(protocol.Connect("c", 10), 0)
  let #(s, actions) = session.tick(s, 10_000)
  actions |> should.equal([session.Send(protocol.Probe)])
  session.is_active(s) |> should.be_true
}

pub fn first_joiner_owns_room_test() {
  let assert Ok(#(r, owner)) =
    room.new("lobby") |> room.join("ada", session_id: "s-1", now: 0)
  owner.role |> should.equal(room.Owner)
  let assert Ok(#(_, guest)) = room.join(r, "grace", session_id: "s-2", now: 1)
  guest.role |> should.equal(room.Participant)
}

pub fn nick_taken_case_insensitive_test() {
  let assert Ok(#(r, _)) =
    room.new("lobby") |> room.join("Ada", session_id: "s-1", now: 0)
  room.join(r, "ada", session_id: "s-2", now: 1)
  |> should.equal(Error(room.NickTaken("Ada")))
}

pub fn reserved_nick_rejected_test() {
  room.validate_nick("Admin") |> result.is_error |> should.be_true
}

pub fn shouting_is_detected_test() {
  room.is_shouting("WHY IS NOBODY ANSWERING") |> should.be_true
  room.is_shouting("OK") |> should.be_false
}

pub fn envelope_json_round_trip_test() {
  let e =
    codec.envelope(id: "m1", topic: "a/b", payload: "hi", sequence: 3, at: 99)
    |> codec.with_header("X-Relay-Origin", "node-2")
  e
  |> codec.encode_envelope
  |> codec.decode_envelope
  |> should.equal(Ok(e))
}

pub fn command_json_round_trip_test() {
  let command = protocol.Publish("a/b", "payload", True)
  command
  |> codec.command_to_json
  |> json_to_string
  |> codec.decode_command
  |> should.equal(Ok(command))
}

fn json_to_string(value: json.Json) -> String {
  json.to_string(value)
}
