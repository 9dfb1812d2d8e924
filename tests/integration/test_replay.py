"""Replay rebuilds the live views; a killed worker resumes to the same state (I1, I2, I4).

These tests run their own worker on their own topics, so the log holds only what they wrote.
Equality is record for record: ids, statuses, contents, importance, activation, access counts,
links and history — everything but the vector, which the snapshot leaves out.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import orjson
import pytest

from pipeline.ingest.replay import run_replay
from pipeline.interfaces.client import Hindsight, Receipt
from pipeline.models.encoders import load_encoder
from pipeline.runtime.settings import Settings
from pipeline.runtime.stack import WorkerProcess, wait_worker_ready
from schemas.memory import MemoryRecord
from topics.admin import ensure_topics
from topics.catalogue import prepared_topic

pytestmark = pytest.mark.integration

T0 = datetime(2024, 1, 1, 9, 0, tzinfo=UTC)
TOPICS = ["billing", "deploys", "the roadmap", "hiring", "the offsite", "on-call", "security"]
FACTS = [
    "We use MySQL for the {t} database.",
    "We moved from MySQL to PostgreSQL for {t}.",
    "I prefer short status updates about {t}.",
    "The fix for {t} was to restart the gateway and then clear the cache.",
    "I'm working on {t}; the deadline is next Friday.",
    "Thanks!",
    "Order SF{n:06d} for {t} was delayed by two days.",
    "I feel stressed about {t} this week.",
]


def conversation(namespace: str, turns: int) -> list[dict[str, object]]:
    rows = []
    for n in range(turns):
        template = FACTS[n % len(FACTS)]
        rows.append(
            {
                "namespace": namespace,
                "text": template.format(t=TOPICS[(n // len(FACTS)) % len(TOPICS)], n=n),
                "speaker": "alice",
                "session_id": f"s{n // 10}",
                "event_time": T0 + timedelta(hours=n),
                "event_id": f"{namespace}-turn-{n}",
            }
        )
    return rows


@pytest.fixture(scope="module")
def own_settings(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("replay-live"),
        bootstrap=kafka_bootstrap,
        topic_prefix=f"r{uuid.uuid4().hex[:8]}.",
        app_id=f"hindsight-replay-{uuid.uuid4().hex[:6]}",
        partitions=2,
    )
    asyncio.run(ensure_topics(kafka_bootstrap, settings.topic_prefix, settings.partitions, 1))
    return settings


@pytest.fixture
async def connected(own_settings: Settings) -> AsyncIterator[Hindsight]:
    async with Hindsight.connect(own_settings, encoder=load_encoder("minilm")) as client:
        yield client


async def wait_all(client: Hindsight, receipts: list[Receipt], timeout: float = 300) -> None:
    last: dict[tuple[str, int], Receipt] = {}
    for receipt in receipts:
        last[(receipt.topic, receipt.partition)] = receipt
    for receipt in last.values():
        await client.wait_applied(receipt, timeout=timeout)


def comparable(records: list[MemoryRecord]) -> dict[str, dict[str, object]]:
    return {r.id: r.model_dump(mode="json", exclude={"vector"}) for r in records}


def assert_same_state(live: list[MemoryRecord], rebuilt: list[MemoryRecord]) -> None:
    left, right = comparable(live), comparable(rebuilt)
    assert sorted(left) == sorted(right), "the same memory ids"
    different = [memory_id for memory_id in left if left[memory_id] != right[memory_id]]
    assert not different, f"{len(different)} records differ, e.g. {left[different[0]]} != " + str(
        right[different[0]]
    )


def snapshot(path: str) -> list[MemoryRecord]:
    return [
        MemoryRecord.model_validate(orjson.loads(line))
        for line in Path(path).read_bytes().splitlines()
        if line.strip()
    ]


async def test_killed_worker_resumes_to_the_state_a_full_replay_builds(
    own_settings: Settings, connected: Hindsight, tmp_path: Path
) -> None:
    namespaces = [f"crash-{uuid.uuid4().hex[:6]}" for _ in range(3)]
    worker = WorkerProcess(own_settings, log_name="worker-crash.log")
    worker.start()
    try:
        await wait_worker_ready(own_settings, worker)
        first = [row for ns in namespaces for row in conversation(ns, 40)]
        receipts = await connected.retain_many(first)
        # Kill it hard once part of the work is applied (no clean shutdown, no final commit).
        await connected.wait_applied(receipts[len(receipts) // 3], timeout=300)
        await connected.wait_applied(receipts[15], timeout=300)  # namespaces[0] has memories
        worker.kill()
        more = [row for ns in namespaces for row in conversation(ns, 60)[40:]]
        receipts += await connected.retain_many(more)
        commands = [
            await connected.forget(
                namespaces[0],
                memory_ids=[r.id for r in connected.records(namespaces[0])][:2],
                at=T0 + timedelta(days=30),
            )
        ]
        worker = WorkerProcess(own_settings, log_name="worker-crash-2.log")
        worker.start()
        await wait_all(connected, receipts + commands)
        live = [r for ns in namespaces for r in connected.records(ns)]
    finally:
        worker.stop()

    assert live, "the worker formed memories"
    ids = [r.id for r in live]
    assert len(ids) == len(set(ids)), "no memory is duplicated by the crash"
    rebuilt = await run_replay(own_settings, tmp_path / "rebuild", progress=False)
    replayed = [r for r in snapshot(rebuilt["snapshot"]) if r.namespace in namespaces]
    assert_same_state(live, replayed)
    forgotten = {r.id for r in live if r.status == "forgotten"}
    assert len(forgotten) == 2


async def test_replay_into_a_fresh_target_equals_the_live_views(
    own_settings: Settings, connected: Hindsight, tmp_path: Path
) -> None:
    worker = WorkerProcess(
        replace(own_settings, app_id=own_settings.app_id), log_name="worker-replay.log"
    )
    worker.start()
    namespace = f"replay-{uuid.uuid4().hex[:6]}"
    try:
        await wait_worker_ready(own_settings, worker)
        receipts = await connected.retain_many(conversation(namespace, 48))
        await wait_all(connected, receipts)
        hit = await connected.recall(
            namespace, "what database do we use?", at=T0 + timedelta(days=3)
        )
        assert hit.signal is not None
        tick = await connected.advance(namespace, T0 + timedelta(days=400))
        await wait_all(connected, [hit.signal, tick])
        live = connected.records(namespace)
    finally:
        worker.stop()

    assert hit.memories
    assert any(r.status == "superseded" for r in live)
    assert any(r.access_count > 0 for r in live), "the recall reinforced something"
    assert any(r.status == "cold" for r in live), "the tick cooled something"
    rebuilt = await run_replay(own_settings, tmp_path / "rebuild", progress=False)
    replayed = [r for r in snapshot(rebuilt["snapshot"]) if r.namespace == namespace]
    assert_same_state(live, replayed)
    # The sink's code filled a fresh Milvus file with exactly those records (a view, I1).
    from pipeline.ingest.sink import collection_for
    from pipeline.views.milvus import MilvusView

    with MilvusView(rebuilt["milvus"], 384, collection_for(rebuilt["target_prefix"])) as view:
        view.ensure()
        assert view.count(namespace) == len(live)
        assert {r.id for r in view.load_namespace(namespace)} == {r.id for r in live}


async def test_replay_until_answers_what_we_believed_then(
    own_settings: Settings, connected: Hindsight, tmp_path: Path
) -> None:
    worker = WorkerProcess(own_settings, log_name="worker-until.log")
    worker.start()
    namespace = f"until-{uuid.uuid4().hex[:6]}"
    try:
        await wait_worker_ready(own_settings, worker)
        first = await connected.retain(
            namespace, "We use MySQL for the billing database.", event_time=T0
        )
        second = await connected.retain(
            namespace,
            "We moved from MySQL to PostgreSQL for billing.",
            event_time=T0 + timedelta(days=10),
        )
        await wait_all(connected, [first, second])
    finally:
        worker.stop()
    assert {r.content: r.status for r in connected.records(namespace)} == {
        "We use MySQL for the billing database.": "superseded",
        "We moved from MySQL to PostgreSQL for billing.": "active",
    }
    then = await run_replay(
        own_settings, tmp_path / "then", until=T0 + timedelta(days=5), progress=False
    )
    believed = {r.content: r.status for r in snapshot(then["snapshot"]) if r.namespace == namespace}
    assert believed == {"We use MySQL for the billing database.": "active"}


async def test_reindex_prepares_into_a_topic_named_after_the_encoder(
    own_settings: Settings, connected: Hindsight, tmp_path: Path
) -> None:
    worker = WorkerProcess(own_settings, log_name="worker-reindex.log")
    worker.start()
    namespace = f"reindex-{uuid.uuid4().hex[:6]}"
    try:
        await wait_worker_ready(own_settings, worker)
        receipts = await connected.retain_many(conversation(namespace, 24))
        await wait_all(connected, receipts)
        live = connected.records(namespace)
    finally:
        worker.stop()
    rebuilt = await run_replay(own_settings, tmp_path / "reindexed", reindex=True, progress=False)
    summary = rebuilt["reindex"]
    assert summary is not None
    assert rebuilt["prepared_topic"] == summary["prepared_topic"]
    # Named after the encoder that prepared it (its id carries the backend and a weights hash).
    assert rebuilt["prepared_topic"] == prepared_topic(
        own_settings.topic_prefix, summary["encoder"]
    )
    assert summary["encoder"].startswith("all-MiniLM-L6-v2/")
    replayed = {r.id: r for r in snapshot(rebuilt["snapshot"]) if r.namespace == namespace}
    # The same model on the same texts: the same memories, statuses and contents.
    assert {r.id: (r.status, r.content) for r in live} == {
        memory_id: (r.status, r.content) for memory_id, r in replayed.items()
    }
    again = await run_replay(own_settings, tmp_path / "again", reindex=True, progress=False)
    assert again["reindex"]["events"] == 0, "a finished reindex resumes with nothing left to do"
