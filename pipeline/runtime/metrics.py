"""Prometheus metrics: every metric Hindsight exports, defined once, with their labels.

Each process (the API, each worker stage) exports its own ``/metrics``; Prometheus adds ``job``
and ``instance``. The API serves it as a route; a worker process calls ``serve_metrics(host,
port)`` once. Code records through ``metrics()``, the process's one ``Metrics`` (bound to the
process's one registry, ``registry()``); tests build a ``Metrics(CollectorRegistry())`` of their
own.

Label values stay few: stages, topics, partitions, consumer groups, routes, reasons made of an
error stage and a field name. Namespaces are the exception, so ``hindsight_namespace_memories``
exports only the ``NAMESPACE_SERIES`` largest namespaces (``hindsight_namespaces`` counts all).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Protocol
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

NAMESPACE_SERIES = 50

# Seconds. Freshness spans a fast local stack (tens of ms) to a worker that is catching up.
FRESHNESS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 1800.0)
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
BATCH_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class RecordSource(Protocol):
    """What the memory gauges read: the recall view (``HotIndex``) satisfies it."""

    def __len__(self) -> int: ...

    def namespace_sizes(self) -> dict[str, int]: ...


class _ViewCollector(Collector):
    """Hot index size and memories per namespace, read from the bound view at scrape time."""

    def __init__(self) -> None:
        self._source: Callable[[], RecordSource | None] = lambda: None
        self._following: Callable[[], bool] = lambda: False

    def bind(self, source: RecordSource, following: Callable[[], bool]) -> None:
        # A weak reference: a test that drops its index does not keep it alive through metrics.
        self._source = weakref.ref(source)  # type: ignore[assignment]
        self._following = following

    def describe(self) -> Iterable[Metric]:
        # Declared up front so registration checks names without calling collect().
        yield GaugeMetricFamily("hindsight_hot_index_memories", "")
        yield GaugeMetricFamily("hindsight_namespaces", "")
        yield GaugeMetricFamily("hindsight_namespace_memories", "", labels=["namespace"])
        yield GaugeMetricFamily("hindsight_view_following", "")

    def collect(self) -> Iterator[Metric]:
        source = self._source()
        if source is None:
            return
        yield GaugeMetricFamily(
            "hindsight_view_following",
            "1 while the recall view follows the state topic; 0 once its follower stopped.",
            value=1 if self._following() else 0,
        )
        sizes = source.namespace_sizes()
        yield GaugeMetricFamily(
            "hindsight_hot_index_memories",
            "Memories held by this process's recall view (every status).",
            value=len(source),
        )
        yield GaugeMetricFamily(
            "hindsight_namespaces", "Namespaces with at least one memory.", value=len(sizes)
        )
        largest = GaugeMetricFamily(
            "hindsight_namespace_memories",
            f"Memories per namespace (the {NAMESPACE_SERIES} largest namespaces only).",
            labels=["namespace"],
        )
        for namespace, count in sorted(sizes.items(), key=lambda item: (-item[1], item[0]))[
            :NAMESPACE_SERIES
        ]:
            largest.add_metric([namespace], count)
        yield largest


class Metrics:
    """Every metric object, registered on one registry."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        # -- ingest stages (prepare, consolidate, sink; today's single worker reports "worker") --
        self.events_in = Counter(
            "hindsight_events_in",
            "Input events a stage consumed.",
            ["stage", "event_type"],
            registry=registry,
        )
        self.events_out = Counter(
            "hindsight_events_out",
            "Records a stage produced, by destination topic.",
            ["stage", "topic"],
            registry=registry,
        )
        self.dead_letters = Counter(
            "hindsight_dead_letters",
            "Inputs sent to the dead-letter topic; reason = error stage and field.",
            ["stage", "reason"],
            registry=registry,
        )
        self.batch_seconds = Histogram(
            "hindsight_batch_seconds",
            "Wall time to process one batch, read to commit.",
            ["stage"],
            buckets=BATCH_BUCKETS,
            registry=registry,
        )
        self.encode_seconds = Histogram(
            "hindsight_encode_seconds",
            "Wall time of one encoder call over a batch of texts.",
            ["encoder"],
            buckets=BATCH_BUCKETS,
            registry=registry,
        )
        self.consumer_lag = Gauge(
            "hindsight_consumer_lag",
            "Messages between a group's committed offset and the partition's end.",
            ["group", "topic", "partition"],
            registry=registry,
        )
        # -- views and recall (the API process) --
        self.view_lag = Gauge(
            "hindsight_view_lag",
            "Input messages not yet covered by the recall view's watermark.",
            ["topic", "partition"],
            registry=registry,
        )
        self.freshness_seconds = Histogram(
            "hindsight_freshness_seconds",
            "Turn to recallable: input event's broker timestamp to the recall view applying it.",
            buckets=FRESHNESS_BUCKETS,
            registry=registry,
        )
        self.recall_seconds = Histogram(
            "hindsight_recall_seconds",
            "Recall latency (after any read-your-writes wait), by route.",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        )
        self.ready = Gauge(
            "hindsight_ready",
            "1 when the last readiness check passed, else 0.",
            registry=registry,
        )
        self.republished = Counter(
            "hindsight_dead_letters_republished",
            "Dead letters re-published to the input log after a fix.",
            registry=registry,
        )
        self._views = _ViewCollector()
        registry.register(self._views)

    def bind_view(self, source: RecordSource, following: Callable[[], bool]) -> None:
        """Export the size of ``source`` and whether it follows (the latest bound view wins)."""
        self._views.bind(source, following)

    def set_consumer_lag(self, lags: Iterable[tuple[str, str, int, int]]) -> None:
        """Replace every lag series with ``(group, topic, partition, lag)`` rows."""
        self.consumer_lag.clear()
        for group, topic, partition, lag in lags:
            self.consumer_lag.labels(group, topic, str(partition)).set(lag)

    def set_view_lag(self, lags: Iterable[tuple[str, int, int]]) -> None:
        self.view_lag.clear()
        for topic, partition, lag in lags:
            self.view_lag.labels(topic, str(partition)).set(lag)


def dead_letter_reason(error_stage: str, field: str | None) -> str:
    """A low-cardinality reason label: ``validate:text``, ``decode:event``."""
    return f"{error_stage}:{field or 'event'}"


_lock = threading.Lock()
_registry: CollectorRegistry | None = None
_metrics: Metrics | None = None


def registry() -> CollectorRegistry:
    """The process's registry (created on first use, never at import time)."""
    global _registry
    with _lock:
        if _registry is None:
            _registry = CollectorRegistry(auto_describe=True)
        return _registry


def metrics() -> Metrics:
    """The process's metrics, on ``registry()``."""
    global _metrics
    reg = registry()
    with _lock:
        if _metrics is None:
            _metrics = Metrics(reg)
        return _metrics


def render(reg: CollectorRegistry | None = None) -> tuple[bytes, str]:
    """The text exposition format and its content type (for an HTTP route)."""
    return generate_latest(reg or registry()), CONTENT_TYPE_LATEST


@dataclass(frozen=True)
class MetricsServer:
    """A running ``/metrics`` endpoint in a daemon thread; ``close()`` stops it."""

    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def serve_metrics(host: str, port: int) -> MetricsServer:
    """Serve this process's metrics on ``http://host:port/metrics`` (port 0: any free port).

    For worker processes, which have no HTTP server of their own; call once at start-up.
    """
    metrics()  # the metric families exist (at zero) before the first scrape
    server, thread = start_http_server(port, addr=host, registry=registry())
    return MetricsServer(server, thread)
