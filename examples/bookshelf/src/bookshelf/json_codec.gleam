//// JSON encoding and decoding for everything that crosses the HTTP
//// boundary.
////
//// Encoders produce the public wire format; decoders accept request bodies.
//// Field names are snake_case. Dates are ISO-8601 `YYYY-MM-DD` strings on
//// the wire and day numbers internally.

import bookshelf/book.{type Book, type Format}
import bookshelf/catalog.{type Hit, type Page}
import bookshelf/ffi
import bookshelf/isbn
import bookshelf/loan.{type Fine, type Loan}
import bookshelf/member.{type Member}
import gleam/dynamic/decode.{type Decoder}
import gleam/json.{type Json}
import gleam/list
import gleam/option.{type Option, None, Some}
import gleam/result
import gleam/string

/// Body of `POST /books`, before an id has been assigned.
pub type BookDraft {
  BookDraft(
    isbn: Option(isbn.Isbn),
    title: String,
    authors: List(String),
    year: Int,
    genre: book.Genre,
    format: Format,
    copies: Int,
    tags: List(String),
    reference_only: Bool,
  )
}

/// Body of `POST /members`.
pub type MemberDraft {
  MemberDraft(name: String, email: member.Email, tier: member.Tier)
}

/// Body of `POST /loans`.
pub type BorrowRequest {
  BorrowRequest(book_id: String, member_id: String)
}

// ---------------------------------------------------------------------------
// Encoders
// ---------------------------------------------------------------------------

/// Encode a book for API responses. `availability` is computed by the
/// caller since the book itself does not know about loans.
pub fn encode_book(item: Book, availability: book.Availability) -> Json {
  json.object([
    #("id", json.string(item.id)),
    #("isbn", json.nullable(option.map(item.isbn, isbn.to_string), json.string)),
    #("title", json.string(item.title)),
    #("authors", json.array(item.authors, json.string)),
    #("year", json.int(item.year)),
    #("genre", json.string(book.genre_to_string(item.genre))),
    #("format", encode_format(item.format)),
    #("copies", json.int(item.copies)),
    #("tags", json.array(item.tags, json.string)),
    #("reference_only", json.bool(item.reference_only)),
    #("availability", encode_availability(availability)),
  ])
}

/// Formats are a tagged union on the wire: `{"type": "ebook", "drm": true}`.
pub fn encode_format(format: Format) -> Json {
  case format {
    book.Hardcover -> json.object([#("type", json.string("hardcover"))])
    book.Paperback -> json.object([#("type", json.string("paperback"))])
    book.Ebook(drm) ->
      json.object([#("type", json.string("ebook")), #("drm", json.bool(drm))])
    book.Audiobook(minutes) ->
      json.object([
        #("type", json.string("audiobook")),
        #("minutes", json.int(minutes)),
      ])
  }
}

fn encode_availability(availability: book.Availability) -> Json {
  case availability {
    book.Available(left) ->
      json.object([
        #("status", json.string("available")),
        #("copies_left", json.int(left)),
      ])
    book.AllOnLoan(waitlist) ->
      json.object([
        #("status", json.string("on_loan")),
        #("waitlist", json.int(waitlist)),
      ])
    book.NotLendable -> json.object([#("status", json.string("reference_only"))])
  }
}

/// Encode a member. The email address is included because only staff
/// endpoints return members.
pub fn encode_member(m: Member) -> Json {
  json.object([
    #("id", json.string(m.id)),
    #("name", json.string(m.name)),
    #("email", json.string(member.email_to_string(m.email))),
    #("tier", json.string(member.tier_to_string(m.tier))),
    #("status", encode_status(m.status)),
    #("joined_on", encode_day(m.joined_on)),
    #("expires_on", encode_day(m.expires_on)),
    #("outstanding_fines_cents", json.int(m.outstanding_fines_cents)),
  ])
}

fn encode_status(status: member.Status) -> Json {
  case status {
    member.Active -> json.object([#("state", json.string("active"))])
    member.Suspended(reason, until) ->
      json.object([
        #("state", json.string("suspended")),
        #("reason", json.string(reason)),
        #("until", json.nullable(until, encode_day)),
      ])
    member.Expired(on) ->
      json.object([#("state", json.string("expired")), #("on", encode_day(on))])
  }
}

pub fn encode_loan(l: Loan) -> Json {
  json.object([
    #("id", json.string(l.id)),
    #("book_id", json.string(l.book_id)),
    #("member_id", json.string(l.member_id)),
    #("borrowed_on", encode_day(l.borrowed_on)),
    #("due_on", encode_day(l.due_on)),
    #("returned_on", json.nullable(l.returned_on, encode_day)),
    #("renewals", json.int(l.renewals)),
    #("damaged", json.bool(l.damaged)),
  ])
}

pub fn encode_fine(fine: Fine) -> Json {
  json.object([
    #("total_cents", json.int(fine.total_cents)),
    #("chargeable_days", json.int(fine.chargeable_days)),
    #(
      "lines",
      json.array(fine.lines, fn(line) {
        json.object([
          #("label", json.string(line.label)),
          #("cents", json.int(line.cents)),
        ])
      }),
    ),
  ])
}

/// Encode a page of results with a caller-supplied item encoder.
pub fn encode_page(page: Page(a), encode_item: fn(a) -> Json) -> Json {
  json.object([
    #("items", json.array(page.items, encode_item)),
    #("total", json.int(page.total)),
    #("offset", json.int(page.offset)),
    #("limit", json.int(page.limit)),
    #("has_next", json.bool(catalog.has_next(page))),
  ])
}

pub fn encode_hit(hit: Hit, availability: book.Availability) -> Json {
  json.object([
    #("score", json.int(hit.score)),
    #("book", encode_book(hit.book, availability)),
  ])
}

/// The uniform error body: `{"error": {"code": "...", "message": "..."}}`.
pub fn encode_error(code: String, message: String) -> Json {
  json.object([
    #(
      "error",
      json.object([
        #("code", json.string(code)),
        #("message", json.string(message)),
      ]),
    ),
  ])
}

fn encode_day(day: Int) -> Json {
  json.string(ffi.format_iso_date(day))
}

// ---------------------------------------------------------------------------
// Decoders
// ---------------------------------------------------------------------------

/// Decoder for the body of `POST /books`.
///
/// Required: `title` (non-blank), `authors` (non-empty list of non-blank
/// names) and `year`. Everything else is optional:
///
/// - `isbn` may be absent, `null`, or a string in any notation accepted by
///   `isbn.parse`; an invalid ISBN fails the whole decode with a message
///   that says why.
/// - `genre` defaults to `"other"`.
/// - `format` defaults to paperback. It may be given either as a bare string
///   (`"hardcover"`) or as a tagged object (`{"type": "audiobook",
///   "minutes": 610}`); older clients send the string form.
/// - `copies` defaults to 1 and must be between 0 and 500.
/// - `tags` defaults to `[]`; tags are trimmed and blank ones dropped.
pub fn book_draft_decoder() -> Decoder(BookDraft) {
  let non_blank = fn(field: String) {
    use value <- decode.then(decode.string)
    case string.trim(value) {
      "" -> decode.failure("", field <> " must not be blank")
      trimmed -> decode.success(trimmed)
    }
  }
  let isbn_decoder = {
    use raw <- decode.then(decode.optional(decode.string))
    case raw {
      None -> decode.success(None)
      Some(text) ->
        case isbn.parse(text) {
          Ok(parsed) -> decode.success(Some(parsed))
          Error(e) -> decode.failure(None, "ISBN (" <> isbn.describe_error(e) <> ")")
        }
    }
  }
  let tagged_format = {
    use kind <- decode.field("type", decode.string)
    case kind {
      "hardcover" -> decode.success(book.Hardcover)
      "paperback" -> decode.success(book.Paperback)
      "ebook" -> {
        use drm <- decode.optional_field("drm", False, decode.bool)
        decode.success(book.Ebook(drm: drm))
      }
      "audiobook" -> {
        use minutes <- decode.field("minutes", decode.int)
        case minutes > 0 {
          True -> decode.success(book.Audiobook(minutes: minutes))
          False -> decode.failure(book.Paperback, "positive audiobook minutes")
        }
      }
      other -> decode.failure(book.Paperback, "known format, got " <> other)
    }
  }
  let bare_format = {
    use kind <- decode.then(decode.string)
    case kind {
      "hardcover" -> decode.success(book.Hardcover)
      "paperback" -> decode.success(book.Paperback)
      "ebook" -> decode.success(book.Ebook(drm: False))
      other -> decode.failure(book.Paperback, "known format, got " <> other)
    }
  }
  let authors_decoder = {
    use names <- decode.then(decode.list(non_blank("author")))
    case names {
      [] -> decode.failure([], "at least one author")
      _ -> decode.success(names)
    }
  }

  use title <- decode.field("title", non_blank("title"))
  use authors <- decode.field("authors", authors_decoder)
  use year <- decode.field("year", decode.int)
  use isbn_value <- decode.optional_field("isbn", None, isbn_decoder)
  use genre <- decode.optional_field(
    "genre",
    book.Other("other"),
    decode.map(decode.string, book.genre_from_string),
  )
  use format <- decode.optional_field(
    "format",
    book.Paperback,
    decode.one_of(tagged_format, or: [bare_format]),
  )
  use copies <- decode.optional_field("copies", 1, decode.int)
  use tags <- decode.optional_field("tags", [], decode.list(decode.string))
  use reference_only <- decode.optional_field("reference_only", False, decode.bool)
  case copies >= 0 && copies <= 500 {
    False -> decode.failure(empty_draft(), "copies between 0 and 500")
    True ->
      decode.success(BookDraft(
        isbn: isbn_value,
        title: title,
        authors: authors,
        year: year,
        genre: genre,
        format: format,
        copies: copies,
        tags: tags |> list.map(string.trim) |> list.filter(fn(t) { t != "" }),
        reference_only: reference_only,
      ))
  }
}

fn empty_draft() -> BookDraft {
  BookDraft(
    isbn: None,
    title: "",
    authors: [],
    year: 0,
    genre: book.Other("other"),
    format: book.Paperback,
    copies: 0,
    tags: [],
    reference_only: False,
  )
}

/// Decoder for the body of `POST /members`. `tier` defaults to standard.
pub fn member_draft_decoder() -> Decoder(MemberDraft) {
  use name <- decode.field("name", decode.string)
  use email_raw <- decode.field("email", decode.string)
  use tier_raw <- decode.optional_field("tier", "standard", decode.string)
  case member.parse_email(email_raw), member.tier_from_string(tier_raw) {
    Ok(email), Ok(tier) -> decode.success(MemberDraft(name, email, tier))
    Error(message), _ -> decode.failure(placeholder_member(), message)
    _, Error(Nil) ->
      decode.failure(placeholder_member(), "tier standard, premium or staff")
  }
}

fn placeholder_member() -> MemberDraft {
  let assert Ok(email) = member.parse_email("nobody@example.invalid")
  MemberDraft(name: "", email: email, tier: member.Standard)
}

pub fn borrow_request_decoder() -> Decoder(BorrowRequest) {
  use book_id <- decode.field("book_id", decode.string)
  use member_id <- decode.field("member_id", decode.string)
  decode.success(BorrowRequest(book_id: book_id, member_id: member_id))
}

/// Parse a request body with `decoder`, turning any failure into a single
/// human-readable message suitable for a 400 response.
pub fn parse_body(body: String, decoder: Decoder(a)) -> Result(a, String) {
  json.parse(from: body, using: decoder)
  |> result.map_error(describe_decode_error)
}

fn describe_decode_error(error: json.DecodeError) -> String {
  case error {
    json.UnexpectedEndOfInput -> "request body is truncated"
    json.UnexpectedByte(byte) -> "invalid JSON near " <> byte
    json.UnexpectedSequence(seq) -> "invalid JSON sequence " <> seq
    json.UnableToDecode(errors) ->
      errors
      |> list.map(fn(e) {
        let path = case e.path {
          [] -> "body"
          parts -> string.join(parts, ".")
        }
        path <> ": expected " <> e.expected <> ", found " <> e.found
      })
      |> string.join("; ")
  }
}
