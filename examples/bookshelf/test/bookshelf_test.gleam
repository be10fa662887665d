import bookshelf/book
import bookshelf/catalog
import bookshelf/config
import bookshelf/loan
import bookshelf/member
import bookshelf/text
import gleam/list
import gleam/option.{None, Some}
import gleeunit
import gleeunit/should

pub fn main() -> Nil {
  gleeunit.main()
}

// 2024-01-01 was a Monday; day numbers are days since 1970-01-01.
const monday = 19_723

fn sample_book() -> book.Book {
  book.Book(
    ..book.new("bk_1", "The Dispossessed", ["Ursula K. Le Guin"], 1974),
    genre: book.ScienceFiction,
    copies: 2,
  )
}

fn sample_member(tier: member.Tier) -> member.Member {
  let assert Ok(email) = member.parse_email("shevek@anarres.example")
  member.new("mb_1", name: "Shevek", email: email, tier: tier, today: monday)
}

pub fn weekday_test() {
  loan.weekday(0) |> should.equal(4)
  loan.weekday(monday) |> should.equal(1)
  loan.weekday(monday + 6) |> should.equal(7)
}

pub fn due_date_skips_closed_days_test() {
  // 21 days after a Monday is a Monday; close Mondays and it moves to Tuesday.
  let item = sample_book()
  let borrower = sample_member(member.Standard)
  let l = loan.start("ln_1", item, borrower, monday, [1])
  l.due_on |> should.equal(monday + 22)
}

pub fn no_fine_within_grace_period_test() {
  let item = sample_book()
  let borrower = sample_member(member.Standard)
  let l = loan.start("ln_1", item, borrower, monday, [])
  let fine =
    loan.calculate_fine(l, item, borrower, l.due_on + config.grace_days, [])
  fine.total_cents |> should.equal(0)
}

pub fn fine_is_capped_test() {
  let item = sample_book()
  let borrower = sample_member(member.Standard)
  let l = loan.start("ln_1", item, borrower, monday, [])
  let fine = loan.calculate_fine(l, item, borrower, l.due_on + 365, [])
  fine.total_cents |> should.equal(config.fine_cap_cents)
}

pub fn staff_pay_no_fines_test() {
  let item = sample_book()
  let borrower = sample_member(member.Staff)
  let l = loan.start("ln_1", item, borrower, monday, [])
  loan.calculate_fine(l, item, borrower, l.due_on + 30, []).total_cents
  |> should.equal(0)
}

pub fn renewal_limit_test() {
  let item = sample_book()
  let borrower = sample_member(member.Standard)
  let l = loan.start("ln_1", item, borrower, monday, [])
  let assert Ok(l) = loan.renew(l, monday + 1, False, [])
  let assert Ok(l) = loan.renew(l, monday + 2, False, [])
  loan.renew(l, monday + 3, False, [])
  |> should.equal(Error(loan.RenewalLimit(config.max_renewals)))
}

pub fn catalog_search_tolerates_typos_test() {
  let assert Ok(cat) = catalog.insert(catalog.new(), sample_book())
  let query = catalog.Query(..catalog.everything(), text: Some("dispossesed"))
  catalog.search(cat, query)
  |> list.map(fn(hit) { hit.book.id })
  |> should.equal(["bk_1"])
}

pub fn catalog_duplicate_id_test() {
  let assert Ok(cat) = catalog.insert(catalog.new(), sample_book())
  catalog.insert(cat, sample_book())
  |> should.equal(Error(catalog.DuplicateId("bk_1")))
}

pub fn paginate_past_end_test() {
  let page = catalog.paginate([1, 2, 3], 10, None)
  page.items |> should.equal([])
  page.total |> should.equal(3)
}

pub fn slugify_test() {
  text.slugify("  Les Misérables: Tome I ") |> should.equal("les-miserables-tome-i")
}

pub fn title_case_test() {
  text.title_case("the lord of the rings")
  |> should.equal("The Lord of the Rings")
}

pub fn levenshtein_test() {
  text.levenshtein("kitten", "sitting") |> should.equal(3)
  text.levenshtein("", "abc") |> should.equal(3)
  text.levenshtein("same", "same") |> should.equal(0)
}

pub fn word_wrap_test() {
  text.word_wrap("the quick brown fox jumps", 10)
  |> should.equal(["the quick", "brown fox", "jumps"])
}

pub fn member_blocked_by_fines_test() {
  sample_member(member.Standard)
  |> member.adjust_fines(2000)
  |> member.can_borrow(monday)
  |> should.equal(Error(member.UnpaidFines(2000)))
}
