//// The lending desk: a single actor that owns the catalog, the member
//// register, all loans and the reservation queues.
////
//// Keeping every piece of mutable state in one process means borrow and
//// return are naturally serialised: two members can never walk away with
//// the last copy of the same book. Callers use the typed client functions
//// at the bottom of this module rather than sending messages directly.

import bookshelf/book.{type Book, type BookId}
import bookshelf/catalog.{type Catalog, type Hit, type Query}
import bookshelf/config.{type Config}
import bookshelf/ffi
import bookshelf/json_codec.{type BookDraft, type MemberDraft}
import bookshelf/loan.{type Fine, type Loan, type LoanError, type LoanId}
import bookshelf/member.{type Member, type MemberId}
import gleam/dict.{type Dict}
import gleam/erlang/process.{type Subject}
import gleam/int
import gleam/list
import gleam/otp/actor
import gleam/result
import gleam/string

/// Milliseconds a client waits for the desk before giving up.
pub const call_timeout = 5000

/// Everything the desk knows.
pub type State {
  State(
    config: Config,
    catalog: Catalog,
    members: Dict(MemberId, Member),
    loans: Dict(LoanId, Loan),
    reservations: Dict(BookId, List(MemberId)),
    today: fn() -> Int,
  )
}

/// Shorthand for the reply channel carried by most messages.
pub type Reply(a) =
  Subject(Result(a, LoanError))

/// Messages understood by the desk.
pub type Message {
  Borrow(book_id: BookId, member_id: MemberId, reply: Reply(Loan))
  Return(loan_id: LoanId, damaged: Bool, reply: Reply(#(Loan, Fine)))
  Renew(loan_id: LoanId, reply: Reply(Loan))
  Reserve(book_id: BookId, member_id: MemberId, reply: Reply(Int))
  CancelReservation(book_id: BookId, member_id: MemberId, reply: Reply(Nil))
  AddBook(draft: BookDraft, reply: Subject(Result(Book, String)))
  RegisterMember(draft: MemberDraft, reply: Subject(Member))
  PayFine(member_id: MemberId, cents: Int, reply: Reply(Member))
  GetBook(book_id: BookId, reply: Subject(Result(#(Book, book.Availability), Nil)))
  GetMember(member_id: MemberId, reply: Subject(Result(Member, Nil)))
  Search(query: Query, reply: Subject(List(#(Hit, book.Availability))))
  LoansFor(member_id: MemberId, reply: Subject(List(Loan)))
  Snapshot(reply: Subject(State))
  Shutdown
}

/// Build an empty desk state. `today` is injected so tests can control the
/// date; production passes `ffi.today`.
pub fn initial_state(config: Config, today: fn() -> Int) -> State {
  State(
    config: config,
    catalog: catalog.new(),
    members: dict.new(),
    loans: dict.new(),
    reservations: dict.new(),
    today: today,
  )
}

/// Start the desk actor.
pub fn start(
  config: Config,
) -> Result(Subject(Message), actor.StartError) {
  actor.start(initial_state(config, ffi.today), handle_message)
}

/// Handle a single message. Every branch replies exactly once (except
/// `Shutdown`, which has no reply channel) and returns the next state.
///
/// The state is only changed once every check for the request has passed,
/// so a failed borrow or renewal leaves the desk untouched. The heavier
/// requests are delegated to `check_borrow`, `close_loan` and `insert_book`,
/// which are pure and return either an error or the new values to store;
/// `respond` then sends the reply and applies the change.
pub fn handle_message(message: Message, state: State) -> actor.Next(Message, State) {
  let today = state.today()
  let closed = state.config.closed_weekdays
  case message {
    Borrow(book_id, member_id, reply) -> {
      let outcome =
        check_borrow(state, book_id, member_id, today)
        |> result.map(fn(pair) {
          loan.start(ffi.new_id("ln"), pair.0, pair.1, today, closed)
        })
      use new_loan <- respond(state, reply, outcome, fn(l) { l })
      State(
        ..state,
        loans: dict.insert(state.loans, new_loan.id, new_loan),
        reservations: drop_from_queue(state.reservations, book_id, member_id),
      )
    }

    Return(loan_id, damaged, reply) -> {
      let outcome = close_loan(state, loan_id, damaged, today)
      use closed_loan <- respond(state, reply, outcome, fn(t) { #(t.0, t.1) })
      let #(returned, _fine, borrower) = closed_loan
      State(
        ..state,
        loans: dict.insert(state.loans, returned.id, returned),
        members: dict.insert(state.members, borrower.id, borrower),
      )
    }

    Renew(loan_id, reply) -> {
      let outcome = {
        use existing <- result.try(find_loan(state, loan_id))
        let waiting = queue_for(state, existing.book_id) != []
        loan.renew(existing, today, waiting, closed)
      }
      use renewed <- respond(state, reply, outcome, fn(l) { l })
      State(..state, loans: dict.insert(state.loans, renewed.id, renewed))
    }

    Reserve(book_id, member_id, reply) -> {
      let outcome = {
        use _ <- result.try(find_book(state, book_id))
        use _ <- result.try(find_member(state, member_id))
        Ok(enqueue(queue_for(state, book_id), member_id))
      }
      use queued <- respond(state, reply, outcome, fn(pair) { pair.1 })
      State(
        ..state,
        reservations: dict.insert(state.reservations, book_id, queued.0),
      )
    }

    CancelReservation(book_id, member_id, reply) -> {
      use _ <- respond(state, reply, Ok(Nil), fn(x) { x })
      let reservations = drop_from_queue(state.reservations, book_id, member_id)
      State(..state, reservations: reservations)
    }

    AddBook(draft, reply) -> {
      let outcome = insert_book(state, draft, today)
      use inserted <- respond(state, reply, outcome, fn(pair) { pair.0 })
      State(..state, catalog: inserted.1)
    }

    RegisterMember(draft, reply) -> {
      let new_member = member_from_draft(draft, today)
      process.send(reply, new_member)
      let members = dict.insert(state.members, new_member.id, new_member)
      actor.continue(State(..state, members: members))
    }

    PayFine(member_id, cents, reply) -> {
      let outcome =
        find_member(state, member_id)
        |> result.map(member.adjust_fines(_, 0 - int.absolute_value(cents)))
      use updated <- respond(state, reply, outcome, fn(m) { m })
      State(..state, members: dict.insert(state.members, member_id, updated))
    }

    GetBook(book_id, reply) -> {
      find_book(state, book_id)
      |> result.map(fn(item) { #(item, availability(state, item)) })
      |> result.replace_error(Nil)
      |> process.send(reply, _)
      actor.continue(state)
    }

    GetMember(member_id, reply) -> {
      process.send(reply, dict.get(state.members, member_id))
      actor.continue(state)
    }

    Search(query, reply) -> {
      catalog.search(state.catalog, query)
      |> list.map(fn(hit) { #(hit, availability(state, hit.book)) })
      |> process.send(reply, _)
      actor.continue(state)
    }

    LoansFor(member_id, reply) -> {
      state.loans
      |> dict.values
      |> list.filter(fn(l) { l.member_id == member_id })
      |> list.sort(fn(a, b) { int.compare(b.borrowed_on, a.borrowed_on) })
      |> process.send(reply, _)
      actor.continue(state)
    }

    Snapshot(reply) -> {
      process.send(reply, state)
      actor.continue(state)
    }

    Shutdown -> actor.Stop(process.Normal)
  }
}

/// Reply to a request and move to the next state.
///
/// On `Error` the error is sent back and the state is left untouched. On
/// `Ok` the client receives `answer(value)` and the actor continues with
/// `apply(value)`. Designed for `use`, so handlers read top to bottom:
///
/// ```gleam
/// use renewed <- respond(state, reply, outcome, fn(l) { l })
/// State(..state, loans: dict.insert(state.loans, renewed.id, renewed))
/// ```
fn respond(
  state: State,
  reply: Subject(Result(answer, error)),
  outcome: Result(value, error),
  answer: fn(value) -> answer,
  apply: fn(value) -> State,
) -> actor.Next(Message, State) {
  case outcome {
    Error(e) -> {
      process.send(reply, Error(e))
      actor.continue(state)
    }
    Ok(value) -> {
      process.send(reply, Ok(answer(value)))
      actor.continue(apply(value))
    }
  }
}

/// Every check a borrow must pass, in the order a librarian would apply
/// them: the book and member exist, the member is in good standing and
/// under their limit, they do not already hold this title, and a copy is
/// free once reservations ahead of them are accounted for.
fn check_borrow(
  state: State,
  book_id: BookId,
  member_id: MemberId,
  today: Int,
) -> Result(#(Book, Member), LoanError) {
  use item <- result.try(find_book(state, book_id))
  use borrower <- result.try(find_member(state, member_id))
  use _ <- result.try(
    member.can_borrow(borrower, today)
    |> result.map_error(fn(b) { loan.MemberBlocked(member.describe_block(b)) }),
  )
  let held = loan.active_for_member(dict.values(state.loans), member_id)
  let limit = member.loan_limit(borrower)
  use _ <- result.try(case list.length(held) >= limit {
    True -> Error(loan.LimitReached(limit))
    False -> Ok(Nil)
  })
  use _ <- result.try(case list.find(held, fn(l) { l.book_id == book_id }) {
    Ok(_) -> Error(loan.AlreadyBorrowed(book_id: book_id, by: member_id))
    Error(Nil) -> Ok(Nil)
  })
  let queue = queue_for(state, book_id)
  let queued = list.length(queue)
  case availability(state, item) {
    book.NotLendable -> Error(loan.NotLendable(book_id))
    book.AllOnLoan(waiting) -> Error(loan.NoCopiesLeft(book_id, waiting))
    // Reserved copies go to the front of the queue first.
    book.Available(left) ->
      case queue {
        [] -> Ok(#(item, borrower))
        [first, ..] if first == member_id -> Ok(#(item, borrower))
        _ if left > queued -> Ok(#(item, borrower))
        _ -> Error(loan.NoCopiesLeft(book_id, queued))
      }
  }
}

/// Close a loan and work out the fine, returning the member with the fine
/// already added to their balance.
fn close_loan(
  state: State,
  loan_id: LoanId,
  damaged: Bool,
  today: Int,
) -> Result(#(Loan, Fine, Member), LoanError) {
  use existing <- result.try(find_loan(state, loan_id))
  use returned <- result.try(loan.return_book(existing, today, damaged))
  use item <- result.try(find_book(state, returned.book_id))
  use borrower <- result.try(find_member(state, returned.member_id))
  let closed = state.config.closed_weekdays
  let fine = loan.calculate_fine(returned, item, borrower, today, closed)
  Ok(#(returned, fine, member.adjust_fines(borrower, fine.total_cents)))
}

/// Validate a draft and add it to the catalog, describing any problem in a
/// single message for the API response.
fn insert_book(
  state: State,
  draft: BookDraft,
  today: Int,
) -> Result(#(Book, Catalog), String) {
  let item = book_from_draft(draft)
  case book.validate(item, current_year(today)) {
    Error(problems) ->
      Error(problems |> list.map(book.describe_error) |> join_sentences)
    Ok(valid) ->
      case catalog.insert(state.catalog, valid) {
        Ok(updated) -> Ok(#(valid, updated))
        Error(catalog.DuplicateIsbn(code, existing)) ->
          Error("ISBN " <> code <> " already used by " <> existing)
        Error(catalog.DuplicateId(id)) -> Error("duplicate book id " <> id)
        Error(catalog.UnknownBook(id)) -> Error("unknown book " <> id)
      }
  }
}

/// Add a member to the end of a queue unless already in it. Returns the
/// queue and the member's 1-based position.
fn enqueue(queue: List(MemberId), member_id: MemberId) -> #(List(MemberId), Int) {
  case list.contains(queue, member_id) {
    True -> #(queue, position_of(queue, member_id))
    False -> {
      let queue = list.append(queue, [member_id])
      #(queue, list.length(queue))
    }
  }
}

fn find_book(state: State, id: BookId) -> Result(Book, LoanError) {
  catalog.get(state.catalog, id)
  |> result.replace_error(loan.NotFound(id))
}

fn find_member(state: State, id: MemberId) -> Result(Member, LoanError) {
  dict.get(state.members, id)
  |> result.replace_error(loan.NotFound(id))
}

fn find_loan(state: State, id: LoanId) -> Result(Loan, LoanError) {
  dict.get(state.loans, id)
  |> result.replace_error(loan.NotFound(id))
}

fn queue_for(state: State, book_id: BookId) -> List(MemberId) {
  dict.get(state.reservations, book_id)
  |> result.unwrap([])
}

fn drop_from_queue(
  reservations: Dict(BookId, List(MemberId)),
  book_id: BookId,
  member_id: MemberId,
) -> Dict(BookId, List(MemberId)) {
  case dict.get(reservations, book_id) {
    Error(Nil) -> reservations
    Ok(queue) ->
      case list.filter(queue, fn(m) { m != member_id }) {
        [] -> dict.delete(reservations, book_id)
        rest -> dict.insert(reservations, book_id, rest)
      }
  }
}

fn position_of(queue: List(MemberId), member_id: MemberId) -> Int {
  queue
  |> list.take_while(fn(m) { m != member_id })
  |> list.length
  |> int.add(1)
}

/// Availability of a book given the loans currently held in `state`.
pub fn availability(state: State, item: Book) -> book.Availability {
  let active =
    state.loans
    |> dict.values
    |> list.filter(fn(l) { l.book_id == item.id && loan.is_active(l) })
    |> list.length
  book.availability(item, active, list.length(queue_for(state, item.id)))
}

fn book_from_draft(draft: BookDraft) -> Book {
  let base = book.new(ffi.new_id("bk"), draft.title, draft.authors, draft.year)
  let item =
    book.Book(
      ..base,
      isbn: draft.isbn,
      genre: draft.genre,
      format: draft.format,
      copies: draft.copies,
      reference_only: draft.reference_only,
    )
  list.fold(draft.tags, item, book.add_tag)
}

fn member_from_draft(draft: MemberDraft, today: Int) -> Member {
  member.new(
    ffi.new_id("mb"),
    name: draft.name,
    email: draft.email,
    tier: draft.tier,
    today: today,
  )
}

/// Approximate calendar year of a day number. Off by at most one day around
/// New Year, which is fine for validating publication years.
fn current_year(day: Int) -> Int {
  1970 + day * 400 / 146_097
}

fn join_sentences(parts: List(String)) -> String {
  case parts {
    [] -> ""
    [one] -> one
    _ -> list.fold(parts, "", fn(acc, p) {
      case acc {
        "" -> p
        _ -> acc <> "; " <> p
      }
    })
  }
}

// ---------------------------------------------------------------------------
// Client API
// ---------------------------------------------------------------------------

/// Borrow a book on behalf of a member.
pub fn borrow(
  desk: Subject(Message),
  book_id book_id: BookId,
  member_id member_id: MemberId,
) -> Result(Loan, LoanError) {
  process.call(desk, Borrow(book_id, member_id, _), call_timeout)
}

/// Return a loaned book, getting back the closed loan and the fine charged.
pub fn return_loan(
  desk: Subject(Message),
  loan_id: LoanId,
  damaged damaged: Bool,
) -> Result(#(Loan, Fine), LoanError) {
  process.call(desk, Return(loan_id, damaged, _), call_timeout)
}

pub fn renew(desk: Subject(Message), loan_id: LoanId) -> Result(Loan, LoanError) {
  process.call(desk, Renew(loan_id, _), call_timeout)
}

/// Join the reservation queue for a book. Returns the 1-based position in
/// the queue; reserving twice returns the existing position.
pub fn reserve(
  desk: Subject(Message),
  book_id: BookId,
  member_id: MemberId,
) -> Result(Int, LoanError) {
  process.call(desk, Reserve(book_id, member_id, _), call_timeout)
}

/// Leave the reservation queue for a book. Cancelling a reservation that
/// does not exist succeeds, so clients can retry safely.
pub fn cancel_reservation(
  desk: Subject(Message),
  book_id: BookId,
  member_id: MemberId,
) -> Result(Nil, LoanError) {
  process.call(desk, CancelReservation(book_id, member_id, _), call_timeout)
}

pub fn add_book(desk: Subject(Message), draft: BookDraft) -> Result(Book, String) {
  process.call(desk, AddBook(draft, _), call_timeout)
}

pub fn register_member(desk: Subject(Message), draft: MemberDraft) -> Member {
  process.call(desk, RegisterMember(draft, _), call_timeout)
}

pub fn get_book(
  desk: Subject(Message),
  book_id: BookId,
) -> Result(#(Book, book.Availability), Nil) {
  process.call(desk, GetBook(book_id, _), call_timeout)
}

/// Look a member up by id.
pub fn get_member(desk: Subject(Message), member_id: MemberId) -> Result(Member, Nil) {
  process.call(desk, GetMember(member_id, _), call_timeout)
}

pub fn search(
  desk: Subject(Message),
  query: Query,
) -> List(#(Hit, book.Availability)) {
  process.call(desk, Search(query, _), call_timeout)
}

pub fn loans_for(desk: Subject(Message), member_id: MemberId) -> List(Loan) {
  process.call(desk, LoansFor(member_id, _), call_timeout)
}

/// A copy of the whole desk state, for reports and debugging.
pub fn snapshot(desk: Subject(Message)) -> State {
  process.call(desk, Snapshot, call_timeout)
}

/// Ask the desk to stop. Pending calls from other processes will time out.
pub fn stop(desk: Subject(Message)) -> Nil {
  process.send(desk, Shutdown)
}

/// Old name for `return_loan`, kept for the 0.3 admin scripts.
@deprecated("Use return_loan, which also reports the fine charged")
pub fn give_back(desk: Subject(Message), loan_id: LoanId) -> Result(Loan, LoanError) {
  return_loan(desk, loan_id, damaged: False)
  |> result.map(fn(pair) { pair.0 })
}

/// Total unpaid fines across all members, in cents.
pub fn outstanding_fines(state: State) -> Int {
  state.members
  |> dict.values
  |> list.fold(0, fn(total, m) { total + m.outstanding_fines_cents })
}

/// Number of (book, member) reservations currently queued.
pub fn reservation_count(state: State) -> Int {
  dict.fold(state.reservations, 0, fn(acc, _book, queue) {
    acc + list.length(queue)
  })
}

/// Whether a member id is registered.
pub fn has_member(state: State, id: MemberId) -> Bool {
  dict.has_key(state.members, id)
}

/// Every registered member id, sorted.
pub fn member_ids(state: State) -> List(MemberId) {
  dict.keys(state.members)
  |> list.sort(string.compare)
}
