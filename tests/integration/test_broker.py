"""The broker and topic administration on a real Kafka: the ground every other test stands on."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient

from infra.broker import LocalKafka, LocalKafkaCluster
from topics.admin import delete_topics, describe_topic_configs, ensure_topics, list_topics
from topics.catalogue import TOPICS

pytestmark = pytest.mark.integration

CONSUME_TIMEOUT_S = 30.0


def _producer(bootstrap: str) -> AIOKafkaProducer:
    # The settings invariant I8 asks of every producer in the pipeline.
    return AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        acks="all",
        enable_idempotence=True,
        request_timeout_ms=30_000,
    )


async def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = _producer(bootstrap)
    await producer.start()
    try:
        for value in values:
            # Keyed like the pipeline (by namespace); the key spreads messages over partitions.
            await producer.send_and_wait(topic, value, key=value[-1:])
    finally:
        await producer.stop()


async def _read_all(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    """Read every partition from the beginning (no group) until ``expected`` values arrived."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        partitions = consumer.partitions_for_topic(topic)
        while not partitions:  # metadata for a fresh topic can lag a moment
            await consumer._client.force_metadata_update()
            partitions = consumer.partitions_for_topic(topic)
        consumer.assign([TopicPartition(topic, p) for p in sorted(partitions)])
        await consumer.seek_to_beginning()
        values: list[bytes] = []
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while len(values) < expected and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            values += [m.value for msgs in batches.values() for m in msgs if m.value is not None]
        return values
    finally:
        await consumer.stop()


async def test_produce_consume_roundtrip_with_a_group(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    await ensure_topics(kafka_bootstrap, prefix=topic_prefix, partitions=2)
    topic = TOPICS["events"].name(topic_prefix)
    sent = [f"turn-{i}".encode() for i in range(20)]
    await _produce(kafka_bootstrap, topic, sent)

    # A consumer group exercises the group coordinator and the offsets topic (RF 1 on one node).
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=f"{topic_prefix}group",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        received: list[bytes] = []
        deadline = time.monotonic() + CONSUME_TIMEOUT_S
        while len(received) < len(sent) and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            received += [m.value for msgs in batches.values() for m in msgs if m.value is not None]
        await consumer.commit()
    finally:
        await consumer.stop()
    assert sorted(received) == sorted(sent)


async def test_ensure_topics_creates_the_catalogue_and_is_idempotent(
    kafka_bootstrap: str, topic_prefix: str
) -> None:
    await ensure_topics(kafka_bootstrap, prefix=topic_prefix)
    await ensure_topics(kafka_bootstrap, prefix=topic_prefix)  # existing topics are fine

    present = set(await list_topics(kafka_bootstrap))
    for spec in TOPICS.values():
        name = spec.name(topic_prefix)
        assert name in present
        configs = await describe_topic_configs(kafka_bootstrap, name)
        assert configs["cleanup.policy"] == spec.cleanup_policy, name
        assert configs["retention.ms"] == str(spec.retention_ms), name
    state = await describe_topic_configs(kafka_bootstrap, TOPICS["memory_state"].name(topic_prefix))
    assert state["cleanup.policy"] == "compact"

    admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    await admin.start()
    try:
        described = await admin.describe_topics([TOPICS["events"].name(topic_prefix)])
    finally:
        await admin.close()
    assert len(described[0]["partitions"]) == 4

    names = [spec.name(topic_prefix) for spec in TOPICS.values()]
    await delete_topics(kafka_bootstrap, names)
    assert not set(names) & set(await list_topics(kafka_bootstrap))


async def test_local_kafka_restart_keeps_messages(tmp_path: Path) -> None:
    data_dir = tmp_path / "kafka"
    sent = [f"kept-{i}".encode() for i in range(10)]
    topic = TOPICS["events"].name("restart.")

    kafka = LocalKafka(data_dir)
    await asyncio.to_thread(kafka.start)
    try:
        port = kafka.bootstrap
        await ensure_topics(kafka.bootstrap, prefix="restart.", partitions=2)
        await _produce(kafka.bootstrap, topic, sent)
    finally:
        await asyncio.to_thread(kafka.stop)
    assert not kafka.running

    again = LocalKafka(data_dir)  # a new object: only the data dir carries state
    await asyncio.to_thread(again.start)
    try:
        assert again.bootstrap == port  # the last port is reused when free
        assert sorted(await _read_all(again.bootstrap, topic, len(sent))) == sorted(sent)
    finally:
        await asyncio.to_thread(again.stop)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafkaCluster]:
    with LocalKafkaCluster(tmp_path_factory.mktemp("cluster"), brokers=3) as started:
        yield started


async def test_three_brokers_survive_one_crash(cluster: LocalKafkaCluster) -> None:
    bootstrap = cluster.bootstrap
    prefix = "rf3."
    await ensure_topics(bootstrap, prefix=prefix, partitions=2, replication_factor=3)
    topic = TOPICS["events"].name(prefix)
    assert (await describe_topic_configs(bootstrap, topic))["min.insync.replicas"] == "2"

    before = [f"before-{i}".encode() for i in range(10)]
    await _produce(bootstrap, topic, before)

    # Crash the leader of partition 0, the node whose loss forces a leader election.
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap)
    await admin.start()
    try:
        leader = (await admin.describe_topics([topic]))[0]["partitions"][0]["leader"]
    finally:
        await admin.close()
    victim = leader - 1  # node ids are index + 1
    cluster.kill(victim)
    assert not cluster.running(victim)
    survivors = ",".join(cluster.node_bootstrap(i) for i in range(3) if i != victim)

    # Two of three replicas remain in sync, so acks=all writes succeed with min.insync.replicas=2.
    after = [f"after-{i}".encode() for i in range(10)]
    await asyncio.wait_for(_produce(survivors, topic, after), timeout=60)

    received = await _read_all(survivors, topic, len(before) + len(after))
    assert sorted(received) == sorted(before + after)  # nothing lost, nothing duplicated

    await asyncio.to_thread(cluster.restart, victim)
    assert cluster.running(victim)
