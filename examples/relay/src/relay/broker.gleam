//// The broker: one actor that owns every subscription.
////
//// Sessions never touch the subscription table directly. They send the
//// broker `Subscribe`, `Unsubscribe`, `Publish` and `Stats` messages, each
//// carrying a reply subject, and the broker routes every published message
//// to the delivery subjects of all matching subscriptions.
////
//// Use the client functions (`subscribe`, `publish`, ...) rather than
//// building messages by hand; they take care of the reply subject and the
//// call timeout.

import gleam/dict.{type Dict}
import gleam/erlang/process.{type Subject}
import gleam/int
import gleam/list
import gleam/otp/actor
import gleam/result
import gleam/set
import relay/retention.{type RetainedMessage}
import relay/topic.{type Pattern}

/// Milliseconds a caller waits for the broker before crashing.
pub const call_timeout = 2000

/// Subscriptions a single subscriber may hold at once.
pub const max_subscriptions_per_subscriber = 64

/// Who owns a subscription; normally a session id.
pub type SubscriberId =
  String

/// Handle returned when subscribing, used to unsubscribe.
pub type SubscriptionId =
  Int

/// A message handed to a subscriber.
pub type Delivery {
  Delivery(
    subscription: SubscriptionId,
    topic: String,
    payload: String,
    sequence: Int,
    retained: Bool,
  )
}

/// One entry in the subscription table.
pub type Subscription {
  Subscription(
    id: SubscriptionId,
    subscriber: SubscriberId,
    pattern: Pattern,
    deliver: Subject(Delivery),
  )
}

/// Counters reported by the `Stats` message.
pub type BrokerStats {
  BrokerStats(
    subscriptions: Int,
    subscribers: Int,
    published: Int,
    delivered: Int,
    retained: Int,
  )
}

/// Why the broker refused a request.
pub type BrokerError {
  InvalidPattern(topic.TopicError)
  InvalidTopic(topic.TopicError)
  ReservedTopic(name: String)
  TooManySubscriptions(limit: Int)
  UnknownSubscription(id: SubscriptionId)
}

/// Messages understood by the broker actor.
pub type Message {
  Subscribe(
    subscriber: SubscriberId,
    pattern: String,
    deliver: Subject(Delivery),
    reply: Subject(Result(SubscriptionId, BrokerError)),
  )
  Unsubscribe(
    id: SubscriptionId,
    reply: Subject(Result(Nil, BrokerError)),
  )
  UnsubscribeAll(subscriber: SubscriberId, reply: Subject(Int))
  Publish(
    topic: String,
    payload: String,
    retain: Bool,
    reply: Subject(Result(Int, BrokerError)),
  )
  Stats(reply: Subject(BrokerStats))
  ExpireRetained(now: Int)
  Shutdown
}

/// The broker's private state.
pub type State {
  State(
    subscriptions: Dict(SubscriptionId, Subscription),
    next_id: SubscriptionId,
    sequence: Int,
    retained: retention.Store,
    published: Int,
    delivered: Int,
    clock: fn() -> Int,
  )
}

/// An empty broker state.
pub fn new_state(policy: retention.Policy, clock: fn() -> Int) -> State {
  State(
    subscriptions: dict.new(),
    next_id: 1,
    sequence: 0,
    retained: retention.new_store(policy),
    published: 0,
    delivered: 0,
    clock: clock,
  )
}

/// Start the broker actor with the given retention policy.
pub fn start(
  policy: retention.Policy,
  clock: fn() -> Int,
) -> Result(Subject(Message), actor.StartError) {
  actor.new(new_state(policy, clock))
  |> actor.on_message(handle_message)
  |> actor.start
  |> result.map(fn(started) { started.data })
}

/// Process one message and return the broker's next state.
///
/// Subscribing replays retained messages for every topic the new pattern
/// selects, so a late subscriber immediately learns the latest values.
/// Publishing assigns the next sequence number, fans the message out to
/// every matching subscription and, when asked to, retains it.
pub fn handle_message(
  state: State,
  message: Message,
) -> actor.Next(State, Message) {
  case message {
    Subscribe(subscriber, source, deliver, reply) -> {
      let outcome = {
        use pattern <- result.try(
          topic.parse_pattern(source) |> result.map_error(InvalidPattern),
        )
        let owned = count_for_subscriber(state, subscriber)
        let limit = max_subscriptions_per_subscriber
        case owned >= limit {
          True -> Error(TooManySubscriptions(limit))
          False -> Ok(pattern)
        }
      }
      case outcome {
        Error(error) -> {
          process.send(reply, Error(error))
          actor.continue(state)
        }
        Ok(pattern) -> {
          let id = state.next_id
          let subscription =
            Subscription(
              id: id,
              subscriber: subscriber,
              pattern: pattern,
              deliver: deliver,
            )
          process.send(reply, Ok(id))
          let replayed = replay_retained(state, subscription)
          actor.continue(
            State(
              ..state,
              subscriptions: dict.insert(state.subscriptions, id, subscription),
              next_id: id + 1,
              delivered: state.delivered + replayed,
            ),
          )
        }
      }
    }

    Unsubscribe(id, reply) ->
      case dict.has_key(state.subscriptions, id) {
        True -> {
          process.send(reply, Ok(Nil))
          actor.continue(
            State(..state, subscriptions: dict.delete(state.subscriptions, id)),
          )
        }
        False -> {
          process.send(reply, Error(UnknownSubscription(id)))
          actor.continue(state)
        }
      }

    UnsubscribeAll(subscriber, reply) -> {
      let kept =
        dict.filter(state.subscriptions, fn(_id, s) {
          s.subscriber != subscriber
        })
      process.send(reply, dict.size(state.subscriptions) - dict.size(kept))
      actor.continue(State(..state, subscriptions: kept))
    }

    Publish(name, payload, retain, reply) ->
      case route(state, name, payload, retain) {
        Error(error) -> {
          process.send(reply, Error(error))
          actor.continue(state)
        }
        Ok(#(next, receivers)) -> {
          process.send(reply, Ok(receivers))
          actor.continue(next)
        }
      }

    Stats(reply) -> {
      process.send(reply, stats_of(state))
      actor.continue(state)
    }

    ExpireRetained(now) -> {
      let sweep = retention.expire(state.retained, now)
      actor.continue(State(..state, retained: sweep.store))
    }

    Shutdown -> actor.stop()
  }
}

/// Validate a topic, fan the message out and update counters. Returns the
/// new state and how many subscriptions received the message.
fn route(
  state: State,
  name: String,
  payload: String,
  retain: Bool,
) -> Result(#(State, Int), BrokerError) {
  use parsed <- result.try(
    topic.parse(name) |> result.map_error(InvalidTopic),
  )
  use <- reject_system_topic(parsed, name)
  let sequence = state.sequence + 1
  let receivers =
    matching(state, parsed)
    |> list.map(fn(subscription) {
      Delivery(
        subscription: subscription.id,
        topic: name,
        payload: payload,
        sequence: sequence,
        retained: False,
      )
      |> process.send(subscription.deliver, _)
    })
    |> list.length
  let retained = case retain {
    False -> state.retained
    True ->
      retention.retain(
        state.retained,
        name,
        retention.RetainedMessage(
          sequence: sequence,
          payload: payload,
          stored_at: state.clock(),
        ),
      )
  }
  Ok(#(
    State(
      ..state,
      sequence: sequence,
      retained: retained,
      published: state.published + 1,
      delivered: state.delivered + receivers,
    ),
    receivers,
  ))
}

fn reject_system_topic(
  parsed: topic.Topic,
  name: String,
  continue: fn() -> Result(a, BrokerError),
) -> Result(a, BrokerError) {
  case topic.is_system(parsed) {
    True -> Error(ReservedTopic(name))
    False -> continue()
  }
}

/// Every subscription whose pattern selects `target`.
pub fn matching(state: State, target: topic.Topic) -> List(Subscription) {
  state.subscriptions
  |> dict.values
  |> list.filter(fn(subscription) { topic.matches(subscription.pattern, target) })
  |> list.sort(fn(a, b) { int.compare(a.id, b.id) })
}

/// Send the newest retained message of every matching topic to a new
/// subscription. Returns how many were sent.
fn replay_retained(state: State, subscription: Subscription) -> Int {
  retention.topics(state.retained)
  |> list.filter_map(fn(name) {
    use parsed <- result.try(topic.parse(name) |> result.replace_error(Nil))
    case topic.matches(subscription.pattern, parsed) {
      True -> retention.latest(state.retained, name) |> result.map(pair(name, _))
      False -> Error(Nil)
    }
  })
  |> list.map(fn(found) {
    let #(name, message) = found
    retained_delivery(subscription, name, message)
    |> process.send(subscription.deliver, _)
  })
  |> list.length
}

fn pair(a: a, b: b) -> #(a, b) {
  #(a, b)
}

fn retained_delivery(
  subscription: Subscription,
  name: String,
  message: RetainedMessage,
) -> Delivery {
  Delivery(
    subscription: subscription.id,
    topic: name,
    payload: message.payload,
    sequence: message.sequence,
    retained: True,
  )
}

fn count_for_subscriber(state: State, subscriber: SubscriberId) -> Int {
  dict.fold(state.subscriptions, 0, fn(total, _id, s) {
    case s.subscriber == subscriber {
      True -> total + 1
      False -> total
    }
  })
}

/// Compute the statistics snapshot for a state.
pub fn stats_of(state: State) -> BrokerStats {
  let subscribers =
    state.subscriptions
    |> dict.values
    |> list.map(fn(s) { s.subscriber })
    |> set.from_list
    |> set.size
  BrokerStats(
    subscriptions: dict.size(state.subscriptions),
    subscribers: subscribers,
    published: state.published,
    delivered: state.delivered,
    retained: retention.total_messages(state.retained),
  )
}

// ---------------------------------------------------------------------------
// Client API
// ---------------------------------------------------------------------------

/// Subscribe `subscriber` to `pattern`; matching messages are sent to
/// `deliver`. Returns the id needed to unsubscribe.
pub fn subscribe(
  broker: Subject(Message),
  subscriber subscriber: SubscriberId,
  pattern pattern: String,
  deliver deliver: Subject(Delivery),
) -> Result(SubscriptionId, BrokerError) {
  process.call(broker, call_timeout, fn(reply) {
    Subscribe(subscriber, pattern, deliver, reply)
  })
}

/// Remove a single subscription.
pub fn unsubscribe(
  broker: Subject(Message),
  id: SubscriptionId,
) -> Result(Nil, BrokerError) {
  process.call(broker, call_timeout, fn(reply) { Unsubscribe(id, reply) })
}

/// Remove every subscription of a subscriber, e.g. when its session ends.
/// Returns how many were removed.
pub fn unsubscribe_all(broker: Subject(Message), subscriber: SubscriberId) -> Int {
  process.call(broker, call_timeout, fn(reply) {
    UnsubscribeAll(subscriber, reply)
  })
}

/// Publish a payload; returns the number of subscriptions it reached.
pub fn publish(
  broker: Subject(Message),
  topic name: String,
  payload payload: String,
  retain retain: Bool,
) -> Result(Int, BrokerError) {
  process.call(broker, call_timeout, fn(reply) {
    Publish(name, payload, retain, reply)
  })
}

/// Ask the broker for its counters.
pub fn stats(broker: Subject(Message)) -> BrokerStats {
  process.call(broker, call_timeout, Stats)
}

/// Stop the broker. Pending callers will time out.
pub fn shutdown(broker: Subject(Message)) -> Nil {
  process.send(broker, Shutdown)
}

/// A message suitable for an `ERR` frame.
pub fn error_to_string(error: BrokerError) -> String {
  case error {
    InvalidPattern(e) -> "invalid pattern: " <> topic.error_to_string(e)
    InvalidTopic(e) -> "invalid topic: " <> topic.error_to_string(e)
    ReservedTopic(name) -> name <> " is reserved for the broker"
    TooManySubscriptions(limit) ->
      "subscription limit of " <> int.to_string(limit) <> " reached"
    UnknownSubscription(id) -> "no subscription " <> int.to_string(id)
  }
}
