//// Entry point of the relay server.
////
//// This module wires the pieces together: it reads configuration from the
//// environment, starts the broker actor and turns each line received from a
//// client into broker, room and session operations. Network I/O is kept
//// out of the way: `handle_line` and `tick` return the frames to write and
//// the sessions they are addressed to, and the transport does the writing.

import gleam/dict.{type Dict}
import gleam/erlang/process.{type Subject}
import gleam/int
import gleam/io
import gleam/list
import gleam/result
import gleam/string
import relay/backoff
import relay/broker
import relay/clock
import relay/metrics
import relay/protocol.{type Frame}
import relay/rate_limit
import relay/retention
import relay/room.{type Room}
import relay/session.{type Session, type SessionId}

/// TCP port used when `RELAY_PORT` is unset or invalid.
pub const default_port = 7400

/// Publish rate per client when `RELAY_PUBLISH_RATE` is unset.
pub const default_publish_rate = 20

/// Frames to write, each addressed to one session.
pub type Outbox =
  List(#(SessionId, Frame))

/// Severity levels accepted by the Erlang logger.
pub type LogLevel {
  Debug
  Info
  Warning
  Critical
}

/// Server configuration, read once at start-up.
pub type Config {
  Config(
    port: Int,
    retention: retention.Policy,
    publish_per_second: Int,
    publish_burst: Int,
    max_sessions: Int,
    bridge_backoff: backoff.Policy,
  )
}

/// All state owned by the connection handler.
pub type Server {
  Server(
    config: Config,
    broker: Subject(broker.Message),
    deliveries: Subject(broker.Delivery),
    sessions: Dict(SessionId, Session),
    rooms: Dict(String, Room),
    limits: rate_limit.ClientLimits,
    registry: metrics.Registry,
  )
}

@external(erlang, "relay_ffi", "get_env")
fn get_env(name: String) -> Result(String, Nil)

@external(erlang, "relay_ffi", "log")
fn log(level: LogLevel, message: String) -> Nil

/// Start the broker and replay a short scripted conversation, printing the
/// frames the server would send.
pub fn main() -> Nil {
  let config = load_config()
  let assert Ok(broker_subject) =
    broker.start(config.retention, clock.now_ms)
  let server = new_server(config, broker_subject)
  log(Info, "relay ready on port " <> int.to_string(config.port))

  let now = clock.now_ms()
  let script = [
    "CONNECT demo-client 30",
    "SUB sensors/*/temp",
    "PUBR sensors/kitchen/temp 21.5",
    "JOIN lobby ada",
    "SAY lobby hello there",
    "PING",
    "QUIT",
  ]
  let #(server, outbox) =
    list.fold(script, #(open_session(server, "demo", now), []), fn(acc, line) {
      let #(server, sent) = acc
      let #(server, out) = handle_line(server, "demo", line, now)
      #(server, list.append(sent, out))
    })
  outbox
  |> list.each(fn(entry) { io.print(protocol.encode_frame(entry.1)) })
  io.print(metrics.render(server.registry))
  broker.shutdown(server.broker)
}

/// Read the configuration from `RELAY_*` environment variables.
pub fn load_config() -> Config {
  let retention_policy =
    get_env("RELAY_RETAIN")
    |> result.try(parse_retention_policy)
    |> result.unwrap(retention.KeepLast(retention.default_capacity))
  let jitter =
    get_env("RELAY_BRIDGE_JITTER")
    |> result.try(backoff.jitter_from_string)
    |> result.unwrap(backoff.FullJitter)
  Config(
    port: env_int("RELAY_PORT", default_port),
    retention: retention_policy,
    publish_per_second: env_int("RELAY_PUBLISH_RATE", default_publish_rate),
    publish_burst: env_int("RELAY_PUBLISH_BURST", default_publish_rate * 2),
    max_sessions: env_int("RELAY_MAX_SESSIONS", 1000),
    bridge_backoff: backoff.default_policy() |> backoff.with_jitter(jitter),
  )
}

fn env_int(name: String, default: Int) -> Int {
  get_env(name)
  |> result.try(int.parse)
  |> result.unwrap(default)
}

/// Parse a retention setting: `none`, `last:N`, `age:MS` or
/// `last:N,age:MS`.
pub fn parse_retention_policy(text: String) -> Result(retention.Policy, Nil) {
  let parts =
    text
    |> string.lowercase
    |> string.split(",")
    |> list.map(string.trim)
  case parts {
    ["none"] -> Ok(retention.KeepNothing)
    ["last:" <> count] -> int.parse(count) |> result.map(retention.KeepLast)
    ["age:" <> ms] -> int.parse(ms) |> result.map(retention.KeepFor)
    ["last:" <> count, "age:" <> ms] | ["age:" <> ms, "last:" <> count] -> {
      use count <- result.try(int.parse(count))
      use ms <- result.try(int.parse(ms))
      Ok(retention.KeepLastFor(count, ms))
    }
    _ -> Error(Nil)
  }
}

/// A server with no sessions, rooms or limits yet.
pub fn new_server(
  config: Config,
  broker_subject: Subject(broker.Message),
) -> Server {
  Server(
    config: config,
    broker: broker_subject,
    deliveries: process.new_subject(),
    sessions: dict.new(),
    rooms: dict.new(),
    limits: dict.new(),
    registry: metrics.broker_registry(),
  )
}

/// Register a newly accepted connection.
pub fn open_session(server: Server, id: SessionId, now: Int) -> Server {
  let sessions = dict.insert(server.sessions, id, session.new(id, now))
  Server(..server, sessions: sessions)
  |> update_session_gauge
}

fn update_session_gauge(server: Server) -> Server {
  let open = int.to_float(dict.size(server.sessions))
  let registry =
    metrics.set_gauge(server.registry, "sessions_open", open)
    |> result.unwrap(server.registry)
  Server(..server, registry: registry)
}

fn bump(server: Server, name: String, amount: Int) -> Server {
  let registry =
    metrics.count(server.registry, name, amount)
    |> result.unwrap(server.registry)
  Server(..server, registry: registry)
}

/// Handle one line received from session `id` at `now`.
///
/// The line is parsed, checked against the session state machine and then
/// carried out against the broker or a chat room. Every outcome, including
/// errors, is reported back as frames in the returned outbox; frames for a
/// room broadcast are addressed to every occupant's session.
pub fn handle_line(
  server: Server,
  id: SessionId,
  line: String,
  now: Int,
) -> #(Server, Outbox) {
  let reply = fn(frames: List(Frame)) { list.map(frames, fn(f) { #(id, f) }) }
  let fail = fn(code, detail) { reply([protocol.Failure(code, detail)]) }
  case dict.get(server.sessions, id) {
    Error(Nil) -> #(server, fail(protocol.ServerError, "no such session"))
    Ok(current) ->
      case protocol.parse_line(line) {
        Error(parse_error) -> {
          let #(current, _) = session.record_error(current)
          #(
            store_session(server, current),
            reply([protocol.parse_error_to_frame(parse_error)]),
          )
        }
        Ok(command) ->
          case session.handle_command(current, command, now) {
            Error(frame) -> #(server, reply([frame]))
            Ok(#(current, actions)) -> {
              let server = store_session(server, current)
              let immediate = reply(frames_of(actions))
              let #(server, more) = case command {
                protocol.Subscribe(pattern) ->
                  case
                    broker.subscribe(
                      server.broker,
                      subscriber: id,
                      pattern: pattern,
                      deliver: server.deliveries,
                    )
                  {
                    Ok(subscription_id) -> {
                      let updated =
                        session.remember_subscription(
                          current,
                          pattern,
                          subscription_id,
                        )
                      #(
                        store_session(server, updated),
                        reply([protocol.Ack("SUB")]),
                      )
                    }
                    Error(e) -> #(
                      server,
                      fail(protocol.BadTopic, broker.error_to_string(e)),
                    )
                  }

                protocol.Unsubscribe(pattern) ->
                  case session.forget_subscription(current, pattern) {
                    Ok(#(updated, subscription_id)) -> {
                      let _ = broker.unsubscribe(server.broker, subscription_id)
                      #(
                        store_session(server, updated),
                        reply([protocol.Ack("UNSUB")]),
                      )
                    }
                    Error(Nil) -> #(
                      server,
                      fail(protocol.BadArgument, "not subscribed to " <> pattern),
                    )
                  }

                protocol.Publish(name, payload, retain) -> {
                  let #(server, frames) =
                    publish_for(server, id, name, payload, retain, now)
                  #(server, reply(frames))
                }

                protocol.Join(room_name, nick) ->
                  join_room(server, id, room_name, nick, now)

                protocol.Leave(room_name) -> leave_room(server, id, room_name)

                protocol.Say(room_name, text) ->
                  say_in_room(server, id, room_name, text, now)

                protocol.Connect(..) | protocol.Ping | protocol.Quit -> #(
                  server,
                  [],
                )
              }
              #(server, list.append(immediate, more))
            }
          }
      }
  }
}

fn store_session(server: Server, updated: Session) -> Server {
  Server(..server, sessions: dict.insert(server.sessions, updated.id, updated))
}

fn frames_of(actions: List(session.Action)) -> List(Frame) {
  list.filter_map(actions, fn(action) {
    case action {
      session.Send(frame) -> Ok(frame)
      session.Disconnect(_) -> Error(Nil)
    }
  })
}

/// Rate-limit and publish one message on behalf of a session.
fn publish_for(
  server: Server,
  id: SessionId,
  name: String,
  payload: String,
  retain: Bool,
  now: Int,
) -> #(Server, List(Frame)) {
  let config = server.config
  let fresh = fn() {
    rate_limit.Bucket(rate_limit.new_bucket(
      capacity: config.publish_burst,
      per_second: config.publish_per_second,
      now: now,
    ))
  }
  let #(limits, decision) =
    rate_limit.check_client(server.limits, id, now, fresh)
  let server = Server(..server, limits: limits)
  case decision {
    rate_limit.Deny(_) -> #(bump(server, "messages_dropped", 1), [
      protocol.Failure(
        protocol.RateLimited,
        rate_limit.decision_to_string(decision),
      ),
    ])
    rate_limit.Allow(_) -> {
      let published =
        broker.publish(
          server.broker,
          topic: name,
          payload: payload,
          retain: retain,
        )
      case published {
        Error(e) -> #(server, [
          protocol.Failure(protocol.BadTopic, broker.error_to_string(e)),
        ])
        Ok(receivers) -> {
          let size = int.to_float(string.byte_size(payload))
          let registry =
            metrics.record(server.registry, "payload_bytes", size)
            |> result.unwrap(server.registry)
          let server =
            Server(..server, registry: registry)
            |> bump("messages_published", 1)
            |> bump("messages_delivered", receivers)
          let verb = protocol.verb(protocol.Publish(name, payload, retain))
          #(server, [protocol.Ack(verb)])
        }
      }
    }
  }
}

fn join_room(
  server: Server,
  id: SessionId,
  room_name: String,
  nick: String,
  now: Int,
) -> #(Server, Outbox) {
  let current =
    dict.get(server.rooms, room_name)
    |> result.unwrap(room.new(room_name))
  case room.join(current, nick, session_id: id, now: now) {
    Error(e) -> #(server, [
      #(id, protocol.Failure(protocol.Forbidden, room.error_to_string(e))),
    ])
    Ok(#(updated, _occupant)) -> {
      let rooms = dict.insert(server.rooms, room_name, updated)
      let server = Server(..server, rooms: rooms)
      let server = case dict.get(server.sessions, id) {
        Ok(s) -> store_session(server, session.enter_room(s, room_name))
        Error(Nil) -> server
      }
      let backlog =
        room.recent_lines(updated)
        |> list.map(fn(l) {
          #(id, protocol.ChatLine(room_name, l.nick, l.text))
        })
      #(server, [#(id, protocol.Ack("JOIN")), ..backlog])
    }
  }
}

fn leave_room(
  server: Server,
  id: SessionId,
  room_name: String,
) -> #(Server, Outbox) {
  let outcome = {
    use current <- result.try(dict.get(server.rooms, room_name))
    use nick <- result.try(room.nick_of_session(current, id))
    room.leave(current, nick) |> result.replace_error(Nil)
  }
  case outcome {
    Error(Nil) -> #(server, [
      #(id, protocol.Failure(protocol.BadArgument, "not in " <> room_name)),
    ])
    Ok(updated) -> {
      let rooms = case room.is_empty(updated) {
        True -> dict.delete(server.rooms, room_name)
        False -> dict.insert(server.rooms, room_name, updated)
      }
      let server = Server(..server, rooms: rooms)
      let server = case dict.get(server.sessions, id) {
        Ok(s) -> store_session(server, session.exit_room(s, room_name))
        Error(Nil) -> server
      }
      #(server, [#(id, protocol.Ack("LEAVE"))])
    }
  }
}

fn say_in_room(
  server: Server,
  id: SessionId,
  room_name: String,
  text: String,
  now: Int,
) -> #(Server, Outbox) {
  let outcome = {
    use current <- result.try(
      dict.get(server.rooms, room_name)
      |> result.replace_error(room.NotInRoom(id)),
    )
    use nick <- result.try(
      room.nick_of_session(current, id)
      |> result.replace_error(room.NotInRoom(id)),
    )
    room.say(current, nick, text, now)
  }
  let keep = fn(updated) {
    Server(..server, rooms: dict.insert(server.rooms, room_name, updated))
  }
  case outcome {
    Error(e) -> #(server, [
      #(id, protocol.Failure(protocol.Forbidden, room.error_to_string(e))),
    ])
    Ok(room.Refused(updated, reason)) -> #(keep(updated), [
      #(id, protocol.Failure(protocol.Forbidden, reason)),
    ])
    Ok(room.Removed(updated, _nick, reason)) -> #(keep(updated), [
      #(id, protocol.Bye("removed from " <> room_name <> ": " <> reason)),
    ])
    Ok(room.Broadcast(updated, line)) -> {
      let frame = protocol.ChatLine(room_name, line.nick, line.text)
      let outbox =
        updated.occupants
        |> dict.values
        |> list.map(fn(o) { #(o.session_id, frame) })
      #(keep(updated), outbox)
    }
  }
}

/// Turn a delivery from the broker into a `MSG` frame for the session that
/// owns the subscription.
pub fn route_delivery(server: Server, delivery: broker.Delivery) -> Outbox {
  let frame =
    protocol.Deliver(delivery.topic, delivery.sequence, delivery.payload)
  server.sessions
  |> dict.values
  |> list.filter(fn(s) {
    dict.values(s.subscriptions) |> list.contains(delivery.subscription)
  })
  |> list.map(fn(s) { #(s.id, frame) })
}

/// Run the heartbeat logic of every session, dropping the ones that closed
/// and releasing their subscriptions.
pub fn tick(server: Server, now: Int) -> #(Server, Outbox) {
  let #(sessions, outbox, closed) =
    dict.fold(server.sessions, #(dict.new(), [], []), fn(acc, id, current) {
      let #(sessions, outbox, closed) = acc
      let #(updated, actions) = session.tick(current, now)
      let frames = list.map(frames_of(actions), fn(f) { #(id, f) })
      let outbox = list.append(outbox, frames)
      case session.is_closed(updated) {
        True -> #(sessions, outbox, [id, ..closed])
        False -> #(dict.insert(sessions, id, updated), outbox, closed)
      }
    })
  list.each(closed, fn(id) {
    let removed = broker.unsubscribe_all(server.broker, id)
    log(Debug, id <> " closed, released " <> int.to_string(removed) <> " subs")
  })
  let server = Server(..server, sessions: sessions) |> update_session_gauge
  #(server, outbox)
}
