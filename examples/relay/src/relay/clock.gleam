//// Access to time, randomness and unique identifiers.
////
//// These are the only impure helpers the rest of the package depends on.
//// Most functions elsewhere take the current time as an argument instead of
//// calling this module, which keeps them deterministic under test.

/// Wall-clock milliseconds since the Unix epoch. May jump backwards when the
/// system clock is adjusted, so never use it to measure durations.
@external(erlang, "relay_ffi", "system_time_ms")
pub fn now_ms() -> Int

/// Milliseconds on the monotonic clock. The origin is arbitrary; only
/// differences between two readings are meaningful.
@external(erlang, "relay_ffi", "monotonic_ms")
pub fn monotonic_ms() -> Int

/// A uniformly distributed float in `[0.0, 1.0)`.
@external(erlang, "relay_ffi", "random_uniform")
pub fn random_uniform() -> Float

/// A short identifier that is unique for the lifetime of the node, such as
/// `"s-4f2a9c01"`.
@external(erlang, "relay_ffi", "unique_id")
pub fn unique_id() -> String

/// Milliseconds elapsed on the monotonic clock since `started`.
pub fn elapsed_since(started: Int) -> Int {
  monotonic_ms() - started
}
