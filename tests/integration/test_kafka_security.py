"""SASL/SCRAM and ACLs on a real broker (``LocalKafka(security="scram")``), through the one
settings helper every client uses (``pipeline.runtime.kafka.client_kwargs``)."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError, TopicAuthorizationFailedError

from infra.broker import CREDENTIALS_FILE, LocalKafka, LocalKafkaCluster
from pipeline.runtime.kafka import client_kwargs
from pipeline.runtime.settings import KafkaSecurity
from pipeline.views.state_topic import make_producer
from topics.acls import ADMIN_USER, CLIENT_USER, SERVICE_USER, acl_rules
from topics.admin import ensure_topics
from topics.catalogue import topic_names

pytestmark = pytest.mark.integration

APP_ID = "hindsight-worker"
NAMES = topic_names("")
DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafka]:
    with LocalKafka(tmp_path_factory.mktemp("scram"), security="scram") as kafka:
        admin = _security(kafka, ADMIN_USER)
        asyncio.run(ensure_topics(kafka.bootstrap, "", 2, 1, security=admin))
        kafka.apply_acls(acl_rules("", APP_ID))
        yield kafka


def _security(
    kafka: LocalKafka | LocalKafkaCluster, user: str, password: str | None = None
) -> KafkaSecurity:
    credentials = kafka.credentials or {}
    return KafkaSecurity(
        protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_username=user,
        sasl_password=password or credentials[user],
    )


async def _produce(bootstrap: str, topic: str, security: KafkaSecurity | None) -> int:
    producer = make_producer(bootstrap, "security-test", security)
    await asyncio.wait_for(producer.start(), DEADLINE_S)
    try:
        meta = await asyncio.wait_for(producer.send_and_wait(topic, b"{}", key=b"ns"), DEADLINE_S)
        return int(meta.offset)
    finally:
        await producer.stop()


async def _read_one(
    bootstrap: str, topic: str, security: KafkaSecurity, wait_s: float = DEADLINE_S
) -> bytes | None:
    consumer = AIOKafkaConsumer(
        **client_kwargs(security),
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in (0, 1)]
        consumer.assign(partitions)
        await consumer.seek_to_beginning(*partitions)
        deadline = asyncio.get_running_loop().time() + wait_s
        while asyncio.get_running_loop().time() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for messages in batches.values():
                if messages:
                    return messages[0].value
        return None
    finally:
        await consumer.stop()


def test_credentials_are_owner_only(secured: LocalKafka) -> None:
    path = secured.data_dir / CREDENTIALS_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((secured.data_dir / "server.properties").stat().st_mode) == 0o600
    assert set(secured.credentials or {}) >= {ADMIN_USER, SERVICE_USER, CLIENT_USER}


async def test_an_unauthenticated_producer_is_refused(secured: LocalKafka) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=secured.bootstrap, request_timeout_ms=5000)
    with pytest.raises(KafkaError):
        await asyncio.wait_for(producer.start(), DEADLINE_S)
    await producer.stop()


async def test_a_wrong_password_is_refused(secured: LocalKafka) -> None:
    wrong = _security(secured, CLIENT_USER, password="not-the-password")
    with pytest.raises(KafkaError):
        await _produce(secured.bootstrap, NAMES["events"], wrong)


async def test_the_client_principal_may_only_produce_to_the_input_topics(
    secured: LocalKafka,
) -> None:
    client = _security(secured, CLIENT_USER)
    admin = _security(secured, ADMIN_USER)
    assert await _produce(secured.bootstrap, NAMES["events"], client) >= 0
    for derived in ("prepared", "memory_state", "memory_updates", "extractions", "keys"):
        with pytest.raises(TopicAuthorizationFailedError):
            await _produce(secured.bootstrap, NAMES[derived], client)  # type: ignore[index]
    # Reading: the topics hold data (the admin reads it back), the client gets none of it.
    # Without Describe (state) the topic has no partitions for it, so nothing arrives; with
    # Describe but no Read (the input log) the fetch is refused.
    assert await _produce(secured.bootstrap, NAMES["memory_state"], admin) >= 0
    for role in ("memory_state", "events"):
        topic = NAMES[role]  # type: ignore[index]
        assert await _read_one(secured.bootstrap, topic, admin) is not None
        try:
            leaked = await _read_one(secured.bootstrap, topic, client, wait_s=8)
        except TopicAuthorizationFailedError:
            leaked = None
        assert leaked is None, role


async def test_the_service_principal_reads_input_writes_views_and_only_reads_keys(
    secured: LocalKafka,
) -> None:
    service = _security(secured, SERVICE_USER)
    admin = _security(secured, ADMIN_USER)
    assert await _produce(secured.bootstrap, NAMES["memory_state"], service) >= 0
    assert await _produce(secured.bootstrap, NAMES["prepared"], service) >= 0
    assert await _produce(secured.bootstrap, NAMES["events"], service) >= 0
    assert await _read_one(secured.bootstrap, NAMES["events"], service) is not None
    # Keys: written by the admin only; the service follows them.
    assert await _produce(secured.bootstrap, NAMES["keys"], admin) >= 0
    with pytest.raises(TopicAuthorizationFailedError):
        await _produce(secured.bootstrap, NAMES["keys"], service)
    assert await _read_one(secured.bootstrap, NAMES["keys"], service) is not None


def test_a_restart_keeps_the_users_and_the_acls(secured: LocalKafka) -> None:
    before = secured.credentials
    secured.stop()
    secured.start()
    assert secured.credentials == before
    client = _security(secured, CLIENT_USER)
    assert asyncio.run(_produce(secured.bootstrap, NAMES["events"], client)) >= 0
    with pytest.raises(TopicAuthorizationFailedError):
        asyncio.run(_produce(secured.bootstrap, NAMES["memory_state"], client))


def test_settings_refuse_incomplete_sasl(tmp_path: Path) -> None:
    from pipeline.runtime.settings import SettingsError

    with pytest.raises(SettingsError, match="HINDSIGHT_KAFKA_SASL_PASSWORD"):
        KafkaSecurity(protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512", sasl_username="u")


def test_a_three_node_cluster_runs_scram_between_brokers(tmp_path: Path) -> None:
    """Inter-broker replication over SCRAM (RF 3, acks=all), controllers over PLAIN."""
    with LocalKafkaCluster(tmp_path / "cluster", security="scram") as cluster:
        admin = _security(cluster, ADMIN_USER)
        asyncio.run(ensure_topics(cluster.bootstrap, "", 2, 3, security=admin))
        cluster.apply_acls(acl_rules("", APP_ID))
        client = _security(cluster, CLIENT_USER)
        assert asyncio.run(_produce(cluster.bootstrap, NAMES["events"], client)) >= 0
        with pytest.raises(TopicAuthorizationFailedError):
            asyncio.run(_produce(cluster.bootstrap, NAMES["memory_state"], client))
