//// Loans: creating them, renewing them, returning books, and working out
//// the overdue fine.
////
//// Dates are plain `Int` day numbers (days since 1970-01-01, UTC). The
//// library is closed on some weekdays; due dates never fall on a closed day
//// and closed days do not count towards a fine.

import bookshelf/book.{type Book, type BookId}
import bookshelf/config
import bookshelf/member.{type Member, type MemberId}
import gleam/int
import gleam/list
import gleam/option.{type Option, None, Some}
import gleam/string

/// Identifier of a single loan.
pub type LoanId =
  String

/// A day number: days since 1970-01-01.
pub type Day =
  Int

pub type Loan {
  Loan(
    id: LoanId,
    book_id: BookId,
    member_id: MemberId,
    borrowed_on: Day,
    due_on: Day,
    returned_on: Option(Day),
    renewals: Int,
    damaged: Bool,
  )
}

/// Everything that can go wrong when borrowing, renewing or returning.
pub type LoanError {
  NotFound(id: String)
  AlreadyBorrowed(book_id: BookId, by: MemberId)
  LimitReached(max: Int)
  NotLendable(book_id: BookId)
  RenewalLimit(max: Int)
  RenewalBlockedByReservation(book_id: BookId)
  ReturnedAlready(loan_id: LoanId, on: Day)
  MemberBlocked(reason: String)
  NoCopiesLeft(book_id: BookId, waitlist: Int)
}

/// One line of a fine breakdown, so receipts can explain the total.
pub type FineLine {
  FineLine(label: String, cents: Int)
}

/// The result of `calculate_fine`.
pub type Fine {
  Fine(total_cents: Int, chargeable_days: Int, lines: List(FineLine))
}

/// Create a loan starting on `today`, with the due date adjusted for the
/// book's format and the library's closed days.
pub fn start(
  id: LoanId,
  item: Book,
  borrower: Member,
  today: Day,
  closed_weekdays: List(Int),
) -> Loan {
  let days = book.loan_days(item.format, config.loan_period_days)
  Loan(
    id: id,
    book_id: item.id,
    member_id: borrower.id,
    borrowed_on: today,
    due_on: next_open_day(today + days, closed_weekdays),
    returned_on: None,
    renewals: 0,
    damaged: False,
  )
}

/// ISO weekday of a day number: 1 = Monday … 7 = Sunday.
/// 1970-01-01 was a Thursday.
pub fn weekday(day: Day) -> Int {
  { day + 3 } % 7 + 1
}

/// The first day on or after `day` on which the library is open. If every
/// weekday is marked closed (a configuration mistake) `day` is returned
/// unchanged instead of looping forever.
pub fn next_open_day(day: Day, closed_weekdays: List(Int)) -> Day {
  case list.length(closed_weekdays) >= 7 {
    True -> day
    False -> skip_closed(day, closed_weekdays)
  }
}

fn skip_closed(day: Day, closed: List(Int)) -> Day {
  case list.contains(closed, weekday(day)) {
    True -> skip_closed(day + 1, closed)
    False -> day
  }
}

/// Number of open days in the half-open range `(from, to]`.
pub fn open_days_between(from: Day, to: Day, closed_weekdays: List(Int)) -> Int {
  case to <= from {
    True -> 0
    False ->
      list.range(from + 1, to)
      |> list.filter(fn(d) { !list.contains(closed_weekdays, weekday(d)) })
      |> list.length
  }
}

/// `True` while the book has not come back.
pub fn is_active(loan: Loan) -> Bool {
  option.is_none(loan.returned_on)
}

/// Days past the due date as of `today`, or `0` if not overdue. For
/// returned loans the return date is used instead of `today`.
pub fn days_overdue(loan: Loan, today: Day) -> Int {
  let end = option.unwrap(loan.returned_on, today)
  int.max(0, end - loan.due_on)
}

/// Extend an active loan by another loan period.
///
/// Renewal is refused when the loan has already been renewed
/// `config.max_renewals` times, when someone else is waiting for the book,
/// or when the loan is more than a week overdue (at that point the book
/// should come back and the fine be settled first).
pub fn renew(
  loan: Loan,
  today: Day,
  has_reservations: Bool,
  closed_weekdays: List(Int),
) -> Result(Loan, LoanError) {
  case loan.returned_on {
    Some(on) -> Error(ReturnedAlready(loan.id, on))
    None if loan.renewals >= config.max_renewals ->
      Error(RenewalLimit(config.max_renewals))
    None if has_reservations -> Error(RenewalBlockedByReservation(loan.book_id))
    None ->
      case days_overdue(loan, today) > 7 {
        True -> Error(MemberBlocked("loan is more than a week overdue"))
        False -> {
          let base = int.max(today, loan.due_on)
          let due = next_open_day(base + config.loan_period_days, closed_weekdays)
          Ok(Loan(..loan, due_on: due, renewals: loan.renewals + 1))
        }
      }
  }
}

/// Mark a loan as returned on `today`.
pub fn return_book(loan: Loan, today: Day, damaged: Bool) -> Result(Loan, LoanError) {
  case loan.returned_on {
    Some(on) -> Error(ReturnedAlready(loan_id: loan.id, on: on))
    None -> Ok(Loan(..loan, returned_on: Some(today), damaged: damaged))
  }
}

/// Work out the fine owed on a loan as of `today`.
///
/// Rules, applied in this order:
///
/// 1. Staff never pay fines, and digital formats (ebooks, audiobooks) expire
///    automatically so they cannot be overdue.
/// 2. No fine accrues during the first `config.grace_days` days after the
///    due date. Once the grace period is exceeded the fine counts from the
///    due date, not from the end of the grace period.
/// 3. Days on which the library is closed are not charged.
/// 4. Children's books are charged at half the daily rate (rounded up).
///    Reference-only books that somehow went out are charged double.
/// 5. Premium members get 25% off the overdue portion.
/// 6. The overdue portion is capped at `config.fine_cap_cents`.
/// 7. A damaged return adds a flat handling fee on top, which is not
///    subject to the cap or the premium discount.
///
/// Every adjustment is recorded as a `FineLine` so the receipt can explain
/// how the total was reached.
pub fn calculate_fine(
  loan: Loan,
  item: Book,
  borrower: Member,
  today: Day,
  closed_weekdays: List(Int),
) -> Fine {
  let no_fine = Fine(total_cents: 0, chargeable_days: 0, lines: [])
  let is_digital = case item.format {
    book.Ebook(_) | book.Audiobook(_) -> True
    book.Hardcover | book.Paperback -> False
  }
  let end = option.unwrap(loan.returned_on, today)
  let calendar_days_late = int.max(0, end - loan.due_on)
  case member.pays_fines(borrower), is_digital {
    False, _ -> no_fine
    _, True -> no_fine
    True, False if calendar_days_late <= config.grace_days -> no_fine
    True, False -> {
      let chargeable = open_days_between(loan.due_on, end, closed_weekdays)
      let daily_rate = case item.genre, item.reference_only {
        _, True -> config.daily_fine_cents * 2
        book.Children, False -> { config.daily_fine_cents + 1 } / 2
        _, False -> config.daily_fine_cents
      }
      let base = chargeable * daily_rate
      let lines = [
        FineLine(
          label: int.to_string(chargeable)
            <> " open day(s) late at "
            <> member.format_cents(daily_rate)
            <> "/day",
          cents: base,
        ),
      ]
      let closed_skipped = calendar_days_late - chargeable
      let lines = case closed_skipped > 0 {
        True ->
          list.append(lines, [
            FineLine(
              label: int.to_string(closed_skipped)
                <> " closed day(s) not charged",
              cents: 0,
            ),
          ])
        False -> lines
      }
      let #(after_discount, lines) = case borrower.tier {
        member.Premium -> {
          let discount = base / 4
          #(
            base - discount,
            list.append(lines, [
              FineLine(label: "premium discount (25%)", cents: 0 - discount),
            ]),
          )
        }
        member.Standard | member.Staff -> #(base, lines)
      }
      let #(capped, lines) = case after_discount > config.fine_cap_cents {
        True -> #(
          config.fine_cap_cents,
          list.append(lines, [
            FineLine(
              label: "capped at " <> member.format_cents(config.fine_cap_cents),
              cents: config.fine_cap_cents - after_discount,
            ),
          ]),
        )
        False -> #(after_discount, lines)
      }
      let #(total, lines) = case loan.damaged {
        True -> #(
          capped + damage_fee_cents,
          list.append(lines, [
            FineLine(label: "damage handling fee", cents: damage_fee_cents),
          ]),
        )
        False -> #(capped, lines)
      }
      Fine(total_cents: total, chargeable_days: chargeable, lines: lines)
    }
  }
}

const damage_fee_cents = 500

/// Render a fine breakdown as plain text, one line per entry followed by
/// the total. Used on printed receipts and in confirmation emails.
pub fn fine_receipt(fine: Fine) -> String {
  let body =
    fine.lines
    |> list.map(fn(line) {
      string.pad_end(line.label, 40, ".") <> " " <> member.format_cents(line.cents)
    })
  list.append(body, [
    string.repeat("-", 48),
    string.pad_end("Total", 40, " ") <> " " <> member.format_cents(fine.total_cents),
  ])
  |> string.join("\n")
}

/// Describe a `LoanError` in a sentence for API clients.
pub fn describe_error(error: LoanError) -> String {
  case error {
    NotFound(id) -> "no loan, book or member with id " <> id
    AlreadyBorrowed(book_id, by) ->
      "book " <> book_id <> " is already on loan to " <> by
    LimitReached(max) ->
      "loan limit of " <> int.to_string(max) <> " books reached"
    NotLendable(book_id) -> "book " <> book_id <> " is reference only"
    RenewalLimit(max) ->
      "loan has already been renewed " <> int.to_string(max) <> " times"
    RenewalBlockedByReservation(book_id) ->
      "another member has reserved " <> book_id
    ReturnedAlready(loan_id, _) -> "loan " <> loan_id <> " was already returned"
    MemberBlocked(reason) -> reason
    NoCopiesLeft(book_id, waitlist) ->
      "no copies of "
      <> book_id
      <> " left; "
      <> int.to_string(waitlist)
      <> " member(s) waiting"
  }
}

/// Loans of `member_id` that are still active.
pub fn active_for_member(loans: List(Loan), member_id: MemberId) -> List(Loan) {
  list.filter(loans, fn(l) { l.member_id == member_id && is_active(l) })
}

/// Active loans whose due date is before `today`, most overdue first.
pub fn overdue(loans: List(Loan), today: Day) -> List(Loan) {
  loans
  |> list.filter(fn(l) { is_active(l) && l.due_on < today })
  |> list.sort(fn(a, b) { int.compare(a.due_on, b.due_on) })
}
