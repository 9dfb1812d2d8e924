"""Exactness on the real engines: kill -9, rebalances and backlogs never change the state.

A ``prepare`` process runs for the module (it loads the encoder once); ``consolidate``
processes (no model, quick to start) are started, killed with SIGKILL and doubled up at points
hypothesis chooses while turns, forgets, ticks and recall signals of several namespaces are
published. Once consolidation has applied the whole log, the live state topic must equal a
replay of the prepared log record for record — vectors included — and a memory retained and at
once forgotten by query must be forgotten in both. The unit version of this property
(``tests/unit/test_exactness_property.py``) explores far more interleavings without a broker.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.fleet import (
    Fleet,
    differences,
    dumps,
    duplicate_sources,
    live_records,
    replayed_records,
    wait_consolidated,
)
from pipeline.runtime.settings import Settings
from pipeline.runtime.stack import WorkerProcess
from schemas.codec import encode
from schemas.events import CommandIssued, MemoriesRecalled, RecallHit, TurnRecorded
from topics.admin import ensure_topics
from topics.catalogue import topic_names

pytestmark = pytest.mark.integration

T0 = datetime(2024, 6, 1, 9, 0, tzinfo=UTC)
EXAMPLES = int(os.environ.get("HINDSIGHT_EXACTNESS_EXAMPLES", "4"))
TEXTS = (
    "We use MySQL for the billing database.",
    "We moved from MySQL to PostgreSQL for billing.",
    "I prefer dark mode in every editor.",
    "The fix was to restart the gateway and then clear the cache.",
    "From now on all code in TypeScript.",
    "I'm working on the roadmap; the deadline is Friday.",
    "thanks!",
    "我们用 MySQL 做计费数据库。",
)
# A fact and the words a user would use to forget it, right after saying it.
SECRETS = (
    ("My locker code is {n}.", "my locker code"),
    ("My bank PIN hint is the name of my first cat, {n}.", "bank PIN hint"),
    ("我的门禁密码是{n}。", "门禁密码"),
)


@dataclass(frozen=True)
class Action:
    kind: str  # publish | kill | add | retain_forget


actions = st.lists(
    st.sampled_from(
        [Action("publish")] * 4 + [Action("kill"), Action("add"), Action("retain_forget")]
    ),
    min_size=3,
    max_size=10,
)


@pytest.fixture(scope="module")
def deployment(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Settings]:
    run = uuid.uuid4().hex[:8]
    live = Settings(
        data_dir=tmp_path_factory.mktemp("exactness"),
        bootstrap=kafka_bootstrap,
        topic_prefix=f"ex{run}.",
        app_id=f"hindsight-exact-{run}",
        partitions=3,
        session_timeout_s=6.0,
    )
    asyncio.run(ensure_topics(kafka_bootstrap, live.topic_prefix, live.partitions, 1))
    prepare = WorkerProcess(live, log_name="prepare.log", stages=("prepare",))
    prepare.start()
    try:
        yield live
    finally:
        prepare.stop()


class Publisher:
    def __init__(self, settings: Settings, tag: str) -> None:
        self.settings = settings
        self.tag = tag
        self.count = 0
        self.namespaces = [f"{tag}-{i}" for i in range(4)]
        self.forgotten: list[tuple[str, str]] = []  # (namespace, text) retained then forgotten

    def _next(self) -> tuple[str, datetime]:
        self.count += 1
        return f"{self.tag}-e{self.count}", T0 + timedelta(minutes=self.count)

    def batch(self, size: int) -> list[tuple[str, bytes]]:
        events: list[tuple[str, bytes]] = []
        for step in range(size):
            namespace = self.namespaces[(self.count + step) % len(self.namespaces)]
            event_id, at = self._next()
            if self.count % 9 == 0:
                event = CommandIssued(
                    event_id=event_id,
                    namespace=namespace,
                    event_time=at + timedelta(days=40),
                    command="tick",
                )
            elif self.count % 7 == 0:
                event = MemoriesRecalled(
                    event_id=event_id,
                    namespace=namespace,
                    event_time=at,
                    hits=[RecallHit(memory_id="m_unknown", rank=0, score=0.5)],
                )
            else:
                event = TurnRecorded(
                    event_id=event_id,
                    namespace=namespace,
                    event_time=at,
                    session_id=f"s{self.count // 5}",
                    speaker="alice",
                    text=TEXTS[self.count % len(TEXTS)],
                )
            events.append((namespace, encode(event)))
        return events

    def retain_then_forget(self) -> list[tuple[str, bytes]]:
        namespace = self.namespaces[self.count % len(self.namespaces)]
        template, query = SECRETS[self.count % len(SECRETS)]
        text = template.format(n=4000 + self.count)
        event_id, at = self._next()
        turn = TurnRecorded(
            event_id=event_id,
            namespace=namespace,
            event_time=at,
            session_id="secrets",
            speaker="alice",
            text=text,
        )
        command_id, _ = self._next()
        forget = CommandIssued(
            event_id=command_id, namespace=namespace, event_time=at, command="forget", query=query
        )
        self.forgotten.append((namespace, text))
        return [(namespace, encode(turn)), (namespace, encode(forget))]


async def publish(producer: AIOKafkaProducer, topic: str, events: list[tuple[str, bytes]]) -> None:
    futures = [await producer.send(topic, key=ns.encode(), value=value) for ns, value in events]
    await asyncio.gather(*futures)


async def run_program(live: Settings, program: list[Action], tmp: Path) -> None:
    tag = f"p{uuid.uuid4().hex[:6]}"
    fleet = Fleet(live)
    publisher = Publisher(live, tag)
    topic = topic_names(live.topic_prefix)["events"]
    producer = AIOKafkaProducer(
        bootstrap_servers=live.bootstrap, acks="all", enable_idempotence=True
    )
    await producer.start()
    number = 0
    try:
        fleet.start(f"{tag}-c{number}", ("consolidate",))
        for action in program:
            if action.kind == "publish":
                await publish(producer, topic, publisher.batch(12))
            elif action.kind == "retain_forget":
                # Behind whatever backlog is there: no wait between the retain and the forget.
                await publish(producer, topic, publisher.retain_then_forget())
            elif action.kind == "kill" and fleet.processes:
                fleet.kill(sorted(fleet.processes)[0])
                number += 1
                fleet.start(f"{tag}-c{number}", ("consolidate",))
            elif action.kind == "add" and len(fleet.processes) < 3:
                number += 1
                fleet.start(f"{tag}-c{number}", ("consolidate",))  # a rebalance
        await publish(producer, topic, publisher.retain_then_forget())
        await wait_consolidated(live, fleet)
    finally:
        await producer.stop()
        fleet.stop_all()

    live_state = await live_records(live)
    rebuilt, _ = await replayed_records(live, tmp / tag)
    ours = publisher.namespaces
    problems = differences(dumps(live_state, ours), dumps(rebuilt, ours))
    assert not problems, "\n".join(problems[:20])
    assert duplicate_sources({k: v for k, v in live_state.items() if v.namespace in ours}) == 0
    for namespace, text in publisher.forgotten:
        statuses = [
            r.status for r in live_state.values() if r.namespace == namespace and r.content == text
        ]
        assert statuses == ["forgotten"], (namespace, text, statuses)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(program=actions)
def test_live_state_equals_replay_whatever_is_killed_or_added(
    deployment: Settings, tmp_path: Path, program: list[Action]
) -> None:
    asyncio.run(run_program(deployment, program, tmp_path))


async def test_a_rebalance_hands_partitions_over_without_loss_or_duplicates(
    deployment: Settings, tmp_path: Path
) -> None:
    """Two consolidate workers share the partitions; one is killed mid-way; the other takes all."""
    await run_program(
        deployment,
        [Action("add"), Action("publish"), Action("publish"), Action("kill"), Action("publish")],
        tmp_path,
    )
