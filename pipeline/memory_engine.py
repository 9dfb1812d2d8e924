"""Batch orchestration shared by the live worker and replay.

Decodes raw log records (dead-lettering what cannot be read), skips positions a view already
applied, embeds the remembered turns of the batch in one encoder call, then drives the pure
``decide_*`` functions event by event in log order. No Kafka, no Milvus here: callers pass raw
records in and write the result out.
"""

from __future__ import annotations

import base64
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from pipeline.encoders import Encoder
from pipeline.logic.llm_extraction import apply_extraction
from pipeline.processor import (
    Change,
    NamespaceBank,
    Position,
    PreparedTurn,
    after_turns,
    decide_command,
    decide_consolidation,
    decide_signal,
    decide_turn,
    light_consolidation_due,
    prepare_turn,
)
from pipeline.settings import MemoryPolicy
from schemas.codec import decode_event
from schemas.errors import InvalidEvent
from schemas.events import CommandIssued, ExtractionRecorded, MemoriesRecalled, TurnRecorded
from schemas.memory import DeadLetter, MemoryRecord

BankLoader = Callable[[str], Iterable[MemoryRecord]]

EXPECTED_EVENT = {"turns": TurnRecorded, "commands": CommandIssued, "signals": MemoriesRecalled}


@dataclass(frozen=True)
class RawRecord:
    """One message as read from an input topic."""

    role: str  # turns | commands | signals
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


@dataclass
class BatchResult:
    changes: list[Change] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    watermarks: dict[tuple[str, int], int] = field(default_factory=dict)
    counts: Counter[str] = field(default_factory=Counter)
    dirty_namespaces: set[str] = field(default_factory=set)
    # Records an input position had already changed before a crash: published again, unchanged.
    republish: list[MemoryRecord] = field(default_factory=list)
    # Per-namespace counters the view stores beside its watermarks (see MemoryEngine.bank).
    counters: dict[str, int] = field(default_factory=dict)
    encode_seconds: float = 0.0  # time spent in the encoder, for the overhead benchmark

    def final_records(self) -> dict[str, MemoryRecord]:
        """The last state of every record the batch touched (what the views must upsert)."""
        latest: dict[str, MemoryRecord] = {record.id: record for record in self.republish}
        for change in self.changes:
            latest[change.record.id] = change.record
        return latest

    def erased_ids(self) -> list[str]:
        return [c.record.id for c in self.changes if c.change == "erased"]


def dead_letter(raw: RawRecord, error: InvalidEvent) -> DeadLetter:
    return DeadLetter(
        stage=error.stage,
        reason=error.reason,
        field=error.field,
        source_topic=raw.topic,
        source_partition=raw.partition,
        source_offset=raw.offset,
        original_key_b64=base64.b64encode(raw.key).decode() if raw.key is not None else None,
        original_value_b64=base64.b64encode(raw.value or b"").decode(),
    )


COUNTER_PREFIX = "bank:"


def turns_counter(namespace: str) -> str:
    return f"{COUNTER_PREFIX}{namespace}:turns"


def last_turn_counter(namespace: str) -> str:
    return f"{COUNTER_PREFIX}{namespace}:last_turn_ms"


class MemoryEngine:
    """Holds the namespace banks of the partitions this process owns and applies batches."""

    def __init__(
        self,
        encoder: Encoder,
        policy: MemoryPolicy,
        load_bank: BankLoader,
        applied: dict[tuple[str, int], int] | None = None,
        counters: dict[str, int] | None = None,
    ) -> None:
        self.encoder = encoder
        self.policy = policy
        self._load_bank = load_bank
        self.banks: dict[str, NamespaceBank] = {}
        self.applied: dict[tuple[str, int], int] = dict(applied or {})
        self._counters = dict(counters or {})

    def bank(self, namespace: str) -> NamespaceBank:
        if namespace not in self.banks:
            bank = NamespaceBank.load(namespace, self._load_bank(namespace))
            bank.turns_seen = self._counters.get(turns_counter(namespace), 0)
            last_ms = self._counters.get(last_turn_counter(namespace))
            if last_ms is not None:
                bank.last_turn_at = datetime.fromtimestamp(last_ms / 1000, UTC)
            self.banks[namespace] = bank
        return self.banks[namespace]

    def _decode(self, raw: RawRecord) -> TurnRecorded | CommandIssued | MemoriesRecalled:
        event = decode_event(raw.value)
        expected = EXPECTED_EVENT.get(raw.role)
        if expected is not None and not isinstance(event, expected):
            raise InvalidEvent(
                f"{event.event_type} does not belong on the {raw.role} topic", "event_type", "route"
            )
        if raw.key is not None and raw.key.decode("utf-8", "replace") != event.namespace:
            # Keys decide partitions; a mismatch would break one-namespace-one-order (I3).
            raise InvalidEvent(
                f"message key {raw.key!r} differs from namespace {event.namespace!r}",
                "namespace",
                "route",
            )
        return event

    def process(
        self,
        batch: Sequence[RawRecord],
        extractions: Mapping[tuple[str, str], ExtractionRecorded] | None = None,
    ) -> BatchResult:
        """Apply a batch; ``extractions`` ((namespace, turn event id) → recorded LLM extraction)
        override the rules for those turns. They come from the log, never from a live call (I2)."""
        result = BatchResult()
        decoded: list[tuple[RawRecord, TurnRecorded | CommandIssued | MemoriesRecalled]] = []
        for raw in batch:
            result.watermarks[(raw.topic, raw.partition)] = max(
                raw.offset, result.watermarks.get((raw.topic, raw.partition), -1)
            )
            if raw.offset <= self.applied.get((raw.topic, raw.partition), -1):
                result.counts["skipped_already_applied"] += 1
                continue
            try:
                decoded.append((raw, self._decode(raw)))
            except InvalidEvent as error:
                result.dead_letters.append(dead_letter(raw, error))
                result.counts["dead_letters"] += 1

        prepared: dict[int, PreparedTurn] = {}
        for index, (_, event) in enumerate(decoded):
            if isinstance(event, TurnRecorded):
                prepared[index] = prepare_turn(event, time_notes=self.policy.time_notes)
                recorded = (extractions or {}).get((event.namespace, event.event_id))
                if recorded is not None:
                    prepared[index] = apply_extraction(prepared[index], recorded)
        to_embed = [i for i, p in prepared.items() if p.classification.remember]
        encode_started = time.perf_counter()
        vectors = self.encoder.encode([prepared[i].search_text for i in to_embed])
        result.encode_seconds = time.perf_counter() - encode_started
        vector_of = {i: vectors[n] for n, i in enumerate(to_embed)}

        for index, (raw, event) in enumerate(decoded):
            position = Position(raw.topic, raw.partition, raw.offset)
            bank = self.bank(event.namespace)
            already = bank.touched_by(position)
            if already:
                # Applied to the view before a crash, maybe never published: publish it again.
                result.republish.extend(already)
                result.counts["republished"] += len(already)
            changes: list[Change] = []
            if isinstance(event, TurnRecorded):
                result.counts["turns"] += 1
                turn = prepared[index]
                if not turn.classification.remember:
                    result.counts["filtered"] += 1
                elif not already:
                    changes = decide_turn(bank, turn, vector_of[index], position, self.policy)
                bank.apply(changes)
                after_turns(bank, 1, event.event_time)
                if light_consolidation_due(bank, self.policy):
                    cooled = decide_consolidation(
                        bank, event.event_time, event.event_id, position, self.policy
                    )
                    bank.apply(cooled)
                    bank.turns_since_consolidation = 0
                    changes = [*changes, *cooled]
                result.counters[turns_counter(event.namespace)] = bank.turns_seen
                if bank.last_turn_at is not None:
                    result.counters[last_turn_counter(event.namespace)] = int(
                        bank.last_turn_at.timestamp() * 1000
                    )
            elif already:
                pass
            elif isinstance(event, CommandIssued):
                result.counts[f"command_{event.command}"] += 1
                changes = decide_command(bank, event, position, self.policy)
                bank.apply(changes)
                if event.command == "tick" and changes:
                    bank.turns_since_consolidation = 0
            else:
                result.counts["signals"] += 1
                changes = decide_signal(bank, event, position, self.policy)
                bank.apply(changes)
            changes = [replace(change, at=event.event_time) for change in changes]
            for change in changes:
                result.counts[f"memory_{change.change}"] += 1
            result.changes.extend(changes)
            if changes:
                result.dirty_namespaces.add(event.namespace)
        for key, offset in result.watermarks.items():
            self.applied[key] = max(offset, self.applied.get(key, -1))
        return result
