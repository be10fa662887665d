//// In-process metrics with Prometheus text exposition.
////
//// A `Registry` holds counters, gauges and histograms by name. Updating a
//// metric returns a new registry; the broker keeps the current one in its
//// state and renders it when the `$sys/metrics` topic is requested or the
//// scrape endpoint is hit.

import gleam/dict.{type Dict}
import gleam/float
import gleam/int
import gleam/list
import gleam/result
import gleam/string

/// Histogram bucket upper bounds (seconds) used when none are given.
pub const default_buckets = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
]

/// Buckets for payload sizes in bytes.
pub const size_buckets = [64.0, 256.0, 1024.0, 4096.0, 16_384.0]

/// `Content-Type` of the rendered exposition text.
pub const content_type = "text/plain; version=0.0.4; charset=utf-8"

/// Label pairs attached to a metric, e.g. `[#("topic", "chat")]`.
pub type Labels =
  List(#(String, String))

/// A monotonically increasing count.
pub type Counter {
  Counter(name: String, help: String, labels: Labels, value: Int)
}

/// A distribution of observations split into buckets by upper bound.
///
/// `counts` has one more entry than `bounds`: the last one counts the
/// observations above every bound (the `+Inf` bucket). Counts are stored
/// per bucket, not cumulatively.
pub type Histogram {
  Histogram(
    name: String,
    help: String,
    labels: Labels,
    bounds: List(Float),
    counts: List(Int),
    sum: Float,
    count: Int,
  )
}

/// Any metric the registry can hold.
pub type Metric {
  CounterMetric(Counter)
  GaugeMetric(name: String, help: String, labels: Labels, value: Float)
  HistogramMetric(Histogram)
}

/// Why a metric operation failed.
pub type MetricError {
  UnknownMetric(name: String)
  WrongKind(name: String, expected: String)
  InvalidName(name: String)
}

/// A collection of metrics sharing a name prefix.
pub opaque type Registry {
  Registry(prefix: String, metrics: Dict(String, Metric))
}

/// An empty registry. Every metric name is prefixed with `prefix` and an
/// underscore when rendered, unless the prefix is empty.
pub fn new_registry(prefix: String) -> Registry {
  Registry(prefix: prefix, metrics: dict.new())
}

/// A counter starting at zero.
pub fn counter(name: String, help: String) -> Counter {
  Counter(name: name, help: help, labels: [], value: 0)
}

/// Add one to a counter.
pub fn increment(counter: Counter) -> Counter {
  increment_by(counter, 1)
}

/// Add `amount` to a counter; negative amounts are ignored because
/// counters may never go down.
pub fn increment_by(counter: Counter, amount: Int) -> Counter {
  Counter(..counter, value: counter.value + int.max(amount, 0))
}

/// An empty histogram with the given bucket bounds. The bounds are sorted
/// and de-duplicated first.
pub fn histogram(name: String, help: String, bounds: List(Float)) -> Histogram {
  let bounds = bounds |> list.unique |> list.sort(float.compare)
  Histogram(
    name: name,
    help: help,
    labels: [],
    bounds: bounds,
    counts: list.repeat(0, list.length(bounds) + 1),
    sum: 0.0,
    count: 0,
  )
}

/// Index of the bucket an observation falls into: the first bound that is
/// greater than or equal to the value, or the overflow bucket.
pub fn bucket_index(bounds: List(Float), value: Float) -> Int {
  bucket_index_loop(bounds, value, 0)
}

fn bucket_index_loop(bounds: List(Float), value: Float, index: Int) -> Int {
  case bounds {
    [] -> index
    [bound, ..] if value <=. bound -> index
    [_, ..rest] -> bucket_index_loop(rest, value, index + 1)
  }
}

/// Record one observation.
pub fn observe(histogram: Histogram, value: Float) -> Histogram {
  let target = bucket_index(histogram.bounds, value)
  let counts =
    list.index_map(histogram.counts, fn(count, index) {
      case index == target {
        True -> count + 1
        False -> count
      }
    })
  Histogram(
    ..histogram,
    counts: counts,
    sum: histogram.sum +. value,
    count: histogram.count + 1,
  )
}

/// Running totals per bucket, paired with the bucket's `le` label value.
pub fn cumulative(histogram: Histogram) -> List(#(String, Int)) {
  let labels =
    list.map(histogram.bounds, format_float)
    |> list.append(["+Inf"])
  let totals =
    histogram.counts
    |> list.scan(0, fn(total, count) { total + count })
  list.zip(labels, totals)
}

/// Estimate a quantile (`0.0..1.0`) by linear interpolation inside the
/// bucket that contains it, the same way PromQL's `histogram_quantile`
/// does. Fails for an empty histogram or an out of range quantile.
pub fn estimate_quantile(histogram: Histogram, q: Float) -> Result(Float, Nil) {
  case histogram.count, q >=. 0.0 && q <=. 1.0 {
    0, _ -> Error(Nil)
    _, False -> Error(Nil)
    total, True -> {
      let rank = q *. int.to_float(total)
      let bounded = list.zip(histogram.bounds, histogram.counts)
      interpolate(bounded, rank, 0.0, 0)
      |> result.lazy_or(fn() { list.last(histogram.bounds) })
    }
  }
}

fn interpolate(
  buckets: List(#(Float, Int)),
  rank: Float,
  lower: Float,
  seen: Int,
) -> Result(Float, Nil) {
  case buckets {
    [] -> Error(Nil)
    [#(upper, count), ..rest] -> {
      let reached = int.to_float(seen + count)
      case reached >=. rank, count {
        True, 0 -> Ok(upper)
        True, _ -> {
          let inside = { rank -. int.to_float(seen) } /. int.to_float(count)
          Ok(lower +. { upper -. lower } *. inside)
        }
        False, _ -> interpolate(rest, rank, upper, seen + count)
      }
    }
  }
}

/// Add or replace a metric under its own name.
pub fn register(
  registry: Registry,
  metric: Metric,
) -> Result(Registry, MetricError) {
  let name = metric_name(metric)
  case is_valid_name(name) {
    False -> Error(InvalidName(name))
    True ->
      Ok(Registry(..registry, metrics: dict.insert(registry.metrics, name, metric)))
  }
}

/// Look a metric up by its unprefixed name.
pub fn get(registry: Registry, name: String) -> Result(Metric, MetricError) {
  dict.get(registry.metrics, name)
  |> result.replace_error(UnknownMetric(name))
}

/// Increment the named counter by `amount`.
pub fn count(
  registry: Registry,
  name: String,
  amount: Int,
) -> Result(Registry, MetricError) {
  use metric <- result.try(get(registry, name))
  case metric {
    CounterMetric(c) -> register(registry, CounterMetric(increment_by(c, amount)))
    _ -> Error(WrongKind(name, "counter"))
  }
}

/// Set the named gauge to `value`.
pub fn set_gauge(
  registry: Registry,
  name: String,
  value: Float,
) -> Result(Registry, MetricError) {
  use metric <- result.try(get(registry, name))
  case metric {
    GaugeMetric(name, help, labels, _) ->
      register(registry, GaugeMetric(name, help, labels, value))
    _ -> Error(WrongKind(name, "gauge"))
  }
}

/// Record an observation in the named histogram.
pub fn record(
  registry: Registry,
  name: String,
  value: Float,
) -> Result(Registry, MetricError) {
  use metric <- result.try(get(registry, name))
  case metric {
    HistogramMetric(h) -> register(registry, HistogramMetric(observe(h, value)))
    _ -> Error(WrongKind(name, "histogram"))
  }
}

/// The unprefixed name of any metric.
pub fn metric_name(metric: Metric) -> String {
  case metric {
    CounterMetric(c) -> c.name
    GaugeMetric(name: name, ..) -> name
    HistogramMetric(h) -> h.name
  }
}

/// Prometheus metric names match `[a-zA-Z_:][a-zA-Z0-9_:]*`.
pub fn is_valid_name(name: String) -> Bool {
  case string.to_graphemes(name) {
    [] -> False
    [first, ..rest] ->
      is_name_start(first)
      && list.all(rest, fn(c) { is_name_start(c) || is_digit(c) })
  }
}

fn is_name_start(c: String) -> Bool {
  c == "_" || c == ":" || string.lowercase(c) != string.uppercase(c)
}

fn is_digit(c: String) -> Bool {
  case int.parse(c) {
    Ok(_) -> True
    Error(Nil) -> False
  }
}

/// Render the whole registry in the Prometheus text exposition format.
///
/// Metrics are emitted in name order, each preceded by its `# HELP` and
/// `# TYPE` lines. Histograms expand into cumulative `_bucket` series with
/// an `le` label plus `_sum` and `_count`.
pub fn render(registry: Registry) -> String {
  let full_name = fn(name) {
    case registry.prefix {
      "" -> name
      prefix -> prefix <> "_" <> name
    }
  }
  registry.metrics
  |> dict.values
  |> list.sort(fn(a, b) { string.compare(metric_name(a), metric_name(b)) })
  |> list.flat_map(fn(metric) {
    case metric {
      CounterMetric(c) -> {
        let name = full_name(c.name) <> "_total"
        [
          "# HELP " <> name <> " " <> escape_help(c.help),
          "# TYPE " <> name <> " counter",
          name <> render_labels(c.labels) <> " " <> int.to_string(c.value),
        ]
      }

      GaugeMetric(name, help, labels, value) -> {
        let name = full_name(name)
        [
          "# HELP " <> name <> " " <> escape_help(help),
          "# TYPE " <> name <> " gauge",
          name <> render_labels(labels) <> " " <> format_float(value),
        ]
      }

      HistogramMetric(h) -> {
        let name = full_name(h.name)
        let buckets =
          cumulative(h)
          |> list.map(fn(pair) {
            let #(le, total) = pair
            name
            <> "_bucket"
            <> render_labels(list.append(h.labels, [#("le", le)]))
            <> " "
            <> int.to_string(total)
          })
        let header = [
          "# HELP " <> name <> " " <> escape_help(h.help),
          "# TYPE " <> name <> " histogram",
        ]
        let footer = [
          name
            <> "_sum"
            <> render_labels(h.labels)
            <> " "
            <> format_float(h.sum),
          name
            <> "_count"
            <> render_labels(h.labels)
            <> " "
            <> int.to_string(h.count),
        ]
        list.flatten([header, buckets, footer])
      }
    }
  })
  |> fn(lines) {
    case lines {
      [] -> ""
      _ -> string.join(lines, "\n") <> "\n"
    }
  }
}

/// `{a="1",b="2"}` or the empty string when there are no labels.
pub fn render_labels(labels: Labels) -> String {
  case labels {
    [] -> ""
    _ ->
      "{"
      <> {
        labels
        |> list.map(fn(pair) {
          pair.0 <> "=\"" <> escape_label_value(pair.1) <> "\""
        })
        |> string.join(",")
      }
      <> "}"
  }
}

/// Escape a label value: backslash, double quote and newline.
pub fn escape_label_value(value: String) -> String {
  value
  |> string.replace("\\", "\\\\")
  |> string.replace("\"", "\\\"")
  |> string.replace("\n", "\\n")
}

fn escape_help(help: String) -> String {
  help
  |> string.replace("\\", "\\\\")
  |> string.replace("\n", "\\n")
}

/// Format a float the way Prometheus expects; whole numbers keep a `.0`.
pub fn format_float(value: Float) -> String {
  let whole = float.truncate(value)
  case int.to_float(whole) == value {
    True -> int.to_string(whole) <> ".0"
    False -> float.to_string(value)
  }
}

/// The registry used by the broker, with every metric pre-registered.
pub fn broker_registry() -> Registry {
  let metrics = [
    CounterMetric(counter("messages_published", "Messages accepted by PUB")),
    CounterMetric(counter("messages_delivered", "Messages sent to subscribers")),
    CounterMetric(counter("messages_dropped", "Messages refused by a limit")),
    GaugeMetric("sessions_open", "Currently connected sessions", [], 0.0),
    HistogramMetric(histogram(
      "payload_bytes",
      "Size of published payloads",
      size_buckets,
    )),
  ]
  let assert Ok(registry) =
    list.try_fold(metrics, new_registry("relay"), register)
  registry
}
