"""Counters, gauges and histograms for `GET /metrics`, in the Prometheus text format.

A handful of families does not need `prometheus_client`: each family is a name, a type, a
help line and a map from label values to numbers, and `render` writes the text format
(version 0.0.4) with its `# HELP` and `# TYPE` lines. Gauges that mirror the index (files,
chunks) are read when scraped, through callbacks, so they are never out of date.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

Kind = Literal["counter", "gauge", "histogram"]
Labels = tuple[tuple[str, str], ...]
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# Seconds: from a 5 ms search to a minutes-long full pass.
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 120.0)


@dataclass
class _Histogram:
    buckets: tuple[float, ...]
    counts: list[int]
    total: float = 0.0
    count: int = 0


@dataclass
class _Family:
    name: str
    kind: Kind
    help: str
    buckets: tuple[float, ...] = DEFAULT_BUCKETS
    values: dict[Labels, float] = field(default_factory=dict)
    histograms: dict[Labels, _Histogram] = field(default_factory=dict)
    collect: Callable[[], Iterable[tuple[Mapping[str, str], float]]] | None = None


class Metrics:
    """Thread-safe: actors, request threads and the event loop all record here."""

    def __init__(self) -> None:
        self._families: dict[str, _Family] = {}
        self._lock = threading.Lock()

    def describe(
        self,
        name: str,
        kind: Kind,
        help: str,
        *,
        collect: Callable[[], Iterable[tuple[Mapping[str, str], float]]] | None = None,
        buckets: tuple[float, ...] = DEFAULT_BUCKETS,
    ) -> None:
        """Declare a family; `collect` computes a gauge's samples at scrape time."""
        self._families[name] = _Family(name, kind, help, buckets, collect=collect)

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        key = _key(labels)
        with self._lock:
            family = self._family(name, "counter")
            family.values[key] = family.values.get(key, 0.0) + amount

    def observe(self, name: str, value: float, **labels: str) -> None:
        key = _key(labels)
        with self._lock:
            family = self._family(name, "histogram")
            hist = family.histograms.get(key)
            if hist is None:
                hist = _Histogram(family.buckets, [0] * len(family.buckets))
                family.histograms[key] = hist
            for i, bound in enumerate(hist.buckets):
                if value <= bound:
                    hist.counts[i] += 1
            hist.total += value
            hist.count += 1

    def render(self) -> str:
        """The whole exposition, families in name order."""
        with self._lock:
            families = sorted(self._families.values(), key=lambda f: f.name)
            snapshot = [
                (f, dict(f.values), {k: _copy(h) for k, h in f.histograms.items()})
                for f in families
            ]
        lines: list[str] = []
        for family, values, histograms in snapshot:
            if family.collect is not None:
                try:
                    values = {_key(labels): v for labels, v in family.collect()}
                except Exception:  # a scrape must not fail because one gauge could not be read
                    values = {}
            lines.append(f"# HELP {family.name} {_escape_help(family.help)}")
            lines.append(f"# TYPE {family.name} {family.kind}")
            if family.kind == "histogram":
                for key, hist in sorted(histograms.items()):
                    lines.extend(_histogram_lines(family.name, key, hist))
                continue
            for key, value in sorted(values.items()):
                lines.append(f"{family.name}{_labels(key)} {_number(value)}")
        return "\n".join(lines) + "\n"

    def _family(self, name: str, kind: Kind) -> _Family:
        family = self._families.get(name)
        if family is None:
            raise KeyError(f"metric {name} was not described")
        if family.kind != kind:
            raise TypeError(f"metric {name} is a {family.kind}, not a {kind}")
        return family


def _key(labels: Mapping[str, str]) -> Labels:
    return tuple(sorted((k, str(v)) for k, v in labels.items()))


def _copy(hist: _Histogram) -> _Histogram:
    return _Histogram(hist.buckets, list(hist.counts), hist.total, hist.count)


def _histogram_lines(name: str, key: Labels, hist: _Histogram) -> list[str]:
    lines = []
    for bound, count in zip(hist.buckets, hist.counts, strict=True):
        lines.append(f"{name}_bucket{_labels((*key, ('le', _number(bound))))} {count}")
    lines.append(f"{name}_bucket{_labels((*key, ('le', '+Inf')))} {hist.count}")
    lines.append(f"{name}_sum{_labels(key)} {_number(hist.total)}")
    lines.append(f"{name}_count{_labels(key)} {hist.count}")
    return lines


def _labels(key: Labels) -> str:
    if not key:
        return ""
    return "{" + ",".join(f'{k}="{_escape_value(v)}"' for k, v in key) + "}"


def _escape_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))
