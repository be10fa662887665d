//// Service-wide constants and runtime configuration.
////
//// Constants here are the defaults the library policy is built around. The
//// `Config` record is assembled once at start-up from environment variables
//// (see `from_env`) and then passed down explicitly; nothing reads the
//// environment after boot.

import bookshelf/ffi
import gleam/int
import gleam/list
import gleam/result
import gleam/string

/// Maximum number of books a standard member may hold at once.
pub const max_loans = 5

/// Maximum number of books a premium member may hold at once.
pub const max_loans_premium: Int = 12

/// Default loan period, in days.
pub const loan_period_days: Int = 21

/// How many times a single loan can be renewed before the book must come back.
pub const max_renewals = 2

/// Daily overdue fine, in cents.
pub const daily_fine_cents: Int = 25

/// Fines are never allowed to exceed this amount per loan, in cents.
pub const fine_cap_cents: Int = 1500

/// Days after the due date during which no fine accrues.
pub const grace_days = 2

/// Page size used by list endpoints when the client does not send `limit`.
pub const default_page_size: Int = 20

/// Hard upper bound on `limit` so a client cannot ask for the whole catalog.
pub const max_page_size: Int = 100

const default_port = 8040

const default_host = "127.0.0.1"

const env_prefix = "BOOKSHELF_"

/// Runtime configuration, built once at start-up.
pub type Config {
  Config(
    host: String,
    port: Int,
    log_requests: Bool,
    max_body_bytes: Int,
    library_name: String,
    closed_weekdays: List(Int),
  )
}

/// Why the environment could not be turned into a `Config`.
pub type ConfigError {
  InvalidInteger(variable: String, value: String)
  InvalidBool(variable: String, value: String)
  OutOfRange(variable: String, value: Int, min: Int, max: Int)
}

/// The configuration used when no environment variables are set. Useful in
/// tests, where reading the real environment would make results depend on
/// the machine running them.
pub fn default() -> Config {
  Config(
    host: default_host,
    port: default_port,
    log_requests: True,
    max_body_bytes: 64 * 1024,
    library_name: "Bookshelf Public Library",
    closed_weekdays: [7],
  )
}

/// Build a `Config` from `BOOKSHELF_*` environment variables, falling back to
/// `default()` for anything unset. A variable that is set but malformed is an
/// error rather than silently ignored: a typo in `BOOKSHELF_PORT` should stop
/// the service from booting on an unexpected port.
pub fn from_env() -> Result(Config, ConfigError) {
  let base = default()
  use port <- result.try(int_var("PORT", base.port, min: 1, max: 65_535))
  use max_body <- result.try(int_var(
    "MAX_BODY_BYTES",
    base.max_body_bytes,
    min: 1024,
    max: 10_485_760,
  ))
  use log_requests <- result.try(bool_var("LOG_REQUESTS", base.log_requests))
  let host = string_var("HOST", base.host)
  let name = string_var("LIBRARY_NAME", base.library_name)
  let closed =
    string_var("CLOSED_WEEKDAYS", "")
    |> parse_weekdays
  Ok(
    Config(
      ..base,
      host: host,
      port: port,
      log_requests: log_requests,
      max_body_bytes: max_body,
      library_name: name,
      closed_weekdays: case closed {
        [] -> base.closed_weekdays
        days -> days
      },
    ),
  )
}

/// Turn a `ConfigError` into a message suitable for printing before exit.
pub fn describe_error(error: ConfigError) -> String {
  case error {
    InvalidInteger(variable, value) ->
      env_prefix <> variable <> " must be an integer, got " <> string.inspect(value)
    InvalidBool(variable, value) ->
      env_prefix
      <> variable
      <> " must be one of true/false/1/0/yes/no, got "
      <> string.inspect(value)
    OutOfRange(variable, value, min, max) ->
      env_prefix
      <> variable
      <> " = "
      <> int.to_string(value)
      <> " is outside "
      <> int.to_string(min)
      <> ".."
      <> int.to_string(max)
  }
}

fn lookup(name: String) -> Result(String, Nil) {
  ffi.get_env(env_prefix <> name)
  |> result.map(string.trim)
}

fn string_var(name: String, fallback: String) -> String {
  case lookup(name) {
    Ok("") | Error(Nil) -> fallback
    Ok(value) -> value
  }
}

fn int_var(
  name: String,
  fallback: Int,
  min min: Int,
  max max: Int,
) -> Result(Int, ConfigError) {
  case lookup(name) {
    Error(Nil) | Ok("") -> Ok(fallback)
    Ok(raw) ->
      case int.parse(string.replace(raw, "_", "")) {
        Error(Nil) -> Error(InvalidInteger(name, raw))
        Ok(n) if n < min || n > max -> Error(OutOfRange(name, n, min, max))
        Ok(n) -> Ok(n)
      }
  }
}

fn bool_var(name: String, fallback: Bool) -> Result(Bool, ConfigError) {
  case lookup(name) |> result.map(string.lowercase) {
    Error(Nil) | Ok("") -> Ok(fallback)
    Ok("true") | Ok("1") | Ok("yes") | Ok("on") -> Ok(True)
    Ok("false") | Ok("0") | Ok("no") | Ok("off") -> Ok(False)
    Ok(other) -> Error(InvalidBool(name, other))
  }
}

/// Parse a comma separated list of ISO weekdays (1 = Monday .. 7 = Sunday).
/// Invalid entries are dropped and duplicates removed, so `"7, 6,x,7"`
/// becomes `[6, 7]`.
pub fn parse_weekdays(raw: String) -> List(Int) {
  raw
  |> string.split(",")
  |> list.map(string.trim)
  |> list.filter_map(int.parse)
  |> list.filter(fn(day) { day >= 1 && day <= 7 })
  |> list.unique
  |> list.sort(int.compare)
}

/// The loan limit for a member, depending on whether they pay for premium.
pub fn loan_limit(premium premium: Bool) -> Int {
  case premium {
    True -> max_loans_premium
    False -> max_loans
  }
}

/// Clamp a client-supplied page size into `1..max_page_size`, using
/// `default_page_size` when nothing was supplied.
pub fn page_size(requested: Result(Int, Nil)) -> Int {
  case requested {
    Error(Nil) -> default_page_size
    Ok(n) -> int.clamp(n, min: 1, max: max_page_size)
  }
}
