//// Entry point: read the configuration, start the lending desk, seed it
//// with a few demo titles when asked to, and serve the HTTP API with mist.

import bookshelf/config
import bookshelf/ffi
import bookshelf/json_codec
import bookshelf/router
import bookshelf/worker
import gleam/bit_array
import gleam/bytes_tree
import gleam/erlang/process
import gleam/http
import gleam/http/request.{type Request}
import gleam/http/response.{type Response}
import gleam/int
import gleam/list
import gleam/result
import gleam/string
import mist.{type Connection, type ResponseData}

/// Start the service and block forever.
pub fn main() -> Nil {
  let cfg = case config.from_env() {
    Ok(cfg) -> cfg
    Error(error) -> {
      ffi.log(ffi.Critical, config.describe_error(error))
      config.default()
    }
  }
  let assert Ok(desk) = worker.start(cfg)
  case ffi.get_env("BOOKSHELF_SEED") {
    Ok("1") | Ok("true") -> seed(desk)
    _ -> Nil
  }
  let ctx = router.Context(desk: desk, config: cfg)

  let assert Ok(_) =
    fn(req: Request(Connection)) { serve(req, ctx) }
    |> mist.new
    |> mist.bind(cfg.host)
    |> mist.port(cfg.port)
    |> mist.start_http

  ffi.info(
    "bookshelf listening on http://" <> cfg.host <> ":" <> int.to_string(cfg.port),
  )
  process.sleep_forever()
}

/// Adapt a mist request to the server-independent router: read and decode
/// the body (rejecting bodies over the configured limit or that are not
/// UTF-8), route it, and wrap the response body for mist.
fn serve(req: Request(Connection), ctx: router.Context) -> Response(ResponseData) {
  let started = ffi.now_millis()
  let resp =
    case mist.read_body(req, max_body_limit: ctx.config.max_body_bytes) {
      Error(_) ->
        router.error_response(router.BadRequest("request body is too large"))
      Ok(with_bytes) ->
        case bit_array.to_string(with_bytes.body) {
          Error(Nil) ->
            router.error_response(router.BadRequest("request body is not UTF-8"))
          Ok(body) -> router.handle_request(request.set_body(with_bytes, body), ctx)
        }
    }
  case ctx.config.log_requests {
    True -> log_request(req, resp.status, ffi.now_millis() - started)
    False -> Nil
  }
  response.map(resp, fn(body) { mist.Bytes(bytes_tree.from_string(body)) })
}

fn log_request(req: Request(a), status: Int, elapsed_ms: Int) -> Nil {
  [
    string.uppercase(http.method_to_string(req.method)),
    req.path,
    int.to_string(status),
    int.to_string(elapsed_ms) <> "ms",
  ]
  |> string.join(" ")
  |> ffi.info
}

/// Load a handful of well-known titles so a fresh instance has something to
/// search. Failures are logged and otherwise ignored.
fn seed(desk: process.Subject(worker.Message)) -> Nil {
  demo_books()
  |> list.each(fn(raw) {
    let added = {
      use draft <- result.try(json_codec.parse_body(
        raw,
        json_codec.book_draft_decoder(),
      ))
      worker.add_book(desk, draft)
    }
    case added {
      Ok(item) -> ffi.log(ffi.Debug, "seeded " <> item.title)
      Error(message) -> ffi.warn("seed: " <> message)
    }
  })
}

fn demo_books() -> List(String) {
  [
    "{\"title\": \"The Left Hand of Darkness\", \"authors\": [\"Ursula K. Le Guin\"], \"year\": 1969, \"genre\": \"science-fiction\", \"isbn\": \"978-0-441-47812-5\"}",
    "{\"title\": \"A Wizard of Earthsea\", \"authors\": [\"Ursula K. Le Guin\"], \"year\": 1968, \"genre\": \"fantasy\", \"copies\": 3}",
    "{\"title\": \"The Name of the Rose\", \"authors\": [\"Umberto Eco\"], \"year\": 1980, \"genre\": \"mystery\", \"format\": \"hardcover\"}",
    "{\"title\": \"Oxford English Dictionary\", \"authors\": [\"Oxford University Press\"], \"year\": 1989, \"genre\": \"reference\", \"reference_only\": true}",
  ]
}
