//// Message retention.
////
//// For every topic the broker can keep a bounded history so that a client
//// subscribing late still receives the most recent values. History is held
//// in a fixed-size ring buffer per topic; once the ring is full the oldest
//// entry is overwritten. Independently, entries older than a maximum age
//// can be swept away with `expire`.

import gleam/dict.{type Dict}
import gleam/int
import gleam/list
import gleam/option.{type Option, None, Some}
import gleam/string

/// How many messages per topic are kept when no policy says otherwise.
pub const default_capacity = 10

/// A message held for late subscribers.
pub type RetainedMessage {
  RetainedMessage(sequence: Int, payload: String, stored_at: Int)
}

/// A fixed-capacity circular buffer of retained messages.
pub opaque type Ring {
  Ring(capacity: Int, slots: Dict(Int, RetainedMessage), next: Int, size: Int)
}

/// What the broker keeps for each topic.
pub type Policy {
  /// Keep only the newest `count` messages.
  KeepLast(count: Int)
  /// Keep everything younger than `max_age_ms`, up to the default capacity.
  KeepFor(max_age_ms: Int)
  /// Keep at most `count` messages and none older than `max_age_ms`.
  KeepLastFor(count: Int, max_age_ms: Int)
  /// Retain nothing at all.
  KeepNothing
}

/// Retained history for every topic.
pub type Store {
  Store(rings: Dict(String, Ring), policy: Policy)
}

/// Outcome of an expiry sweep.
pub type Sweep {
  Sweep(store: Store, removed: Int, emptied_topics: List(String))
}

/// An empty ring able to hold `capacity` messages (at least one).
pub fn new_ring(capacity: Int) -> Ring {
  Ring(capacity: int.max(capacity, 1), slots: dict.new(), next: 0, size: 0)
}

/// Append a message, overwriting the oldest one when the ring is full.
pub fn push(ring: Ring, message: RetainedMessage) -> Ring {
  Ring(
    ..ring,
    slots: dict.insert(ring.slots, ring.next, message),
    next: { ring.next + 1 } % ring.capacity,
    size: int.min(ring.size + 1, ring.capacity),
  )
}

/// The ring's contents, oldest first.
pub fn to_list(ring: Ring) -> List(RetainedMessage) {
  let start = { ring.next - ring.size + ring.capacity } % ring.capacity
  collect(ring, start, ring.size, [])
  |> list.reverse
}

fn collect(
  ring: Ring,
  index: Int,
  remaining: Int,
  acc: List(RetainedMessage),
) -> List(RetainedMessage) {
  case remaining {
    0 -> acc
    _ -> {
      let acc = case dict.get(ring.slots, index) {
        Ok(message) -> [message, ..acc]
        Error(Nil) -> acc
      }
      collect(ring, { index + 1 } % ring.capacity, remaining - 1, acc)
    }
  }
}

/// Number of messages currently held.
pub fn size(ring: Ring) -> Int {
  ring.size
}

/// Maximum number of messages the ring can hold.
pub fn capacity(ring: Ring) -> Int {
  ring.capacity
}

/// The newest message in the ring.
pub fn newest(ring: Ring) -> Result(RetainedMessage, Nil) {
  case ring.size {
    0 -> Error(Nil)
    _ -> dict.get(ring.slots, { ring.next - 1 + ring.capacity } % ring.capacity)
  }
}

/// Rebuild a ring from scratch keeping only the messages `keep` accepts.
fn filter_ring(ring: Ring, keep: fn(RetainedMessage) -> Bool) -> Ring {
  ring
  |> to_list
  |> list.filter(keep)
  |> list.fold(new_ring(ring.capacity), push)
}

/// An empty store governed by `policy`.
pub fn new_store(policy: Policy) -> Store {
  Store(rings: dict.new(), policy: policy)
}

/// Ring size implied by a policy.
pub fn policy_capacity(policy: Policy) -> Int {
  case policy {
    KeepLast(count) | KeepLastFor(count, _) -> count
    KeepFor(_) -> default_capacity
    KeepNothing -> 0
  }
}

/// Age limit implied by a policy, if any.
pub fn policy_max_age(policy: Policy) -> Option(Int) {
  case policy {
    KeepFor(max_age) | KeepLastFor(_, max_age) -> Some(max_age)
    KeepLast(_) | KeepNothing -> None
  }
}

/// Remember a published message for `topic`.
pub fn retain(store: Store, topic: String, message: RetainedMessage) -> Store {
  let capacity = policy_capacity(store.policy)
  case capacity {
    0 -> store
    _ -> {
      let ring = case dict.get(store.rings, topic) {
        Ok(ring) -> ring
        Error(Nil) -> new_ring(capacity)
      }
      Store(..store, rings: dict.insert(store.rings, topic, push(ring, message)))
    }
  }
}

/// Everything retained for a topic, oldest first.
pub fn history(store: Store, topic: String) -> List(RetainedMessage) {
  case dict.get(store.rings, topic) {
    Ok(ring) -> to_list(ring)
    Error(Nil) -> []
  }
}

/// The most recent retained message of a topic.
pub fn latest(store: Store, topic: String) -> Result(RetainedMessage, Nil) {
  case dict.get(store.rings, topic) {
    Ok(ring) -> newest(ring)
    Error(Nil) -> Error(Nil)
  }
}

/// Retained messages of `topic` whose sequence number is strictly greater
/// than `sequence`; lets a reconnecting client catch up on what it missed.
pub fn since(
  store: Store,
  topic: String,
  sequence: Int,
) -> List(RetainedMessage) {
  history(store, topic)
  |> list.filter(fn(message) { message.sequence > sequence })
}

/// Forget a topic's history entirely.
pub fn clear_topic(store: Store, topic: String) -> Store {
  Store(..store, rings: dict.delete(store.rings, topic))
}

/// Topics that currently have retained messages, alphabetically.
pub fn topics(store: Store) -> List(String) {
  store.rings
  |> dict.keys
  |> list.sort(string.compare)
}

/// Total number of retained messages across all topics.
pub fn total_messages(store: Store) -> Int {
  dict.fold(store.rings, 0, fn(total, _topic, ring) { total + ring.size })
}

/// Remove every message older than the policy's age limit.
///
/// Rings that become empty are dropped so the store does not accumulate
/// topics nobody publishes to any more. The returned `Sweep` says how many
/// messages were discarded and which topics disappeared, which the broker
/// reports through its metrics.
pub fn expire(store: Store, now: Int) -> Sweep {
  case policy_max_age(store.policy) {
    None -> Sweep(store: store, removed: 0, emptied_topics: [])
    Some(max_age) -> {
      let cutoff = now - max_age
      let #(rings, removed, emptied) =
        dict.fold(store.rings, #(dict.new(), 0, []), fn(acc, topic, ring) {
          let #(rings, removed, emptied) = acc
          let kept = filter_ring(ring, fn(m) { m.stored_at >= cutoff })
          let dropped = ring.size - kept.size
          case kept.size {
            0 -> #(rings, removed + dropped, [topic, ..emptied])
            _ -> #(dict.insert(rings, topic, kept), removed + dropped, emptied)
          }
        })
      Sweep(
        store: Store(..store, rings: rings),
        removed: removed,
        emptied_topics: list.reverse(emptied),
      )
    }
  }
}

/// Switch to a new policy, shrinking existing rings when the new capacity
/// is smaller. The newest messages survive.
pub fn change_policy(store: Store, policy: Policy) -> Store {
  let capacity = policy_capacity(policy)
  case capacity {
    0 -> new_store(policy)
    _ -> {
      let rings =
        dict.map_values(store.rings, fn(_topic, ring) {
          let messages = to_list(ring)
          let excess = int.max(list.length(messages) - capacity, 0)
          messages
          |> list.drop(excess)
          |> list.fold(new_ring(capacity), push)
        })
      Store(rings: rings, policy: policy)
    }
  }
}
