//// Rate limiting for publishers and chatters.
////
//// Two classic algorithms are provided:
////
//// - a **token bucket**, which allows short bursts up to its capacity and
////   then settles at a steady refill rate;
//// - a **sliding window log**, which allows at most `limit` events in any
////   window of `window_ms` milliseconds.
////
//// Both are plain values: every call takes the current time and returns
//// the updated limiter together with a `Decision`.

import gleam/dict.{type Dict}
import gleam/float
import gleam/int
import gleam/list

/// Milliseconds in one second, used to convert per-second rates.
const ms_per_second = 1000.0

/// Retry hint returned when a bucket can never refill (rate of zero).
pub const never = -1

/// A token bucket. Construct one with `new_bucket`; the fields are hidden
/// so the token count can only change through `take`.
pub opaque type TokenBucket {
  TokenBucket(
    capacity: Float,
    tokens: Float,
    refill_per_ms: Float,
    updated_at: Int,
  )
}

/// Timestamps of the events seen inside the current window, newest first.
pub type SlidingWindow {
  SlidingWindow(window_ms: Int, limit: Int, hits: List(Int))
}

/// Outcome of asking a limiter for permission.
pub type Decision {
  /// The event may go ahead; `remaining` more are allowed right now.
  Allow(remaining: Int)
  /// The event must be rejected; trying again after the hint may succeed.
  Deny(retry_after_ms: Int)
}

/// Either kind of limiter, so callers can configure one per client.
pub type Limiter {
  Bucket(TokenBucket)
  Window(SlidingWindow)
}

/// Limiters indexed by client id.
pub type ClientLimits =
  Dict(String, #(Limiter, Int))

/// Create a full bucket holding `capacity` tokens that refills at
/// `per_second` tokens per second.
pub fn new_bucket(
  capacity capacity: Int,
  per_second rate: Int,
  now now: Int,
) -> TokenBucket {
  let capacity = int.to_float(int.max(capacity, 1))
  TokenBucket(
    capacity: capacity,
    tokens: capacity,
    refill_per_ms: int.to_float(int.max(rate, 0)) /. ms_per_second,
    updated_at: now,
  )
}

/// Add the tokens earned since the last update, never exceeding capacity.
fn refill(bucket: TokenBucket, now: Int) -> TokenBucket {
  let elapsed = int.max(now - bucket.updated_at, 0)
  let earned = int.to_float(elapsed) *. bucket.refill_per_ms
  TokenBucket(
    ..bucket,
    tokens: float.min(bucket.capacity, bucket.tokens +. earned),
    updated_at: now,
  )
}

/// Take one token.
pub fn take(bucket: TokenBucket, now: Int) -> #(TokenBucket, Decision) {
  take_many(bucket, 1, now)
}

/// Take `cost` tokens at once. Either all of them are taken or none are.
pub fn take_many(
  bucket: TokenBucket,
  cost: Int,
  now: Int,
) -> #(TokenBucket, Decision) {
  let bucket = refill(bucket, now)
  let cost = int.to_float(cost)
  case bucket.tokens >=. cost, bucket.refill_per_ms >. 0.0 {
    True, _ -> {
      let left = bucket.tokens -. cost
      #(TokenBucket(..bucket, tokens: left), Allow(float.truncate(left)))
    }
    False, False -> #(bucket, Deny(never))
    False, True -> {
      let missing = cost -. bucket.tokens
      let wait = float.ceiling(missing /. bucket.refill_per_ms)
      #(bucket, Deny(float.round(wait)))
    }
  }
}

/// Whole tokens available at `now`, without consuming any.
pub fn available(bucket: TokenBucket, now: Int) -> Int {
  refill(bucket, now).tokens |> float.truncate
}

/// The maximum number of tokens the bucket can hold.
pub fn bucket_capacity(bucket: TokenBucket) -> Int {
  float.truncate(bucket.capacity)
}

/// An empty sliding window that admits `limit` events per `window_ms`.
pub fn new_window(limit limit: Int, per window_ms: Int) -> SlidingWindow {
  SlidingWindow(window_ms: int.max(window_ms, 1), limit: limit, hits: [])
}

/// Forget events that have slid out of the window.
pub fn prune(window: SlidingWindow, now: Int) -> SlidingWindow {
  let cutoff = now - window.window_ms
  SlidingWindow(
    ..window,
    hits: list.take_while(window.hits, fn(at) { at > cutoff }),
  )
}

/// Record one event if the window has room for it.
pub fn hit(window: SlidingWindow, now: Int) -> #(SlidingWindow, Decision) {
  let window = prune(window, now)
  let count = list.length(window.hits)
  case count < window.limit {
    True -> #(
      SlidingWindow(..window, hits: [now, ..window.hits]),
      Allow(window.limit - count - 1),
    )
    False -> {
      // The oldest hit is the last element since hits are newest first.
      let oldest = case list.last(window.hits) {
        Ok(at) -> at
        Error(Nil) -> now
      }
      #(window, Deny(int.max(oldest + window.window_ms - now, 1)))
    }
  }
}

/// Number of events currently counted by the window.
pub fn window_count(window: SlidingWindow, now: Int) -> Int {
  prune(window, now).hits |> list.length
}

/// Ask any limiter for permission for one event.
pub fn check(limiter: Limiter, now: Int) -> #(Limiter, Decision) {
  case limiter {
    Bucket(bucket) -> {
      let #(bucket, decision) = take(bucket, now)
      #(Bucket(bucket), decision)
    }
    Window(window) -> {
      let #(window, decision) = hit(window, now)
      #(Window(window), decision)
    }
  }
}

/// Check the limiter belonging to `client`, creating it with `fresh` the
/// first time the client is seen. The time of the check is remembered so
/// idle entries can later be removed with `forget_idle`.
pub fn check_client(
  limits: ClientLimits,
  client: String,
  now: Int,
  fresh: fn() -> Limiter,
) -> #(ClientLimits, Decision) {
  let limiter = case dict.get(limits, client) {
    Ok(#(existing, _)) -> existing
    Error(Nil) -> fresh()
  }
  let #(limiter, decision) = check(limiter, now)
  #(dict.insert(limits, client, #(limiter, now)), decision)
}

/// Drop limiters that have not been consulted for `idle_ms`.
pub fn forget_idle(limits: ClientLimits, now: Int, idle_ms: Int) -> ClientLimits {
  dict.filter(limits, fn(_client, entry) { now - entry.1 < idle_ms })
}

/// True when the decision lets the event through.
pub fn is_allowed(decision: Decision) -> Bool {
  case decision {
    Allow(_) -> True
    Deny(_) -> False
  }
}

/// Short description for logs, e.g. `"deny (retry in 250ms)"`.
pub fn decision_to_string(decision: Decision) -> String {
  case decision {
    Allow(remaining) -> "allow (" <> int.to_string(remaining) <> " left)"
    Deny(wait) if wait < 0 -> "deny (never)"
    Deny(wait) -> "deny (retry in " <> int.to_string(wait) <> "ms)"
  }
}
