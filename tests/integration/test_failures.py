"""Failures are loud, and a clean stop loses nothing (issue 9: proof under faults).

- A recall view whose follower fails stops pretending: ``failure`` holds the cause and every
  ``wait_for`` raises it at once instead of timing out with "is the worker running?".
- A worker stopped with SIGTERM in the middle of an ingest drains its batch in flight (no
  "closed channel" errors), and a restarted one finishes the log: the state equals a replay.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.fleet import (
    Fleet,
    applied_offsets,
    differences,
    dumps,
    input_ends,
    live_records,
    replayed_records,
    wait_consolidated,
)
from pipeline.interfaces.client import Hindsight
from pipeline.runtime.settings import Settings
from pipeline.views.state_topic import FollowerFailed, StateFollower
from schemas.memory import MemoryRecord
from topics.admin import ensure_topics
from topics.catalogue import topic_names

pytestmark = pytest.mark.integration

T0 = datetime(2024, 7, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def own_settings(kafka_bootstrap: str, tmp_path: Path) -> Iterator[Settings]:
    run = uuid.uuid4().hex[:8]
    settings = Settings(
        data_dir=tmp_path / "data",
        bootstrap=kafka_bootstrap,
        topic_prefix=f"f{run}.",
        app_id=f"hindsight-fail-{run}",
        partitions=2,
    )
    asyncio.run(ensure_topics(kafka_bootstrap, settings.topic_prefix, settings.partitions, 1))
    yield settings


async def test_a_failed_follower_names_its_cause_instead_of_timing_out(
    own_settings: Settings,
) -> None:
    fleet = Fleet(own_settings)
    fleet.start("worker", ("prepare", "consolidate"))
    try:
        async with Hindsight.connect(own_settings) as client:
            first = await client.retain("ns-a", "My locker code is 1234.", event_time=T0)
            await client.wait_applied(first, timeout=240)

        def broken(record: MemoryRecord) -> None:
            raise RuntimeError(f"hot index rejected {record.id}")

        follower = StateFollower(
            own_settings.bootstrap or "",
            topic_names(own_settings.topic_prefix)["memory_state"],
            lambda _r: None,
            lambda _k: None,
        )
        await follower.start()
        try:
            follower._on_record = broken  # a fault injected into the running follower
            async with Hindsight.connect(own_settings) as client:
                second = await client.retain("ns-a", "My bike is blue.", event_time=T0)
            with pytest.raises(FollowerFailed, match="hot index rejected"):
                await follower.wait_for(second.topic, second.partition, second.offset, 120)
            assert not follower.running
            assert isinstance(follower.failure, RuntimeError)
            with pytest.raises(FollowerFailed):
                follower.check()
        finally:
            await follower.stop()
    finally:
        fleet.stop_all()


async def test_a_worker_stopped_mid_ingest_drains_and_its_successor_finishes(
    own_settings: Settings, tmp_path: Path
) -> None:
    fleet = Fleet(own_settings)
    fleet.start("worker-1", ("prepare", "consolidate", "sink"))
    turns = [
        {
            "namespace": f"ns-{n % 3}",
            "text": f"Note {n}: the build {n} passed on the {n % 7}th runner.",
            "event_time": T0 + timedelta(minutes=n),
            "event_id": f"stop-{n}",
        }
        for n in range(150)
    ]
    try:
        async with Hindsight.connect(own_settings) as client:
            await client.retain_many(turns)
        ends = await input_ends(own_settings)
        # Stop once part of the log is consolidated (polling offsets, with a deadline).
        for _ in range(1200):
            applied = await applied_offsets(own_settings)
            if sum(max(0, a + 1) for a in applied.values()) >= sum(ends.values()) // 3:
                break
            await asyncio.sleep(0.25)
        process = fleet.processes.pop("worker-1")
        process.stop(timeout=120)  # SIGTERM: a clean stop
        assert process.process is not None and process.process.returncode == 0, process.log_tail()
        log = process.log_path.read_text(errors="replace")
        assert "closed channel" not in log and "Traceback" not in log, process.log_tail(60)
        fleet.start("worker-2", ("prepare", "consolidate", "sink"))
        await wait_consolidated(own_settings, fleet)
        live = await live_records(own_settings)
    finally:
        fleet.stop_all()
    rebuilt, _ = await replayed_records(own_settings, tmp_path / "replay")
    problems = differences(dumps(live), dumps(rebuilt))
    assert not problems, problems[:10]
    formed = {s.event_id for r in live.values() for s in r.provenance}
    assert formed == {f"stop-{n}" for n in range(150)}, "every turn formed or confirmed a memory"
