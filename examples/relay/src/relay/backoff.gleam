//// Exponential backoff for peers that reconnect to the broker.
////
//// Bridged brokers and long-lived clients retry failed connections with a
//// delay that doubles (by default) after every failure, capped at a
//// maximum, and randomised with jitter so that many peers dropped at the
//// same moment do not all come back at the same moment.
////
//// Randomness is passed in as a function so tests can make it
//// deterministic; production code uses `clock.random_uniform`.

import gleam/float
import gleam/int
import gleam/option.{type Option, None, Some}
import relay/clock

/// First delay after a failure, in milliseconds.
pub const default_initial_ms = 100

/// Upper bound for any single delay, in milliseconds.
pub const default_max_ms = 30_000

/// A connection that stays up this long resets the attempt counter.
pub const stable_after_ms = 60_000

/// A source of uniformly distributed floats in `[0.0, 1.0)`.
pub type Random =
  fn() -> Float

/// How the computed delay is randomised.
pub type Jitter {
  /// Use the exact exponential delay.
  NoJitter
  /// Pick uniformly between zero and the exponential delay.
  FullJitter
  /// Keep half of the delay and randomise the other half.
  EqualJitter
  /// Pick between the initial delay and three times the previous delay.
  Decorrelated
}

/// Settings for one retry loop.
pub type Policy {
  Policy(
    initial_ms: Int,
    max_ms: Int,
    multiplier: Float,
    jitter: Jitter,
    max_attempts: Option(Int),
  )
}

/// What to do after a failure.
pub type Step {
  /// Wait `after_ms` and then make attempt number `attempt`.
  Retry(after_ms: Int, attempt: Int)
  /// Stop trying; `attempts` connection attempts have failed.
  GiveUp(attempts: Int)
}

/// Reconnection bookkeeping for one peer.
pub type Reconnect {
  Reconnect(
    policy: Policy,
    attempt: Int,
    previous_delay: Int,
    connected_since: Option(Int),
  )
}

/// Doubling delays from 100ms to 30s, full jitter, retry forever.
pub fn default_policy() -> Policy {
  Policy(
    initial_ms: default_initial_ms,
    max_ms: default_max_ms,
    multiplier: 2.0,
    jitter: FullJitter,
    max_attempts: None,
  )
}

/// Limit the number of attempts before giving up.
pub fn with_max_attempts(policy: Policy, attempts: Int) -> Policy {
  Policy(..policy, max_attempts: Some(int.max(attempts, 1)))
}

/// Replace the jitter strategy.
pub fn with_jitter(policy: Policy, jitter: Jitter) -> Policy {
  Policy(..policy, jitter: jitter)
}

/// The un-randomised delay before attempt `attempt` (1-based):
/// `initial * multiplier ^ (attempt - 1)`, capped at `max_ms`.
pub fn base_delay(policy: Policy, attempt: Int) -> Int {
  let exponent = int.to_float(int.max(attempt - 1, 0))
  let factor = case float.power(policy.multiplier, exponent) {
    Ok(f) -> f
    Error(Nil) -> 1.0
  }
  let raw = int.to_float(policy.initial_ms) *. factor
  let capped = float.min(raw, int.to_float(policy.max_ms))
  float.round(capped)
}

/// Randomise `delay` according to the policy's jitter.
pub fn apply_jitter(
  policy: Policy,
  delay: Int,
  previous: Int,
  random: Random,
) -> Int {
  let r = random()
  let jittered = case policy.jitter {
    NoJitter -> delay
    FullJitter -> float.round(int.to_float(delay) *. r)
    EqualJitter -> {
      let half = delay / 2
      half + float.round(int.to_float(delay - half) *. r)
    }
    Decorrelated -> {
      let low = policy.initial_ms
      let high = int.max(previous * 3, low)
      low + float.round(int.to_float(high - low) *. r)
    }
  }
  int.clamp(jittered, min: 0, max: policy.max_ms)
}

/// Decide what follows failed attempt number `attempt`.
pub fn next_step(
  policy: Policy,
  attempt: Int,
  previous: Int,
  random: Random,
) -> Step {
  case policy.max_attempts {
    Some(limit) if attempt >= limit -> GiveUp(attempt)
    _ -> {
      let delay =
        base_delay(policy, attempt + 1)
        |> apply_jitter(policy, _, previous, random)
      Retry(after_ms: delay, attempt: attempt + 1)
    }
  }
}

/// The un-randomised delays a policy would produce, for logging or docs.
pub fn schedule(policy: Policy, attempts: Int) -> List(Int) {
  schedule_loop(policy, attempts, [])
}

fn schedule_loop(policy: Policy, attempt: Int, acc: List(Int)) -> List(Int) {
  case attempt <= 0 {
    True -> acc
    False -> {
      let delay = base_delay(policy, attempt)
      schedule_loop(policy, attempt - 1, [delay, ..acc])
    }
  }
}

/// A fresh reconnect tracker: disconnected, no failures yet.
pub fn reconnect(policy: Policy) -> Reconnect {
  Reconnect(policy: policy, attempt: 0, previous_delay: 0, connected_since: None)
}

/// Record a failed connection attempt and compute the next step.
pub fn on_failure(state: Reconnect, random: Random) -> #(Reconnect, Step) {
  let step = next_step(state.policy, state.attempt, state.previous_delay, random)
  case step {
    Retry(after_ms, attempt) -> #(
      Reconnect(
        ..state,
        attempt: attempt,
        previous_delay: after_ms,
        connected_since: None,
      ),
      step,
    )
    GiveUp(_) -> #(Reconnect(..state, connected_since: None), step)
  }
}

/// Record a successful connection at `now`.
pub fn on_connected(state: Reconnect, now: Int) -> Reconnect {
  Reconnect(..state, connected_since: Some(now))
}

/// Record that an established connection dropped at `now`.
///
/// If it had been up for at least `stable_after_ms` the failure counter is
/// reset, so a peer that was healthy for a long time starts over with a
/// short delay instead of inheriting an old, long one.
pub fn on_disconnected(state: Reconnect, now: Int) -> Reconnect {
  let stable = stable_after_ms
  case state.connected_since {
    Some(since) if now - since >= stable -> reset(state)
    _ -> Reconnect(..state, connected_since: None)
  }
}

/// Forget every previous failure.
pub fn reset(state: Reconnect) -> Reconnect {
  Reconnect(..state, attempt: 0, previous_delay: 0, connected_since: None)
}

/// `on_failure` using the node's random number generator.
pub fn on_failure_random(state: Reconnect) -> #(Reconnect, Step) {
  on_failure(state, clock.random_uniform)
}

/// Name of a jitter strategy as used in configuration files.
pub fn jitter_to_string(jitter: Jitter) -> String {
  case jitter {
    NoJitter -> "none"
    FullJitter -> "full"
    EqualJitter -> "equal"
    Decorrelated -> "decorrelated"
  }
}

/// Parse a jitter strategy from configuration.
pub fn jitter_from_string(text: String) -> Result(Jitter, Nil) {
  case text {
    "none" -> Ok(NoJitter)
    "full" -> Ok(FullJitter)
    "equal" -> Ok(EqualJitter)
    "decorrelated" -> Ok(Decorrelated)
    _ -> Error(Nil)
  }
}
