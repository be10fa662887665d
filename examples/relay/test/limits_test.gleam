import gleam/list
import gleam/option.{Some}
import gleam/string
import gleeunit/should
import relay/backoff
import relay/metrics
import relay/rate_limit
import relay/retention

pub fn bucket_allows_burst_then_denies_test() {
  let bucket = rate_limit.new_bucket(capacity: 2, per_second: 1, now: 0)
  let #(bucket, first) = rate_limit.take(bucket, 0)
  let #(bucket, second) = rate_limit.take(bucket, 0)
  let #(_, third) = rate_limit.take(bucket, 0)
  first |> should.equal(rate_limit.Allow(1))
  second |> should.equal(rate_limit.Allow(0))
  third |> should.equal(rate_limit.Deny(1000))
}

pub fn bucket_refills_over_time_test() {
  let bucket = rate_limit.new_bucket(capacity: 5, per_second: 10, now: 0)
  let #(bucket, _) = rate_limit.take_many(bucket, 5, 0)
  rate_limit.available(bucket, 200) |> should.equal(2)
  rate_limit.available(bucket, 10_000) |> should.equal(5)
}

pub fn sliding_window_test() {
  let window = rate_limit.new_window(limit: 2, per: 1000)
  let #(window, _) = rate_limit.hit(window, 0)
  let #(window, _) = rate_limit.hit(window, 100)
  let #(window, denied) = rate_limit.hit(window, 500)
  denied |> should.equal(rate_limit.Deny(500))
  let #(_, allowed) = rate_limit.hit(window, 1001)
  rate_limit.is_allowed(allowed) |> should.be_true
}

pub fn ring_overwrites_oldest_test() {
  let ring =
    [1, 2, 3, 4, 5]
    |> list.fold(retention.new_ring(3), fn(ring, n) {
      retention.push(ring, retention.RetainedMessage(n, "m", n))
    })
  ring
  |> retention.to_list
  |> list.map(fn(m) { m.sequence })
  |> should.equal([3, 4, 5])
}

pub fn expire_drops_old_messages_test() {
  let store =
    retention.new_store(retention.KeepLastFor(10, 1000))
    |> retention.retain("a", retention.RetainedMessage(1, "old", 0))
    |> retention.retain("a", retention.RetainedMessage(2, "new", 1500))
    |> retention.retain("b", retention.RetainedMessage(3, "old", 100))
  let sweep = retention.expire(store, 2000)
  sweep.removed |> should.equal(2)
  sweep.emptied_topics |> should.equal(["b"])
  retention.topics(sweep.store) |> should.equal(["a"])
}

pub fn backoff_doubles_and_caps_test() {
  backoff.default_policy()
  |> backoff.schedule(10)
  |> should.equal([
    100, 200, 400, 800, 1600, 3200, 6400, 12_800, 25_600, 30_000,
  ])
}

pub fn backoff_gives_up_test() {
  let policy =
    backoff.default_policy()
    |> backoff.with_max_attempts(2)
    |> backoff.with_jitter(backoff.NoJitter)
  let state = backoff.reconnect(policy)
  let #(state, first) = backoff.on_failure(state, fn() { 0.5 })
  let #(state, second) = backoff.on_failure(state, fn() { 0.5 })
  let #(_, third) = backoff.on_failure(state, fn() { 0.5 })
  first |> should.equal(backoff.Retry(after_ms: 100, attempt: 1))
  second |> should.equal(backoff.Retry(after_ms: 200, attempt: 2))
  third |> should.equal(backoff.GiveUp(2))
}

pub fn stable_connection_resets_attempts_test() {
  let state =
    backoff.Reconnect(backoff.default_policy(), 5, 3200, Some(0))
    |> backoff.on_disconnected(backoff.stable_after_ms)
  state.attempt |> should.equal(0)
}

pub fn histogram_buckets_test() {
  let h =
    metrics.histogram("latency", "Latency", [0.1, 0.5, 1.0])
    |> metrics.observe(0.05)
    |> metrics.observe(0.3)
    |> metrics.observe(7.0)
  metrics.cumulative(h)
  |> should.equal([#("0.1", 1), #("0.5", 2), #("1.0", 2), #("+Inf", 3)])
}

pub fn render_counter_test() {
  let assert Ok(registry) =
    metrics.new_registry("relay")
    |> metrics.register(metrics.CounterMetric(metrics.counter("hits", "Hits")))
  let assert Ok(registry) = metrics.count(registry, "hits", 3)
  metrics.render(registry)
  |> string.contains("relay_hits_total 3")
  |> should.be_true
}

pub fn label_escaping_test() {
  metrics.render_labels([#("path", "a\"b")])
  |> should.equal("{path=\"a\\\"b\"}")
}
