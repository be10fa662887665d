//// Thin, typed wrappers around the Erlang helpers in `bookshelf_ffi.erl`.
////
//// Everything that touches the clock, randomness, the OS environment or the
//// logger goes through this module so the rest of the code base stays pure
//// and easy to test.

/// An Erlang process identifier. Only ever produced by the runtime; Gleam
/// code can pass it around and print it but cannot construct one.
pub type Pid

/// Log severity understood by the OTP `logger` module. Constructors map
/// one-to-one to the logger's level atoms. There is deliberately no `Error`
/// constructor because it would shadow the prelude's `Result` constructor.
pub type LogLevel {
  Debug
  Info
  Warning
  Critical
}

/// Milliseconds since the Unix epoch, read from the system (wall) clock.
/// Not monotonic: do not use it to measure durations.
@external(erlang, "bookshelf_ffi", "now_millis")
pub fn now_millis() -> Int

/// The current UTC date as a number of days since 1970-01-01.
@external(erlang, "bookshelf_ffi", "today")
pub fn today() -> Int

/// Generate a random lowercase hex identifier of `bytes * 2` characters
/// using `crypto:strong_rand_bytes/1`.
@external(erlang, "bookshelf_ffi", "random_id")
pub fn random_id(bytes: Int) -> String

/// Read an environment variable. Returns `Error(Nil)` when it is unset; an
/// empty-but-set variable is `Ok("")`.
@external(erlang, "bookshelf_ffi", "get_env")
pub fn get_env(name: String) -> Result(String, Nil)

/// Render a day number (days since the epoch) as `YYYY-MM-DD`.
@external(erlang, "bookshelf_ffi", "format_iso_date")
pub fn format_iso_date(day: Int) -> String

/// Parse a strict `YYYY-MM-DD` date into days since the epoch. Calendar
/// validity is checked, so `2023-02-29` is rejected.
@external(erlang, "bookshelf_ffi", "parse_iso_date")
pub fn parse_iso_date(text: String) -> Result(Int, Nil)

/// The pid of the calling process.
@external(erlang, "bookshelf_ffi", "self_pid")
pub fn self() -> Pid

@external(erlang, "bookshelf_ffi", "log_line")
fn do_log(level: LogLevel, message: String) -> Nil

/// Write a single line to the OTP logger at the given level.
pub fn log(level: LogLevel, message: String) -> Nil {
  do_log(level, message)
}

/// Convenience wrapper for `log(Info, message)`.
pub fn info(message: String) -> Nil {
  do_log(Info, message)
}

/// Convenience wrapper for `log(Warning, message)`.
pub fn warn(message: String) -> Nil {
  do_log(Warning, message)
}

/// Prefix a freshly generated random id with a short, human readable tag,
/// e.g. `new_id("bk")` gives `"bk_3f9a01c2e4d5b6a7"`.
pub fn new_id(prefix: String) -> String {
  prefix <> "_" <> random_id(8)
}
