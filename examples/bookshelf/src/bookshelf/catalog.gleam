//// The in-memory catalog of books, with search, filtering, sorting and
//// pagination.
////
//// The catalog is an immutable value: every "mutating" function returns a
//// new catalog. The worker actor owns the current version.

import bookshelf/book.{type Book, type BookId, type Genre}
import bookshelf/config
import bookshelf/isbn
import bookshelf/text
import gleam/dict.{type Dict}
import gleam/int
import gleam/list
import gleam/option.{type Option, None, Some}
import gleam/order.{type Order}
import gleam/string

/// The set of all books, indexed by id and by ISBN.
pub opaque type Catalog {
  Catalog(by_id: Dict(BookId, Book), by_isbn: Dict(String, BookId))
}

/// Fields a listing can be sorted on.
pub type SortKey {
  ByTitle
  ByAuthor
  ByYear
  ByRelevance
}

pub type Direction {
  Ascending
  Descending
}

/// A search request. Every filter is optional; an empty query matches every
/// book.
pub type Query {
  Query(
    text: Option(String),
    genre: Option(Genre),
    author: Option(String),
    published_after: Option(Int),
    published_before: Option(Int),
    tags: List(String),
    include_reference: Bool,
    sort: SortKey,
    direction: Direction,
  )
}

/// One page of results plus what the client needs to fetch the next one.
pub type Page(item) {
  Page(items: List(item), total: Int, offset: Int, limit: Int)
}

/// Search hit with its relevance score (higher is better).
pub type Hit {
  Hit(book: Book, score: Int)
}

pub type CatalogError {
  DuplicateId(id: BookId)
  DuplicateIsbn(isbn: String, existing: BookId)
  UnknownBook(id: BookId)
}

/// An empty catalog.
pub fn new() -> Catalog {
  Catalog(by_id: dict.new(), by_isbn: dict.new())
}

/// A query that matches everything, sorted by title.
pub fn everything() -> Query {
  Query(
    text: None,
    genre: None,
    author: None,
    published_after: None,
    published_before: None,
    tags: [],
    include_reference: True,
    sort: ByTitle,
    direction: Ascending,
  )
}

/// Number of titles in the catalog.
pub fn size(catalog: Catalog) -> Int {
  dict.size(catalog.by_id)
}

/// Look a book up by id.
pub fn get(catalog: Catalog, id: BookId) -> Result(Book, CatalogError) {
  dict.get(catalog.by_id, id)
  |> result_replace(UnknownBook(id))
}

/// Look a book up by ISBN in any notation accepted by `isbn.parse`.
pub fn get_by_isbn(catalog: Catalog, raw: String) -> Result(Book, Nil) {
  case isbn.parse(raw) {
    Error(_) -> Error(Nil)
    Ok(parsed) -> {
      case dict.get(catalog.by_isbn, isbn.to_string(parsed)) {
        Ok(id) -> dict.get(catalog.by_id, id)
        Error(Nil) -> Error(Nil)
      }
    }
  }
}

/// Add a new book. Both the id and (if present) the ISBN must be unique.
pub fn insert(catalog: Catalog, item: Book) -> Result(Catalog, CatalogError) {
  let isbn_key = option.map(item.isbn, isbn.to_string)
  case dict.has_key(catalog.by_id, item.id), isbn_key {
    True, _ -> Error(DuplicateId(item.id))
    False, Some(key) ->
      case dict.get(catalog.by_isbn, key) {
        Ok(existing) -> Error(DuplicateIsbn(isbn: key, existing: existing))
        Error(Nil) ->
          Ok(Catalog(
            by_id: dict.insert(catalog.by_id, item.id, item),
            by_isbn: dict.insert(catalog.by_isbn, key, item.id),
          ))
      }
    False, None ->
      Ok(Catalog(..catalog, by_id: dict.insert(catalog.by_id, item.id, item)))
  }
}

/// Replace an existing book, keeping the ISBN index consistent.
pub fn update(catalog: Catalog, item: Book) -> Result(Catalog, CatalogError) {
  case dict.get(catalog.by_id, item.id) {
    Error(Nil) -> Error(UnknownBook(item.id))
    Ok(previous) -> {
      let without = remove_isbn(catalog.by_isbn, previous)
      let by_isbn = case item.isbn {
        Some(code) -> dict.insert(without, isbn.to_string(code), item.id)
        None -> without
      }
      Ok(Catalog(by_id: dict.insert(catalog.by_id, item.id, item), by_isbn: by_isbn))
    }
  }
}

/// Remove a book. Removing an unknown id is an error so that typos in admin
/// tooling are noticed.
pub fn remove(catalog: Catalog, id: BookId) -> Result(Catalog, CatalogError) {
  case dict.get(catalog.by_id, id) {
    Error(Nil) -> Error(UnknownBook(id))
    Ok(item) ->
      Ok(Catalog(
        by_id: dict.delete(catalog.by_id, id),
        by_isbn: remove_isbn(catalog.by_isbn, item),
      ))
  }
}

fn remove_isbn(index: Dict(String, BookId), item: Book) -> Dict(String, BookId) {
  case item.isbn {
    Some(code) -> dict.delete(index, isbn.to_string(code))
    None -> index
  }
}

/// Run a query against the catalog and return every matching book with its
/// relevance score.
///
/// Text matching is case-insensitive and works on whole words: each query
/// word must appear in the title, an author name or a tag. Exact title
/// matches score highest, then title-prefix matches, then word matches in
/// the title, then author and tag matches. Words that do not match exactly
/// are given a second chance with a bounded edit distance so that small
/// typos ("Dune Mesiah") still find the book, at a lower score.
///
/// Filters (genre, author, year range, tags, reference) are applied before
/// scoring. Sorting by relevance falls back to title order for equal scores
/// so results are stable between requests.
pub fn search(catalog: Catalog, query: Query) -> List(Hit) {
  let words = case query.text {
    None -> []
    Some(raw) ->
      raw
      |> text.collapse_spaces
      |> string.lowercase
      |> string.split(" ")
      |> list.filter(fn(w) { w != "" })
  }
  let wanted_tags = list.map(query.tags, text.slugify)
  let author_filter = option.map(query.author, string.lowercase)

  catalog.by_id
  |> dict.values
  |> list.filter(fn(item) {
    let genre_ok = case query.genre {
      None -> True
      Some(genre) -> item.genre == genre
    }
    let author_ok = case author_filter {
      None -> True
      Some(needle) ->
        list.any(item.authors, fn(a) {
          string.contains(string.lowercase(a), needle)
        })
    }
    let after_ok = case query.published_after {
      None -> True
      Some(year) -> item.year >= year
    }
    let before_ok = case query.published_before {
      None -> True
      Some(year) -> item.year <= year
    }
    let tags_ok = list.all(wanted_tags, fn(t) { list.contains(item.tags, t) })
    let reference_ok = query.include_reference || !item.reference_only
    genre_ok && author_ok && after_ok && before_ok && tags_ok && reference_ok
  })
  |> list.filter_map(fn(item) {
    case words {
      [] -> Ok(Hit(book: item, score: 0))
      _ -> {
        let title = string.lowercase(item.title)
        let title_words = string.split(title, " ")
        let author_words =
          item.authors
          |> list.flat_map(fn(a) { string.split(string.lowercase(a), " ") })
        let joined = string.join(words, " ")
        let bonus = case title == joined, string.starts_with(title, joined) {
          True, _ -> 100
          False, True -> 50
          False, False -> 0
        }
        let scores =
          list.map(words, fn(word) {
            case
              list.contains(title_words, word),
              list.contains(author_words, word),
              list.contains(item.tags, word)
            {
              True, _, _ -> 10
              _, True, _ -> 6
              _, _, True -> 4
              False, False, False ->
                case fuzzy_member(word, title_words) {
                  True -> 3
                  False -> 0
                }
            }
          })
        case list.contains(scores, 0) {
          True -> Error(Nil)
          False -> Ok(Hit(book: item, score: bonus + int.sum(scores)))
        }
      }
    }
  })
  |> list.sort(fn(a, b) { compare_hits(a, b, query.sort, query.direction) })
}

fn fuzzy_member(word: String, candidates: List(String)) -> Bool {
  string.length(word) >= 4
  && list.any(candidates, fn(c) {
    case text.distance_with(word, c, text.lenient()) {
      Some(d) -> d <= 1
      None -> False
    }
  })
}

fn compare_hits(a: Hit, b: Hit, key: SortKey, direction: Direction) -> Order {
  let primary = case key {
    ByTitle -> string.compare(sort_title(a.book), sort_title(b.book))
    ByAuthor -> string.compare(book.author_line(a.book), book.author_line(b.book))
    ByYear -> int.compare(a.book.year, b.book.year)
    // Higher scores first when ascending, which is what users expect.
    ByRelevance -> int.compare(b.score, a.score)
  }
  let ordered = case direction {
    Ascending -> primary
    Descending -> order.negate(primary)
  }
  order.break_tie(ordered, string.compare(a.book.id, b.book.id))
}

/// The title used for sorting: lowercase, with a leading article removed,
/// so "The Dispossessed" sorts under D.
pub fn sort_title(item: Book) -> String {
  case string.lowercase(item.title) {
    "the " <> rest | "a " <> rest | "an " <> rest -> rest
    other -> other
  }
}

/// Slice a list of results into a page. `offset` past the end yields an
/// empty page (with the correct total) rather than an error.
pub fn paginate(items: List(a), offset: Int, limit: Option(Int)) -> Page(a) {
  let limit = config.page_size(option.to_result(limit, Nil))
  let offset = int.max(0, offset)
  Page(
    items: items |> list.drop(offset) |> list.take(limit),
    total: list.length(items),
    offset: offset,
    limit: limit,
  )
}

/// Whether there is another page after this one.
pub fn has_next(page: Page(a)) -> Bool {
  page.offset + page.limit < page.total
}

/// Map the items of a page, keeping its metadata.
pub fn map_page(page: Page(a), with fun: fn(a) -> b) -> Page(b) {
  Page(
    items: list.map(page.items, fun),
    total: page.total,
    offset: page.offset,
    limit: page.limit,
  )
}

/// Parse a `sort` query parameter such as `"title"` or `"-year"` (a leading
/// minus means descending). Unknown keys fall back to title order.
pub fn parse_sort(raw: String) -> #(SortKey, Direction) {
  let #(direction, key) = case raw {
    "-" <> rest -> #(Descending, rest)
    other -> #(Ascending, other)
  }
  let key = case key {
    "author" -> ByAuthor
    "year" -> ByYear
    "relevance" | "score" -> ByRelevance
    _ -> ByTitle
  }
  #(key, direction)
}

/// Titles of every book, for "did you mean" suggestions.
pub fn titles(catalog: Catalog) -> List(String) {
  catalog.by_id
  |> dict.values
  |> list.map(fn(item) { item.title })
}

/// Books grouped by genre label, each group sorted by title. Used by the
/// inventory report.
pub fn group_by_genre(catalog: Catalog) -> List(#(String, List(Book))) {
  catalog.by_id
  |> dict.values
  |> list.group(fn(item) { book.genre_label(item.genre) })
  |> dict.to_list
  |> list.map(fn(pair) {
    let #(label, items) = pair
    #(label, list.sort(items, fn(a, b) { string.compare(sort_title(a), sort_title(b)) }))
  })
  |> list.sort(fn(a, b) { string.compare(a.0, b.0) })
}

fn result_replace(result: Result(a, Nil), error: e) -> Result(a, e) {
  case result {
    Ok(value) -> Ok(value)
    Error(Nil) -> Error(error)
  }
}
