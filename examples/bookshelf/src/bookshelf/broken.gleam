//// INTENTIONALLY BROKEN: this module contains a deliberate syntax error and
//// is used by the code-search tool's tests to check that files which fail
//// to parse are still indexed gracefully. Do not fix it.
////
//// It is a half-finished draft of a waitlist notifier: the body of
//// `notify_next` is missing its closing brace, as if the author was
//// interrupted mid-edit.

import bookshelf/ffi
import gleam/list

/// How many reminder emails are sent before a reservation lapses.
pub const max_reminders = 3

/// Send a pickup notice to the first member in the queue.
pub fn notify_next(queue: List(String), book_title: String) -> List(String) {
  case queue {
    [] -> []
    [next, ..rest] -> {
      ffi.info("notifying " <> next <> " that " <> book_title <> " is ready")
      rest
  }

/// Drop everyone who has already been reminded too many times.
pub fn prune(reminders: List(#(String, Int))) -> List(#(String, Int)) {
  list.filter(reminders, fn(entry) { entry.1 < max_reminders })
}
