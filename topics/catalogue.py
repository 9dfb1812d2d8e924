"""Topic names, partitions, cleanup policies and retention.

Every pipeline topic is keyed by namespace and shares one partition count, so a namespace lands on
the same partition number everywhere (co-partitioning, invariant I3). The memory-state topic is
keyed by memory id for compaction but written to its namespace's partition explicitly.

The extractions topic is part of the truth (recorded LLM extractions, I2) and kept forever, but it
is not an input the worker consumes: the worker and replay read it to look records up, by the
partition of the turn they belong to.

The keys topic (API keys, keyed by key id) is not a pipeline topic: it has one partition, so every
API process reads all key events in one order, and it is compacted, so the latest event per key id
is what stays (a revocation outlives the creation it revokes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Role = Literal[
    "turns",
    "commands",
    "signals",
    "extractions",
    "memory_state",
    "memory_updates",
    "dead_letters",
    "keys",
]


@dataclass(frozen=True)
class TopicSpec:
    role: Role
    base_name: str
    cleanup_policy: Literal["delete", "compact"]
    retention_ms: int  # -1 keeps forever: the input log is the truth (I1)
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
        TopicSpec("turns", "hindsight.turns.v1", "delete", -1),
        TopicSpec("commands", "hindsight.commands.v1", "delete", -1),
        TopicSpec("signals", "hindsight.signals.v1", "delete", -1),
        TopicSpec("extractions", "hindsight.extractions.v1", "delete", -1),
        TopicSpec(
            "memory_state",
            "hindsight.memory-state.v1",
            "compact",
            -1,
            {"min.cleanable.dirty.ratio": "0.1", "segment.ms": "3600000"},
        ),
        TopicSpec("memory_updates", "hindsight.memory-updates.v1", "delete", 7 * 24 * 3600 * 1000),
        TopicSpec("dead_letters", "hindsight.dead-letters.v1", "delete", 30 * 24 * 3600 * 1000),
        TopicSpec(
            "keys",
            "hindsight.keys.v1",
            "compact",
            -1,
            {"min.cleanable.dirty.ratio": "0.1", "segment.ms": "3600000"},
            partitions=1,
        ),
    )
}

INPUT_ROLES: tuple[Role, ...] = ("turns", "commands", "signals")


def topic_names(prefix: str = "") -> dict[Role, str]:
    return {role: spec.name(prefix) for role, spec in TOPICS.items()}
