//// Client sessions: one per network connection.
////
//// A session starts in the `Handshake` phase and must send `CONNECT`
//// within `handshake_timeout_ms`. Once active, any line from the client
//// counts as a sign of life. When the client has been silent for its
//// keepalive interval the server sends a `PING` probe; after
//// `max_missed_pings` unanswered probes the session is closed.
////
//// The functions here are pure: the connection handler calls `tick`
//// periodically with the current time and performs the returned actions.

import gleam/dict.{type Dict}
import gleam/int
import gleam/list
import gleam/option.{type Option, None, Some}
import gleam/result
import relay/clock
import relay/protocol.{type Command, type Frame}

/// Keepalive interval used when a client asks for zero.
pub const default_keepalive_ms = 60_000

/// Time allowed between accepting a socket and receiving `CONNECT`.
pub const handshake_timeout_ms = 10_000

/// Probes that may go unanswered before the session is dropped.
pub const max_missed_pings = 3

/// Protocol errors tolerated before the session is dropped.
pub const max_protocol_errors = 5

/// Timestamps and durations, in milliseconds.
pub type Millis =
  Int

/// Server-side session identifier, e.g. `"s-4f2a9c01"`.
pub type SessionId =
  String

/// Why a session ended.
pub type CloseReason {
  ClientQuit
  HandshakeTimeout
  HeartbeatTimeout
  TooManyErrors(count: Int)
  ProtocolViolation(detail: String)
  ServerShutdown
  Kicked(by: String)
}

/// Where a session is in its life cycle.
pub type Phase {
  Handshake
  Active
  Closing(reason: CloseReason)
  Closed(reason: CloseReason)
}

/// Everything the server remembers about one connection.
pub type Session {
  Session(
    id: SessionId,
    client_id: Option(String),
    phase: Phase,
    opened_at: Millis,
    last_seen: Millis,
    keepalive_ms: Millis,
    probe_sent_at: Option(Millis),
    missed_pings: Int,
    errors: Int,
    subscriptions: Dict(String, Int),
    rooms: List(String),
  )
}

/// Side effects requested by the session logic.
pub type Action {
  Send(Frame)
  Disconnect(CloseReason)
}

/// A brand new session for a socket accepted at `now`.
pub fn new(id: SessionId, now: Millis) -> Session {
  Session(
    id: id,
    client_id: None,
    phase: Handshake,
    opened_at: now,
    last_seen: now,
    keepalive_ms: default_keepalive_ms,
    probe_sent_at: None,
    missed_pings: 0,
    errors: 0,
    subscriptions: dict.new(),
    rooms: [],
  )
}

/// A new session with a freshly generated identifier.
pub fn open(now: Millis) -> Session {
  new(clock.unique_id(), now)
}

/// Note that the client said something at `now`; clears any pending probe.
pub fn touch(session: Session, now: Millis) -> Session {
  Session(..session, last_seen: now, probe_sent_at: None, missed_pings: 0)
}

/// True once `CONNECT` has been accepted and the session is not closing.
pub fn is_active(session: Session) -> Bool {
  session.phase == Active
}

/// True once the session has fully closed.
pub fn is_closed(session: Session) -> Bool {
  case session.phase {
    Closed(_) -> True
    Handshake | Active | Closing(_) -> False
  }
}

/// The next moment at which `tick` has something to do.
pub fn deadline(session: Session) -> Option(Millis) {
  case session.phase, session.probe_sent_at {
    Handshake, _ -> Some(session.opened_at + handshake_timeout_ms)
    Active, None -> Some(session.last_seen + session.keepalive_ms)
    Active, Some(sent) -> Some(sent + probe_timeout(session))
    Closing(_), _ -> Some(session.last_seen)
    Closed(_), _ -> None
  }
}

/// How long to wait for any reply after a probe: half the keepalive, but
/// never less than one second.
pub fn probe_timeout(session: Session) -> Millis {
  int.max(session.keepalive_ms / 2, 1000)
}

/// Advance the heartbeat state machine to `now`.
///
/// Returns the updated session and the frames to send or the connection to
/// drop. Calling `tick` more often than needed is harmless: when no
/// deadline has passed the session comes back unchanged with no actions.
pub fn tick(session: Session, now: Millis) -> #(Session, List(Action)) {
  case session.phase {
    Closed(_) -> #(session, [])

    Closing(reason) -> #(Session(..session, phase: Closed(reason)), [
      Send(protocol.Bye(close_reason_to_string(reason))),
      Disconnect(reason),
    ])

    Handshake -> {
      let waited = now - session.opened_at
      case waited >= handshake_timeout_ms {
        False -> #(session, [])
        True -> {
          let reason = HandshakeTimeout
          #(Session(..session, phase: Closed(reason)), [
            Send(protocol.Failure(protocol.NotConnected, "CONNECT expected")),
            Disconnect(reason),
          ])
        }
      }
    }

    Active -> {
      // Silence shorter than the keepalive needs no probe yet.
      let silent_for = now - session.last_seen
      let keepalive = session.keepalive_ms
      case session.probe_sent_at {
        None if silent_for < keepalive -> #(session, [])
        None -> #(Session(..session, probe_sent_at: Some(now)), [
          Send(protocol.Probe),
        ])
        Some(sent) -> {
          let unanswered = now - sent >= probe_timeout(session)
          let missed = session.missed_pings + 1
          case unanswered, missed >= max_missed_pings {
            False, _ -> #(session, [])
            True, True -> {
              let reason = HeartbeatTimeout
              #(
                Session(
                  ..session,
                  missed_pings: missed,
                  phase: Closed(reason),
                  probe_sent_at: None,
                ),
                [Disconnect(reason)],
              )
            }
            True, False -> #(
              Session(..session, missed_pings: missed, probe_sent_at: Some(now)),
              [Send(protocol.Probe)],
            )
          }
        }
      }
    }
  }
}

/// Apply the session-level part of a client command.
///
/// Handles `CONNECT`, `PING` and `QUIT` completely and checks that every
/// other command arrives on an active session. Broker and room work is left
/// to the caller, which only proceeds when this returns `Ok`.
pub fn handle_command(
  session: Session,
  command: Command,
  now: Millis,
) -> Result(#(Session, List(Action)), Frame) {
  let session = touch(session, now)
  case session.phase, command {
    Closed(_), _ | Closing(_), _ ->
      Error(protocol.Failure(protocol.NotConnected, "session is closing"))

    Handshake, protocol.Connect(client_id, keepalive) -> {
      let keepalive_ms = case keepalive {
        0 -> default_keepalive_ms
        seconds -> seconds * 1000
      }
      let session =
        Session(
          ..session,
          client_id: Some(client_id),
          phase: Active,
          keepalive_ms: keepalive_ms,
        )
      Ok(#(session, [Send(protocol.Welcome(session.id))]))
    }

    Handshake, protocol.Quit -> {
      let session = Session(..session, phase: Closing(ClientQuit))
      Ok(#(session, []))
    }

    Handshake, _ ->
      Error(protocol.Failure(protocol.NotConnected, "send CONNECT first"))

    Active, protocol.Connect(..) ->
      Error(protocol.Failure(protocol.BadArgument, "already connected"))

    Active, protocol.Ping -> Ok(#(session, [Send(protocol.Pong)]))

    Active, protocol.Quit ->
      Ok(#(Session(..session, phase: Closing(ClientQuit)), []))

    Active, _ -> Ok(#(session, []))
  }
}

/// Count a protocol error; too many of them close the session.
pub fn record_error(session: Session) -> #(Session, List(Action)) {
  let errors = session.errors + 1
  case errors >= max_protocol_errors {
    True -> {
      let reason = TooManyErrors(errors)
      #(Session(..session, errors: errors, phase: Closing(reason)), [])
    }
    False -> #(Session(..session, errors: errors), [])
  }
}

/// Begin closing the session for `reason`; the next `tick` says goodbye.
pub fn close(session: Session, reason: CloseReason) -> Session {
  case session.phase {
    Closed(_) -> session
    _ -> Session(..session, phase: Closing(reason))
  }
}

/// Remember the broker subscription id created for `pattern`.
pub fn remember_subscription(
  session: Session,
  pattern: String,
  subscription_id: Int,
) -> Session {
  Session(
    ..session,
    subscriptions: dict.insert(session.subscriptions, pattern, subscription_id),
  )
}

/// Forget the subscription made for `pattern`, returning its broker id.
pub fn forget_subscription(
  session: Session,
  pattern: String,
) -> Result(#(Session, Int), Nil) {
  use id <- result.map(dict.get(session.subscriptions, pattern))
  let subscriptions = dict.delete(session.subscriptions, pattern)
  #(Session(..session, subscriptions: subscriptions), id)
}

/// Record that the session's client is now in `room`.
pub fn enter_room(session: Session, room: String) -> Session {
  case list.contains(session.rooms, room) {
    True -> session
    False -> Session(..session, rooms: [room, ..session.rooms])
  }
}

/// Record that the session's client left `room`.
pub fn exit_room(session: Session, room: String) -> Session {
  Session(..session, rooms: list.filter(session.rooms, fn(r) { r != room }))
}

/// How long the session has existed.
pub fn uptime(session: Session, now: Millis) -> Millis {
  now - session.opened_at
}

/// A one-word description of the phase, for logs and `$sys` topics.
pub fn phase_name(phase: Phase) -> String {
  case phase {
    Handshake -> "handshake"
    Active -> "active"
    Closing(_) -> "closing"
    Closed(_) -> "closed"
  }
}

/// Explain why a session closed, as sent in the `BYE` frame.
pub fn close_reason_to_string(reason: CloseReason) -> String {
  case reason {
    ClientQuit -> "client quit"
    HandshakeTimeout -> "no CONNECT received in time"
    HeartbeatTimeout -> "client stopped answering pings"
    TooManyErrors(count) -> int.to_string(count) <> " protocol errors"
    ProtocolViolation(detail) -> "protocol violation: " <> detail
    ServerShutdown -> "server shutting down"
    Kicked(by) -> "kicked by " <> by
  }
}
