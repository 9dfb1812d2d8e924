"""The `hindsight up` ticker's schedule: which namespaces get a tick, and when they stop."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pipeline.runtime.up import TickSchedule

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def test_a_namespace_is_ticked_until_a_tick_lands_past_its_idle_threshold() -> None:
    schedule = TickSchedule(idle_seconds=300)
    schedule.observe("alice", T0)
    assert schedule.due(T0 + timedelta(seconds=60)) == ["alice"]
    assert schedule.due(T0 + timedelta(seconds=120)) == ["alice"]
    # This tick is the one that lets idle consolidation fire; then the namespace is quiet.
    assert schedule.due(T0 + timedelta(seconds=300)) == ["alice"]
    assert schedule.due(T0 + timedelta(seconds=360)) == []


def test_new_turns_restart_the_schedule_and_namespaces_are_independent() -> None:
    schedule = TickSchedule(idle_seconds=300)
    schedule.observe("alice", T0)
    schedule.observe("bob", T0 + timedelta(seconds=200))
    assert schedule.due(T0 + timedelta(seconds=300)) == ["alice", "bob"]
    assert schedule.due(T0 + timedelta(seconds=400)) == ["bob"]
    schedule.observe("alice", T0 + timedelta(seconds=410))
    assert schedule.due(T0 + timedelta(seconds=500)) == ["alice", "bob"]


def test_never_ticks_at_or_before_the_latest_turn() -> None:
    schedule = TickSchedule(idle_seconds=300)
    schedule.observe("alice", T0 + timedelta(hours=1))  # a future-dated turn
    schedule.observe("alice", T0)  # an older one arriving late does not move time back
    assert schedule.due(T0 + timedelta(minutes=30)) == []
    assert schedule.due(T0 + timedelta(hours=1, seconds=1)) == ["alice"]
