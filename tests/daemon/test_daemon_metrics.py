"""The Prometheus text format, rendered without prometheus_client."""

from __future__ import annotations

import pytest

from gbr.daemon.metrics import Metrics


def test_families_render_with_help_type_and_samples() -> None:
    m = Metrics()
    m.describe("gbr_things_total", "counter", "Things done.")
    m.describe("gbr_depth", "gauge", "How deep.", collect=lambda: [({"actor": "indexer"}, 3)])
    m.describe("gbr_seconds", "histogram", "How long.", buckets=(0.1, 1.0))
    m.inc("gbr_things_total", kind="a")
    m.inc("gbr_things_total", 2, kind="a")
    m.observe("gbr_seconds", 0.05, route="/search")
    m.observe("gbr_seconds", 0.5, route="/search")
    text = m.render()
    assert text.endswith("\n")
    lines = text.splitlines()
    assert "# HELP gbr_things_total Things done." in lines
    assert "# TYPE gbr_things_total counter" in lines
    assert 'gbr_things_total{kind="a"} 3' in lines
    assert 'gbr_depth{actor="indexer"} 3' in lines
    assert 'gbr_seconds_bucket{route="/search",le="0.1"} 1' in lines
    assert 'gbr_seconds_bucket{route="/search",le="1"} 2' in lines
    assert 'gbr_seconds_bucket{route="/search",le="+Inf"} 2' in lines
    assert 'gbr_seconds_count{route="/search"} 2' in lines
    assert 'gbr_seconds_sum{route="/search"} 0.55' in lines


def test_label_values_are_escaped_and_a_failing_gauge_does_not_break_the_scrape() -> None:
    m = Metrics()
    m.describe("gbr_weird_total", "counter", "Odd labels.")
    m.describe("gbr_broken", "gauge", "Raises.", collect=lambda: 1 / 0)  # type: ignore[arg-type,return-value]
    m.inc("gbr_weird_total", path='a "quoted"\\path\nnext')
    text = m.render()
    assert 'gbr_weird_total{path="a \\"quoted\\"\\\\path\\nnext"} 1' in text
    assert "# TYPE gbr_broken gauge" in text


def test_recording_an_undeclared_or_mistyped_metric_is_a_bug() -> None:
    m = Metrics()
    m.describe("gbr_x_total", "counter", "X.")
    with pytest.raises(KeyError):
        m.inc("gbr_y_total")
    with pytest.raises(TypeError):
        m.observe("gbr_x_total", 1.0)
