"""The metrics module: names and labels, the view gauges, the worker's /metrics endpoint."""

from __future__ import annotations

import logging
import urllib.request

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from pipeline.runtime.metrics import (
    NAMESPACE_SERIES,
    Metrics,
    dead_letter_reason,
    metrics,
    serve_metrics,
)
from pipeline.runtime.quiet import quiet_known_transients


class _View:
    def __init__(self, sizes: dict[str, int]) -> None:
        self.sizes = sizes

    def __len__(self) -> int:
        return sum(self.sizes.values())

    def namespace_sizes(self) -> dict[str, int]:
        return dict(self.sizes)


def _text(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode()


def test_stage_metrics_have_the_documented_names_and_labels() -> None:
    registry = CollectorRegistry()
    m = Metrics(registry)
    m.events_in.labels("prepare", "TurnRecorded").inc(3)
    m.events_out.labels("consolidate", "hindsight.memory-state.v1").inc()
    m.dead_letters.labels("prepare", dead_letter_reason("validate", "text")).inc()
    m.batch_seconds.labels("sink").observe(0.02)
    m.encode_seconds.labels("all-MiniLM-L6-v2").observe(0.3)
    m.recall_seconds.labels("semantic").observe(0.004)
    m.freshness_seconds.observe(0.4)
    text = _text(registry)
    assert 'hindsight_events_in_total{event_type="TurnRecorded",stage="prepare"} 3.0' in text
    assert 'hindsight_dead_letters_total{reason="validate:text",stage="prepare"} 1.0' in text
    assert 'hindsight_batch_seconds_bucket{le="0.025",stage="sink"} 1.0' in text
    assert 'hindsight_recall_seconds_count{route="semantic"} 1.0' in text
    assert 'hindsight_freshness_seconds_bucket{le="0.5"} 1.0' in text
    assert dead_letter_reason("decode", None) == "decode:event"


def test_lag_gauges_are_replaced_not_accumulated() -> None:
    registry = CollectorRegistry()
    m = Metrics(registry)
    m.set_consumer_lag([("app-prepare", "events", 0, 5), ("app-sink", "state", 1, 2)])
    m.set_consumer_lag([("app-prepare", "events", 0, 0)])
    text = _text(registry)
    assert 'hindsight_consumer_lag{group="app-prepare",partition="0",topic="events"} 0.0' in text
    assert "app-sink" not in text


def test_view_gauges_read_the_bound_view_and_cap_namespace_series() -> None:
    registry = CollectorRegistry()
    m = Metrics(registry)
    assert "hindsight_hot_index_memories " not in _text(registry)  # nothing bound yet
    sizes = {f"ns{i:03d}": i + 1 for i in range(NAMESPACE_SERIES + 10)}
    view = _View(sizes)
    following = {"value": True}
    m.bind_view(view, lambda: following["value"])
    text = _text(registry)
    assert f"hindsight_hot_index_memories {float(sum(sizes.values()))}" in text
    assert f"hindsight_namespaces {float(len(sizes))}" in text
    assert text.count("hindsight_namespace_memories{") == NAMESPACE_SERIES
    largest = f"ns{NAMESPACE_SERIES + 9:03d}"
    assert f'hindsight_namespace_memories{{namespace="{largest}"}}' in text
    assert 'hindsight_namespace_memories{namespace="ns000"}' not in text  # the smallest is cut
    assert "hindsight_view_following 1.0" in text
    following["value"] = False
    assert "hindsight_view_following 0.0" in _text(registry)


def test_serve_metrics_exposes_the_process_registry_on_loopback() -> None:
    metrics().events_in.labels("prepare", "CommandIssued").inc()
    served = serve_metrics("127.0.0.1", 0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{served.port}/metrics", timeout=5) as r:
            body = r.read().decode()
    finally:
        served.close()
    assert 'hindsight_events_in_total{event_type="CommandIssued",stage="prepare"}' in body
    assert "# HELP hindsight_consumer_lag" in body


LEADER = "app-__assignor-__leader"  # Faust's assignor topic, created just after subscribing
NOT_FOUND = "Topic %s not found in cluster metadata"


@pytest.mark.parametrize(
    ("logger", "message", "arg", "demoted"),
    [
        ("aiokafka.cluster", NOT_FOUND, LEADER, True),
        ("aiokafka.cluster", NOT_FOUND, "hindsight.events.v1", False),
        ("faust.assignor.partition_assignor", "Ignoring missing topic: %r", LEADER, True),
    ],
)
def test_known_transients_are_demoted_to_debug(
    caplog: pytest.LogCaptureFixture, logger: str, message: str, arg: str, demoted: bool
) -> None:
    quiet_known_transients()
    quiet_known_transients()  # idempotent: one filter per logger
    assert sum(type(f).__name__ == "_Demote" for f in logging.getLogger(logger).filters) == 1
    with caplog.at_level(logging.DEBUG, logger=logger):
        logging.getLogger(logger).error(message, arg)
    [record] = caplog.records
    assert record.levelname == ("DEBUG" if demoted else "ERROR")
