"""Topic names, partitions, cleanup policies and retention — the only place topics are named.

One input log, ``hindsight.events.v1``: turns, commands and signals of a namespace share one
partition, so the partition's order is *the* order, live and in replay (I3). Every pipeline topic
is keyed by namespace and shares one partition count, so a namespace lands on the same partition
number everywhere (co-partitioning). The memory-state topic is keyed by memory id for compaction
but written to its namespace's partition explicitly.

Content is sealed with data keys before it reaches a topic; the keys live in the compacted
``hindsight.data-keys.v1``, and destroying them erases the content everywhere (docs/ERASURE.md).

The truth (I1) is the input log plus the recorded model outputs: LLM extractions and, per
encoder, the prepared events (vectors). Reindexing with another encoder writes a prepared topic
named after it (:func:`prepared_topic`); the default encoder's is ``hindsight.prepared.v1``.

The keys topic (API keys, keyed by key id) is not a pipeline topic: it has one partition, so every
API process reads all key events in one order, and it is compacted, so the latest event per key id
is what stays (a revocation outlives the creation it revokes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Literal

Role = Literal[
    "events",
    "prepared",
    "extractions",
    "memory_state",
    "memory_updates",
    "dead_letters",
    "keys",
    "data_keys",
    "policies",
]

FOREVER = -1  # retention.ms: the log is the truth (I1)


@dataclass(frozen=True)
class TopicSpec:
    role: Role
    base_name: str
    cleanup_policy: Literal["delete", "compact"]
    retention_ms: int
    configs: dict[str, str] = field(default_factory=dict)
    partitions: int | None = None  # None: the pipeline's shared count (co-partitioning, I3)

    def name(self, prefix: str = "") -> str:
        return f"{prefix}{self.base_name}"

    def kafka_configs(self) -> dict[str, str]:
        return {
            "cleanup.policy": self.cleanup_policy,
            "retention.ms": str(self.retention_ms),
            **self.configs,
        }


TOPICS: dict[Role, TopicSpec] = {
    spec.role: spec
    for spec in (
        TopicSpec("events", "hindsight.events.v1", "delete", FOREVER),
        TopicSpec("prepared", "hindsight.prepared.v1", "delete", FOREVER),
        TopicSpec("extractions", "hindsight.extractions.v1", "delete", FOREVER),
        TopicSpec(
            "memory_state",
            "hindsight.memory-state.v1",
            "compact",
            FOREVER,
            {"min.cleanable.dirty.ratio": "0.1", "segment.ms": "3600000"},
        ),
        # Each namespace's policy history (redaction), keyed by namespace: prepare writes it before
        # the prepared events that used it and reads it when it takes a partition over.
        TopicSpec(
            "policies",
            "hindsight.policies.v1",
            "compact",
            FOREVER,
            {"min.cleanable.dirty.ratio": "0.1", "segment.ms": "3600000"},
        ),
        TopicSpec("memory_updates", "hindsight.memory-updates.v1", "delete", 7 * 24 * 3600 * 1000),
        TopicSpec("dead_letters", "hindsight.dead-letters.v1", "delete", 30 * 24 * 3600 * 1000),
        TopicSpec(
            "keys",
            "hindsight.keys.v1",
            "compact",
            FOREVER,
            {"min.cleanable.dirty.ratio": "0.1", "segment.ms": "3600000"},
            partitions=1,
        ),
        # Wrapped data keys (crypto-shredding, docs/ERASURE.md), keyed by key id on the
        # namespace's partition. An erase tombstones keys; these settings make the cleaner take
        # the wrapped bytes out of the segment files within about a minute of the next write
        # (consolidate writes one ``segment.ms`` after an erase): the segment rolls within
        # ``segment.ms``, is due for cleaning at once (no lag, any dirt) and at the latest after
        # ``max.compaction.lag.ms``, and the replaced files are deleted without delay.
        TopicSpec(
            "data_keys",
            "hindsight.data-keys.v1",
            "compact",
            FOREVER,
            {
                "segment.ms": "60000",  # Kafka 5 refuses less than a minute (KIP-1030)
                "max.compaction.lag.ms": "60000",
                "min.compaction.lag.ms": "0",
                "min.cleanable.dirty.ratio": "0.01",
                "delete.retention.ms": "60000",  # tombstones; KeyDestroyed records stay
                "file.delete.delay.ms": "0",
            },
        ),
    )
}


def topic_names(prefix: str = "") -> dict[Role, str]:
    return {role: spec.name(prefix) for role, spec in TOPICS.items()}


def encoder_slug(encoder_id: str) -> str:
    """A topic-name-safe form of an encoder id (``all-MiniLM-L6-v2/onnx-fp32`` -> ``…_onnx-fp32``)
    so a reindex can name its prepared topic after the encoder."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", encoder_id).strip("_").lower()


def prepared_topic(prefix: str = "", encoder_id: str | None = None) -> str:
    """The prepared topic for an encoder: the default one, or a reindex target named after it."""
    base = TOPICS["prepared"].name(prefix)
    return base if encoder_id is None else f"{base}.{encoder_slug(encoder_id)}"


def consumer_group(app_id: str, stage: str) -> str:
    """Each stage is its own consumer group, scaled on its own: ``<app_id>-<stage>``."""
    return f"{app_id}-{stage}"
