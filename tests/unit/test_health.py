"""Readiness: the recall view follows the state topic and is within a bound of the log's end."""

from __future__ import annotations

from pipeline.runtime.health import assess_readiness, stage_of, view_lag

ENDS = {("events", 0): 10, ("events", 1): 0, ("events", 2): 5000}


def test_view_lag_counts_messages_after_the_watermark() -> None:
    lags = view_lag({("events", 0): 9, ("events", 2): 3999}, ENDS)
    # offset 9 applied of 10 messages -> caught up; no watermark on an empty partition -> 0.
    assert lags == {("events", 0): 0, ("events", 1): 0, ("events", 2): 1000}
    assert view_lag({}, {("events", 0): 3}) == {("events", 0): 3}


def test_ready_within_the_bound() -> None:
    readiness = assess_readiness(
        follower_running=True,
        follower_failure=None,
        watermarks={("events", 0): 9, ("events", 2): 3999},
        ends=ENDS,
        max_lag=1000,
    )
    assert readiness.ready and readiness.reasons == []
    assert readiness.view_lag == {"events:0": 0, "events:1": 0, "events:2": 1000}


def test_not_ready_when_behind_naming_the_partition() -> None:
    readiness = assess_readiness(
        follower_running=True,
        follower_failure=None,
        watermarks={("events", 0): 9},
        ends=ENDS,
        max_lag=1000,
    )
    assert not readiness.ready
    assert readiness.reasons == ["views are 5000 messages behind events[2] (bound 1000)"]


def test_a_failed_follower_turns_readiness_red_with_its_cause() -> None:
    readiness = assess_readiness(
        follower_running=False,
        follower_failure=ValueError("state key 'm1': invalid JSON"),
        watermarks={},
        ends={},
        max_lag=1000,
    )
    assert not readiness.ready
    assert readiness.reasons == ["recall view stopped: ValueError: state key 'm1': invalid JSON"]


def test_a_stopped_follower_or_an_unreachable_log_is_not_ready() -> None:
    stopped = assess_readiness(
        follower_running=False, follower_failure=None, watermarks={}, ends={}, max_lag=1
    )
    assert stopped.reasons == ["recall view is not following the state topic"]
    blind = assess_readiness(
        follower_running=True,
        follower_failure=None,
        watermarks={},
        ends=None,
        max_lag=1,
        ends_error="end offsets: KafkaTimeoutError",
    )
    assert blind.reasons == ["input log end offsets unavailable: end offsets: KafkaTimeoutError"]


def test_stage_names_from_consumer_groups() -> None:
    assert stage_of("hindsight-worker-prepare", "hindsight-worker") == "prepare"
    assert stage_of("hindsight-worker-sink", "hindsight-worker") == "sink"
    assert stage_of("hindsight-worker", "hindsight-worker") == "worker"
