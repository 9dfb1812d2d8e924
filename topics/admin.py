"""Create, inspect and delete the catalogue's topics on a running Kafka cluster.

``ensure_topics`` is idempotent: run it on every start (the CLI's ``topics create``, the demo, the
tests). Missing topics are created with the catalogue's settings; topics that exist get the
catalogue's settings applied again, so a changed retention or cleanup policy reaches old clusters.
A partition count that differs from the requested one is an error, because every pipeline topic
must share it for co-partitioning (invariant I3).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaTimeoutError, for_code

from pipeline.runtime.kafka import client_kwargs
from pipeline.runtime.settings import KafkaSecurity
from schemas.errors import HindsightError
from topics.catalogue import TOPICS, TopicSpec

TOPIC_ALREADY_EXISTS = 36
UNKNOWN_TOPIC_OR_PARTITION = 3
REQUEST_TIMEOUT_MS = 30_000
LEADER_WAIT_S = 30.0


class TopicAdminError(HindsightError):
    """A topic could not be created, changed or described; the message names the topic."""


@contextlib.asynccontextmanager
async def _admin(
    bootstrap: str, security: KafkaSecurity | None = None
) -> AsyncIterator[AIOKafkaAdminClient]:
    client = AIOKafkaAdminClient(
        **client_kwargs(security),
        bootstrap_servers=bootstrap,
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        client_id="hindsight-admin",
    )
    await client.start()
    try:
        yield client
    finally:
        await client.close()


def topic_configs(spec: TopicSpec, replication_factor: int) -> dict[str, str]:
    """The catalogue's settings plus durability that follows from the replication factor."""
    configs = spec.kafka_configs()
    if replication_factor >= 3:
        # acks=all then survives one lost broker yet refuses writes that only one copy holds (I8).
        configs.setdefault("min.insync.replicas", "2")
    return configs


def _error_text(code: int, message: str | None) -> str:
    name = for_code(code).__name__
    return f"{name} ({code}){': ' + message if message else ''}"


async def ensure_topics(
    bootstrap: str,
    prefix: str = "",
    partitions: int = 4,
    replication_factor: int = 1,
    security: KafkaSecurity | None = None,
    *,
    extra: dict[str, TopicSpec] | None = None,
) -> None:
    """Create every catalogue topic under ``prefix``; existing ones get their settings reapplied.

    ``extra`` maps further topic names to the spec they follow (a reindex's prepared topic, named
    after its encoder, follows the prepared spec).
    """
    if partitions < 1 or replication_factor < 1:
        raise TopicAdminError(
            f"partitions/replication_factor: need >= 1, got {partitions}/{replication_factor}"
        )
    specs = {spec.name(prefix): spec for spec in TOPICS.values()}
    specs.update(extra or {})
    configs = {name: topic_configs(spec, replication_factor) for name, spec in specs.items()}
    counts = {name: spec.partitions or partitions for name, spec in specs.items()}
    async with _admin(bootstrap, security) as admin:
        response = await admin.create_topics(
            [
                NewTopic(name, counts[name], replication_factor, topic_configs=configs[name])
                for name in specs
            ],
            timeout_ms=REQUEST_TIMEOUT_MS,
        )
        existing = []
        for entry in response.to_object()["topic_errors"]:
            code = entry["error_code"]
            if code == TOPIC_ALREADY_EXISTS:
                existing.append(entry["topic"])
            elif code != 0:
                raise TopicAdminError(
                    f"topic {entry['topic']}: create failed: "
                    f"{_error_text(code, entry.get('error_message'))}"
                )
        if existing:
            await _check_partitions(admin, existing, counts)
            await _apply_configs(admin, {name: configs[name] for name in existing})
        await _wait_for_leaders(admin, list(specs))
    await _wait_for_offsets(bootstrap, counts, security)


async def _check_partitions(
    admin: AIOKafkaAdminClient, names: list[str], wanted: dict[str, int]
) -> None:
    for topic in await admin.describe_topics(names):
        count = len(topic["partitions"])
        if count != wanted[topic["topic"]]:
            raise TopicAdminError(
                f"topic {topic['topic']}: has {count} partitions, expected "
                f"{wanted[topic['topic']]}; all pipeline topics must share one partition count "
                f"(co-partitioning by namespace)"
            )


async def _apply_configs(admin: AIOKafkaAdminClient, configs: dict[str, dict[str, str]]) -> None:
    # AlterConfigs (not incremental) replaces a topic's dynamic settings with exactly this set:
    # the catalogue is the one place topic settings live.
    responses = await admin.alter_configs(
        [ConfigResource(ConfigResourceType.TOPIC, name, cfg) for name, cfg in configs.items()]
    )
    for response in responses:
        for resource in response.to_object()["resources"]:
            code = resource["error_code"]
            if code != 0:
                raise TopicAdminError(
                    f"topic {resource['resource_name']}: altering configs failed: "
                    f"{_error_text(code, resource.get('error_message'))}"
                )


async def _wait_for_leaders(admin: AIOKafkaAdminClient, names: list[str]) -> None:
    """Return once every partition has a leader, so the first produce does not race creation."""
    deadline = time.monotonic() + LEADER_WAIT_S
    pending = names
    while True:
        described = await admin.describe_topics(pending)
        pending = [t["topic"] for t in described if not _has_leaders(t)]
        if not pending:
            return
        if time.monotonic() >= deadline:
            raise TopicAdminError(
                f"topics {', '.join(sorted(pending))}: no leader for every partition after "
                f"{LEADER_WAIT_S:.0f}s"
            )
        await asyncio.sleep(0.2)


async def _wait_for_offsets(
    bootstrap: str, counts: dict[str, int], security: KafkaSecurity | None
) -> None:
    """Return once every partition's leader answers an offsets request.

    Metadata can name a leader a moment before that broker serves the partition; a consumer that
    seeks then logs ``NotLeaderForPartitionError`` at ERROR while it retries. ``beginning_offsets``
    retries the same request quietly, so asking it first keeps a fresh start free of that noise.
    """
    consumer = AIOKafkaConsumer(
        **client_kwargs(security),
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        request_timeout_ms=int(LEADER_WAIT_S * 1000),
    )
    await consumer.start()
    try:
        await consumer.beginning_offsets(
            [TopicPartition(name, p) for name, count in counts.items() for p in range(count)]
        )
    except KafkaTimeoutError as error:
        raise TopicAdminError(
            f"topics {', '.join(sorted(counts))}: partition leaders did not answer offset requests "
            f"within {LEADER_WAIT_S:.0f}s"
        ) from error
    finally:
        await consumer.stop()


def _has_leaders(topic: dict[str, Any]) -> bool:
    partitions = topic.get("partitions") or []
    return (
        topic.get("error_code", 0) == 0
        and bool(partitions)
        and all(p["error_code"] == 0 and p["leader"] >= 0 for p in partitions)
    )


async def delete_topics(
    bootstrap: str, names: Iterable[str], security: KafkaSecurity | None = None
) -> None:
    """Delete topics; names that do not exist are ignored (deleting is idempotent too)."""
    wanted = list(names)
    if not wanted:
        return
    async with _admin(bootstrap, security) as admin:
        response = await admin.delete_topics(wanted, timeout_ms=REQUEST_TIMEOUT_MS)
        for entry in response.to_object()["topic_error_codes"]:
            code = entry["error_code"]
            if code not in (0, UNKNOWN_TOPIC_OR_PARTITION):
                raise TopicAdminError(
                    f"topic {entry['topic']}: delete failed: "
                    f"{_error_text(code, entry.get('error_message'))}"
                )
        # Deletion is asynchronous on the brokers; wait so a re-create right after does not fail.
        deadline = time.monotonic() + LEADER_WAIT_S
        while set(wanted) & set(await admin.list_topics()):
            if time.monotonic() >= deadline:
                raise TopicAdminError(f"topics {', '.join(wanted)}: still listed after delete")
            await asyncio.sleep(0.2)


async def describe_topic_configs(
    bootstrap: str, name: str, security: KafkaSecurity | None = None
) -> dict[str, str]:
    """Every effective setting of one topic (defaults included), as the broker reports them."""
    async with _admin(bootstrap, security) as admin:
        responses = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, name)])
    result: dict[str, str] = {}
    for response in responses:
        for resource in response.to_object()["resources"]:
            code = resource["error_code"]
            if code != 0:
                raise TopicAdminError(
                    f"topic {name}: describe configs failed: "
                    f"{_error_text(code, resource.get('error_message'))}"
                )
            for entry in resource["config_entries"]:
                if entry["config_value"] is not None:
                    result[entry["config_names"]] = entry["config_value"]
    return result


async def list_topics(bootstrap: str, security: KafkaSecurity | None = None) -> list[str]:
    """Names of every topic in the cluster (Kafka's internal topics included)."""
    async with _admin(bootstrap, security) as admin:
        return sorted(await admin.list_topics())
