//// Domain types for books held by the library.
////
//// A `Book` is a title in the catalog; a library may own several physical
//// copies of it. Availability is derived from `copies` and the number of
//// active loans, and is never stored, so it cannot drift out of sync.

import bookshelf/isbn.{type Isbn}
import bookshelf/text
import gleam/dict
import gleam/int
import gleam/list
import gleam/option.{type Option, None}
import gleam/string

/// Catalog identifier of a book, e.g. `"bk_9f2c1a0e7d3b4c5a"`.
pub type BookId =
  String

/// Year of first publication. Negative values are BCE.
pub type Year =
  Int

/// Broad shelving category.
pub type Genre {
  Fiction
  ScienceFiction
  Fantasy
  Mystery
  Biography
  History
  Science
  Children
  Poetry
  Reference
  Other(label: String)
}

/// Physical or digital format of the book's copies.
pub type Format {
  Hardcover
  Paperback
  Ebook(drm: Bool)
  Audiobook(minutes: Int)
}

/// A title in the catalog.
pub type Book {
  Book(
    id: BookId,
    isbn: Option(Isbn),
    title: String,
    authors: List(String),
    year: Year,
    genre: Genre,
    format: Format,
    copies: Int,
    tags: List(String),
    reference_only: Bool,
  )
}

/// How many copies can be lent right now.
pub type Availability {
  Available(copies_left: Int)
  AllOnLoan(waitlist: Int)
  NotLendable
}

/// Problems found by `validate`.
pub type BookError {
  EmptyTitle
  NoAuthors
  NegativeCopies(copies: Int)
  FutureYear(year: Year, current: Year)
  DuplicateTag(tag: String)
}

/// Create a book with sensible defaults: one paperback copy, no tags,
/// lendable. Use record update syntax to adjust the rest.
pub fn new(id: BookId, title: String, authors: List(String), year: Year) -> Book {
  Book(
    id: id,
    isbn: None,
    title: string.trim(title),
    authors: authors,
    year: year,
    genre: Other("uncategorised"),
    format: Paperback,
    copies: 1,
    tags: [],
    reference_only: False,
  )
}

/// Check the invariants the catalog relies on. `current_year` is passed in
/// rather than read from the clock so validation stays deterministic.
/// Returns every problem found, not just the first one.
pub fn validate(book: Book, current_year: Year) -> Result(Book, List(BookError)) {
  let errors =
    [
      case string.trim(book.title) {
        "" -> Error(EmptyTitle)
        _ -> Ok(Nil)
      },
      case book.authors {
        [] -> Error(NoAuthors)
        _ -> Ok(Nil)
      },
      case book.copies {
        n if n < 0 -> Error(NegativeCopies(n))
        _ -> Ok(Nil)
      },
      case book.year > current_year {
        True -> Error(FutureYear(year: book.year, current: current_year))
        False -> Ok(Nil)
      },
    ]
    |> list.append(duplicate_tags(book.tags))
    |> list.filter_map(fn(check) {
      case check {
        Error(e) -> Ok(e)
        Ok(Nil) -> Error(Nil)
      }
    })
  case errors {
    [] -> Ok(book)
    _ -> Error(errors)
  }
}

fn duplicate_tags(tags: List(String)) -> List(Result(Nil, BookError)) {
  tags
  |> list.map(string.lowercase)
  |> list.group(fn(tag) { tag })
  |> dict.to_list
  |> list.filter_map(fn(entry) {
    let #(tag, occurrences) = entry
    case list.length(occurrences) > 1 {
      True -> Ok(Error(DuplicateTag(tag)))
      False -> Error(Nil)
    }
  })
}

/// Work out availability from the number of active loans and reservations.
pub fn availability(book: Book, active_loans: Int, waiting: Int) -> Availability {
  case book.reference_only, book.copies - active_loans {
    True, _ -> NotLendable
    False, left if left > 0 -> Available(copies_left: left)
    False, _ -> AllOnLoan(waitlist: waiting)
  }
}

/// Add a tag, normalised to a lowercase slug. Adding a tag the book already
/// has is a no-op.
pub fn add_tag(book: Book, tag: String) -> Book {
  let slug = text.slugify(tag)
  case slug == "" || list.contains(book.tags, slug) {
    True -> book
    False -> Book(..book, tags: list.append(book.tags, [slug]))
  }
}

/// Rename a book, tidying the casing of the new title.
pub fn rename(book: Book, title: String) -> Book {
  Book(..book, title: text.title_case(title))
}

/// "Surname, Surname & Surname" style author line for listings. More than
/// three authors are abbreviated to the first one plus "et al.".
pub fn author_line(book: Book) -> String {
  case book.authors {
    [] -> "Anonymous"
    [one] -> one
    [a, b] -> a <> " & " <> b
    [a, b, c] -> a <> ", " <> b <> " & " <> c
    [first, ..] -> first <> " et al."
  }
}

/// Short, human-readable label for a genre.
pub fn genre_label(genre: Genre) -> String {
  case genre {
    Fiction -> "Fiction"
    ScienceFiction -> "Science fiction"
    Fantasy -> "Fantasy"
    Mystery -> "Mystery"
    Biography -> "Biography"
    History -> "History"
    Science -> "Science"
    Children -> "Children"
    Poetry -> "Poetry"
    Reference -> "Reference"
    Other(label) -> text.title_case(label)
  }
}

/// Parse the wire form of a genre (as produced by `genre_to_string`).
/// Unknown values become `Other` rather than failing, so new genres added
/// by librarians do not break older clients.
pub fn genre_from_string(raw: String) -> Genre {
  case string.lowercase(string.trim(raw)) {
    "fiction" -> Fiction
    "science-fiction" | "sci-fi" | "sf" -> ScienceFiction
    "fantasy" -> Fantasy
    "mystery" | "crime" -> Mystery
    "biography" -> Biography
    "history" -> History
    "science" -> Science
    "children" | "kids" -> Children
    "poetry" -> Poetry
    "reference" -> Reference
    other -> Other(other)
  }
}

/// The stable wire form of a genre, used in JSON and query strings.
pub fn genre_to_string(genre: Genre) -> String {
  case genre {
    Fiction -> "fiction"
    ScienceFiction -> "science-fiction"
    Fantasy -> "fantasy"
    Mystery -> "mystery"
    Biography -> "biography"
    History -> "history"
    Science -> "science"
    Children -> "children"
    Poetry -> "poetry"
    Reference -> "reference"
    Other(label) -> text.slugify(label)
  }
}

/// Loan period multiplier for a format: audiobooks and ebooks are lent for
/// half the usual time because they have no physical wear and high demand.
pub fn loan_days(format: Format, base_days: Int) -> Int {
  case format {
    Hardcover | Paperback -> base_days
    Ebook(_) -> int.max(7, base_days / 2)
    Audiobook(minutes) if minutes > 1200 -> base_days
    Audiobook(_) -> int.max(7, base_days / 2)
  }
}

/// The number of years since publication, or `0` for books published this
/// year or with a year in the future.
pub fn age(book: Book, current_year: Year) -> Int {
  int.max(0, current_year - book.year)
}

/// Describe a validation error for API clients.
pub fn describe_error(error: BookError) -> String {
  case error {
    EmptyTitle -> "title must not be empty"
    NoAuthors -> "at least one author is required"
    NegativeCopies(n) -> "copies cannot be negative (got " <> int.to_string(n) <> ")"
    FutureYear(year, current) ->
      "year "
      <> int.to_string(year)
      <> " is after the current year "
      <> int.to_string(current)
    DuplicateTag(tag) -> "tag " <> string.inspect(tag) <> " appears more than once"
  }
}
