//// HTTP routing: turns a request into a call on the lending desk and the
//// desk's answer into a JSON response.
////
//// The router is independent of the web server. It takes a
//// `Request(String)` whose body has already been read and returns a
//// `Response(String)`; `bookshelf.gleam` adapts this to mist.

import bookshelf/book
import bookshelf/catalog
import bookshelf/config.{type Config}
import bookshelf/ffi
import bookshelf/json_codec
import bookshelf/loan.{type LoanError}
import bookshelf/report
import bookshelf/worker
import gleam/dynamic/decode
import gleam/erlang/process.{type Subject}
import gleam/http.{Delete, Get, Options, Post}
import gleam/http/request.{type Request}
import gleam/http/response.{type Response}
import gleam/int
import gleam/json.{type Json}
import gleam/list
import gleam/option.{None, Some}
import gleam/result
import gleam/string

/// What every handler needs: the desk to talk to and the configuration.
pub type Context {
  Context(desk: Subject(worker.Message), config: Config)
}

/// A request-level failure, mapped to an HTTP status by `error_response`.
pub type ApiError {
  BadRequest(message: String)
  NotFound(what: String)
  MethodNotAllowed(allowed: List(http.Method))
  Conflict(message: String)
  Unprocessable(message: String)
}

const json_content_type = "application/json; charset=utf-8"

/// Route a request.
///
/// Paths are matched on their segments, so trailing slashes do not matter
/// (`/books/` is the same as `/books`). When the path exists but the method
/// does not, the response is a 405 with an `allow` header listing the
/// methods that do exist, rather than a 404. `OPTIONS` on any known path
/// answers with that same list and an empty body.
pub fn handle_request(req: Request(String), ctx: Context) -> Response(String) {
  let segments = request.path_segments(req)
  let query = request.get_query(req) |> result.unwrap([])
  let outcome = case req.method, segments {
    Get, [] | Get, ["health"] ->
      Ok(json_ok(json.object([#("status", json.string("ok"))])))

    Get, ["books"] -> Ok(list_books(ctx, query))

    Post, ["books"] -> {
      use draft <- result.try(decode_body(req, json_codec.book_draft_decoder()))
      worker.add_book(ctx.desk, draft)
      |> result.map(fn(added) {
        let availability = book.availability(added, 0, 0)
        json_response(201, json_codec.encode_book(added, availability))
      })
      |> result.map_error(Unprocessable)
    }

    Get, ["books", "isbn", code] -> {
      let state = worker.snapshot(ctx.desk)
      case catalog.get_by_isbn(state.catalog, code) {
        Ok(found) ->
          Ok(json_ok(json_codec.encode_book(found, worker.availability(state, found))))
        Error(Nil) -> Error(NotFound("book with ISBN " <> code))
      }
    }

    Get, ["books", id] ->
      case worker.get_book(ctx.desk, id) {
        Ok(#(found, availability)) ->
          Ok(json_ok(json_codec.encode_book(found, availability)))
        Error(Nil) -> Error(NotFound("book " <> id))
      }

    Post, ["books", id, "reservations"] -> {
      use member_id <- result.try(decode_body(req, member_ref_decoder()))
      worker.reserve(ctx.desk, id, member_id)
      |> result.map(fn(position) {
        json_response(201, json.object([#("position", json.int(position))]))
      })
      |> result.map_error(from_loan_error)
    }

    Delete, ["books", id, "reservations", member_id] ->
      worker.cancel_reservation(ctx.desk, id, member_id)
      |> result.map(fn(_) { response.new(204) |> response.set_body("") })
      |> result.map_error(from_loan_error)

    Post, ["members"] -> {
      use draft <- result.try(decode_body(req, json_codec.member_draft_decoder()))
      let created = worker.register_member(ctx.desk, draft)
      Ok(json_response(201, json_codec.encode_member(created)))
    }

    Get, ["members", id] ->
      worker.get_member(ctx.desk, id)
      |> result.map(fn(found) { json_ok(json_codec.encode_member(found)) })
      |> result.replace_error(NotFound("member " <> id))

    Get, ["members", id, "loans"] -> {
      let loans = worker.loans_for(ctx.desk, id)
      Ok(json_ok(json.array(loans, json_codec.encode_loan)))
    }

    Post, ["loans"] -> {
      use body <- result.try(decode_body(req, json_codec.borrow_request_decoder()))
      worker.borrow(ctx.desk, book_id: body.book_id, member_id: body.member_id)
      |> result.map(fn(created) { json_response(201, json_codec.encode_loan(created)) })
      |> result.map_error(from_loan_error)
    }

    Post, ["loans", id, "return"] -> {
      let damaged = list.key_find(query, "damaged") == Ok("true")
      worker.return_loan(ctx.desk, id, damaged: damaged)
      |> result.map(fn(pair) {
        let #(closed, fine) = pair
        json_ok(
          json.object([
            #("loan", json_codec.encode_loan(closed)),
            #("fine", json_codec.encode_fine(fine)),
          ]),
        )
      })
      |> result.map_error(from_loan_error)
    }

    Post, ["loans", id, "renew"] ->
      worker.renew(ctx.desk, id)
      |> result.map(fn(renewed) { json_ok(json_codec.encode_loan(renewed)) })
      |> result.map_error(from_loan_error)

    Get, ["reports", "overdue"] -> {
      let body = report.overdue_report(worker.snapshot(ctx.desk), ffi.today())
      Ok(text_response(200, body))
    }

    Options, path ->
      case allowed_methods(path) {
        [] -> Error(NotFound(req.path))
        methods ->
          Ok(
            response.new(204)
            |> response.set_header("allow", methods_header(methods))
            |> response.set_body(""),
          )
      }

    _, path ->
      case allowed_methods(path) {
        [] -> Error(NotFound(req.path))
        methods -> Error(MethodNotAllowed(methods))
      }
  }
  case outcome {
    Ok(resp) -> resp
    Error(error) -> error_response(error)
  }
}

/// `GET /books`: search the catalog and return one page of hits.
/// Supports `q`, `genre`, `author`, `after`, `before`, repeated `tag`,
/// `reference`, `sort`, `offset` and `limit` query parameters.
fn list_books(ctx: Context, query: List(#(String, String))) -> Response(String) {
  let hits = worker.search(ctx.desk, parse_search_query(query))
  let offset = int_param(query, "offset") |> result.unwrap(0)
  let limit = int_param(query, "limit") |> option.from_result
  catalog.paginate(hits, offset, limit)
  |> json_codec.encode_page(fn(pair) { json_codec.encode_hit(pair.0, pair.1) })
  |> json_ok
}

/// Which methods a path supports, used for 405 and `OPTIONS` responses.
/// Returns `[]` for unknown paths.
pub fn allowed_methods(segments: List(String)) -> List(http.Method) {
  case segments {
    [] | ["health"] -> [Get]
    ["books"] -> [Get, Post]
    ["books", "isbn", _] -> [Get]
    ["books", _] -> [Get]
    ["books", _, "reservations"] -> [Post]
    ["books", _, "reservations", _] -> [Delete]
    ["members"] -> [Post]
    ["members", _] -> [Get]
    ["members", _, "loans"] -> [Get]
    ["loans"] -> [Post]
    ["loans", _, "return"] | ["loans", _, "renew"] -> [Post]
    ["reports", "overdue"] -> [Get]
    _ -> []
  }
}

/// Map an `ApiError` to a response with the uniform JSON error body.
pub fn error_response(error: ApiError) -> Response(String) {
  case error {
    BadRequest(message) -> json_response(400, json_codec.encode_error("bad_request", message))
    NotFound(what) ->
      json_response(404, json_codec.encode_error("not_found", what <> " not found"))
    MethodNotAllowed(allowed) ->
      json_response(
        405,
        json_codec.encode_error("method_not_allowed", "method not allowed"),
      )
      |> response.set_header("allow", methods_header(allowed))
    Conflict(message) -> json_response(409, json_codec.encode_error("conflict", message))
    Unprocessable(message) ->
      json_response(422, json_codec.encode_error("unprocessable", message))
  }
}

/// Translate a desk error into an API error with the right status class.
pub fn from_loan_error(error: LoanError) -> ApiError {
  let message = loan.describe_error(error)
  case error {
    loan.NotFound(id) -> NotFound(id)
    loan.AlreadyBorrowed(..) | loan.ReturnedAlready(..) -> Conflict(message)
    loan.NoCopiesLeft(..) | loan.RenewalBlockedByReservation(..) -> Conflict(message)
    loan.LimitReached(_) | loan.RenewalLimit(_) -> Unprocessable(message)
    loan.NotLendable(_) | loan.MemberBlocked(_) -> Unprocessable(message)
  }
}

fn parse_search_query(query: List(#(String, String))) -> catalog.Query {
  let #(sort, direction) =
    list.key_find(query, "sort")
    |> result.map(catalog.parse_sort)
    |> result.unwrap(#(catalog.ByRelevance, catalog.Ascending))
  let text = list.key_find(query, "q") |> option.from_result
  catalog.Query(
    ..catalog.everything(),
    text: text,
    genre: list.key_find(query, "genre")
      |> result.map(book.genre_from_string)
      |> option.from_result,
    author: list.key_find(query, "author") |> option.from_result,
    published_after: int_param(query, "after") |> option.from_result,
    published_before: int_param(query, "before") |> option.from_result,
    tags: list.key_filter(query, "tag"),
    include_reference: list.key_find(query, "reference") != Ok("false"),
    sort: case text, sort {
      None, catalog.ByRelevance -> catalog.ByTitle
      Some(_), key -> key
      None, key -> key
    },
    direction: direction,
  )
}

fn int_param(query: List(#(String, String)), name: String) -> Result(Int, Nil) {
  list.key_find(query, name)
  |> result.try(int.parse)
}

fn member_ref_decoder() -> decode.Decoder(String) {
  use member_id <- decode.field("member_id", decode.string)
  decode.success(member_id)
}

fn decode_body(
  req: Request(String),
  decoder: decode.Decoder(a),
) -> Result(a, ApiError) {
  case string.trim(req.body) {
    "" -> Error(BadRequest("request body is empty"))
    body ->
      json_codec.parse_body(body, decoder)
      |> result.map_error(BadRequest)
  }
}

fn json_ok(body: Json) -> Response(String) {
  json_response(200, body)
}

fn json_response(status: Int, body: Json) -> Response(String) {
  response.new(status)
  |> response.set_header("content-type", json_content_type)
  |> response.set_body(json.to_string(body))
}

fn text_response(status: Int, body: String) -> Response(String) {
  response.new(status)
  |> response.set_header("content-type", "text/plain; charset=utf-8")
  |> response.set_body(body)
}

fn methods_header(methods: List(http.Method)) -> String {
  [Options, ..methods]
  |> list.map(http.method_to_string)
  |> list.map(string.uppercase)
  |> string.join(", ")
}
