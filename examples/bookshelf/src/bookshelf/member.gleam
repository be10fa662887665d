//// Library members: who they are, what tier they pay for and whether they
//// are currently allowed to borrow.

import bookshelf/config
import bookshelf/text
import gleam/int
import gleam/list
import gleam/option.{type Option, None, Some}
import gleam/string

/// Identifier printed on the member's card, e.g. `"mb_04c1e9a2b7f3d815"`.
pub type MemberId =
  String

/// An email address that has passed basic syntactic checks.
pub opaque type Email {
  Email(address: String)
}

/// Membership tier. Determines loan limits and whether fines apply.
pub type Tier {
  Standard
  Premium
  /// Library staff never pay fines but have the standard limit.
  Staff
}

/// Whether a member may currently borrow.
pub type Status {
  Active
  Suspended(reason: String, until: Option(Int))
  Expired(on: Int)
}

pub type Member {
  Member(
    id: MemberId,
    name: String,
    email: Email,
    tier: Tier,
    status: Status,
    joined_on: Int,
    expires_on: Int,
    outstanding_fines_cents: Int,
  )
}

/// Reasons a member may not borrow right now.
pub type BorrowBlock {
  AccountSuspended(reason: String)
  MembershipExpired(on: Int)
  UnpaidFines(cents: Int)
}

/// Fines above this amount block new loans until paid.
pub const fine_block_threshold_cents = 1000

/// Parse an email address. This is deliberately lenient: one `@`, a
/// non-empty local part and a domain containing a dot. Real verification
/// happens by sending a confirmation mail, not by regex.
pub fn parse_email(raw: String) -> Result(Email, String) {
  let trimmed = string.trim(raw)
  case string.split(trimmed, "@") {
    [local, domain] if local != "" ->
      case string.contains(domain, "."), string.starts_with(domain, ".") {
        True, False -> Ok(Email(string.lowercase(trimmed)))
        _, _ -> Error("email domain looks invalid: " <> domain)
      }
    _ -> Error("not an email address: " <> trimmed)
  }
}

/// The normalised (lowercase) address.
pub fn email_to_string(email: Email) -> String {
  email.address
}

/// Register a new member. Membership runs for one year from `today`.
pub fn new(
  id: MemberId,
  name name: String,
  email email: Email,
  tier tier: Tier,
  today today: Int,
) -> Member {
  Member(
    id: id,
    name: text.collapse_spaces(name),
    email: email,
    tier: tier,
    status: Active,
    joined_on: today,
    expires_on: today + 365,
    outstanding_fines_cents: 0,
  )
}

/// How many books this member may hold at the same time.
pub fn loan_limit(member: Member) -> Int {
  case member.tier {
    Premium -> config.max_loans_premium
    Standard | Staff -> config.max_loans
  }
}

/// Decide whether the member may take out a new loan on `today`. Expiry is
/// checked against the date rather than the stored status so a membership
/// that lapsed overnight is caught before the nightly job updates it.
pub fn can_borrow(member: Member, today: Int) -> Result(Nil, BorrowBlock) {
  case member.status {
    Suspended(reason, Some(until)) if until > today ->
      Error(AccountSuspended(reason))
    Suspended(reason, None) -> Error(AccountSuspended(reason))
    Expired(on) -> Error(MembershipExpired(on))
    _ if member.expires_on < today -> Error(MembershipExpired(member.expires_on))
    _ if member.outstanding_fines_cents > fine_block_threshold_cents ->
      Error(UnpaidFines(member.outstanding_fines_cents))
    _ -> Ok(Nil)
  }
}

/// Suspend a member, optionally until a given day.
pub fn suspend(member: Member, reason: String, until: Option(Int)) -> Member {
  Member(..member, status: Suspended(reason: reason, until: until))
}

/// Lift a suspension. Expired memberships stay expired.
pub fn reinstate(member: Member) -> Member {
  case member.status {
    Suspended(..) -> Member(..member, status: Active)
    _ -> member
  }
}

/// Extend the membership by `days`, counted from the later of today and the
/// current expiry date so renewing early does not lose any time.
pub fn renew(member: Member, today: Int, days: Int) -> Member {
  let from = int.max(today, member.expires_on)
  let status = case member.status {
    Expired(_) -> Active
    other -> other
  }
  Member(..member, expires_on: from + days, status: status)
}

/// Add (positive) or pay off (negative) fines. The balance never goes
/// below zero; overpayment is simply ignored.
pub fn adjust_fines(member: Member, delta_cents: Int) -> Member {
  let balance = int.max(0, member.outstanding_fines_cents + delta_cents)
  Member(..member, outstanding_fines_cents: balance)
}

/// Staff members are exempt from fines.
pub fn pays_fines(member: Member) -> Bool {
  member.tier != Staff
}

/// "Ursula K. Le Guin" -> "U. K. Le Guin": initials for all but the last
/// word, used on printed receipts where space is tight.
pub fn short_name(member: Member) -> String {
  let parts = string.split(member.name, " ") |> list.filter(fn(p) { p != "" })
  case list.reverse(parts) {
    [] -> member.id
    [only] -> only
    [last, ..rest] ->
      rest
      |> list.reverse
      |> list.map(fn(p) { string.slice(p, 0, 1) <> "." })
      |> list.append([last])
      |> string.join(" ")
  }
}

pub fn tier_to_string(tier: Tier) -> String {
  case tier {
    Standard -> "standard"
    Premium -> "premium"
    Staff -> "staff"
  }
}

pub fn tier_from_string(raw: String) -> Result(Tier, Nil) {
  case string.lowercase(raw) {
    "standard" -> Ok(Standard)
    "premium" -> Ok(Premium)
    "staff" -> Ok(Staff)
    _ -> Error(Nil)
  }
}

/// Human-readable explanation of why borrowing is blocked.
pub fn describe_block(block: BorrowBlock) -> String {
  case block {
    AccountSuspended(reason) -> "account suspended: " <> reason
    MembershipExpired(_) -> "membership has expired"
    UnpaidFines(cents) ->
      "unpaid fines of " <> format_cents(cents) <> " must be settled first"
  }
}

/// Format a cent amount as `"$12.05"`.
pub fn format_cents(cents: Int) -> String {
  let sign = case cents < 0 {
    True -> "-"
    False -> ""
  }
  let abs = int.absolute_value(cents)
  let fraction = int.to_string(abs % 100) |> string.pad_start(2, "0")
  sign <> "$" <> int.to_string(abs / 100) <> "." <> fraction
}
