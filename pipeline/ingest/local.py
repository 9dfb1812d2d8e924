"""The whole flow without a broker: prepare → consolidate in one process, in memory.

A test seam (in the manner of quix's ``StreamingDataFrame.test``) and the engine of the offline
LoCoMo harness: it runs exactly the stages' pure code — ``prepare_batch`` and
``PartitionTables`` — over an in-memory log with Kafka's partitioning, so unit tests can check
the logic with plain values. The integration tests still run the real stages on a real broker.

``restart()`` rebuilds every partition's tables from what the state topic would hold (the last
committed record per id, the counters, the watermark), which is what a worker does after a crash
or a rebalance.

With a ``KeyRing`` it also runs crypto-shredding in memory: ``publish_sealed`` seals events as
the client does, erases destroy keys in the ring (standing in for the data-key topic), and
``replayed()`` reads what is left, with the erasure ledger, as a replay would.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pipeline.crypto.envelope import DataKey, seal
from pipeline.crypto.keyring import KeyRing
from pipeline.crypto.shredding import has_own_key
from pipeline.ingest.commit import PartitionOutput
from pipeline.ingest.consolidate import PartitionTables, PreparedMessage
from pipeline.ingest.policies import PolicyBook
from pipeline.ingest.prepare import ExtractionKey, InputMessage, prepare_batch, statement_models
from pipeline.models.attributes import AttributeModel
from pipeline.models.classifier import TurnClassifier, classifier_for
from pipeline.models.encoders import Encoder
from pipeline.models.stages import StageModel
from pipeline.runtime.settings import MemoryPolicy, Settings
from pipeline.views.state_topic import PartitionState, partition_for
from schemas.codec import encode
from schemas.data_keys import ErasureRecorded
from schemas.events import ExtractionRecorded, InputEvent
from schemas.memory import MemoryRecord, Watermark
from topics.catalogue import topic_names


@dataclass
class _Partition:
    inputs: list[InputMessage] = field(default_factory=list)
    prepared: list[PreparedMessage] = field(default_factory=list)
    prepared_upto: int = 0  # inputs[:prepared_upto] have been prepared
    consolidated_upto: int = 0  # prepared[:consolidated_upto] have been consolidated
    state: PartitionState = field(default_factory=PartitionState)


class LocalPipeline:
    def __init__(
        self,
        encoder: Encoder,
        policy: MemoryPolicy | None = None,
        partitions: int = 1,
        topic_prefix: str = "",
        extractions: Mapping[ExtractionKey, ExtractionRecorded] | None = None,
        keys: KeyRing | None = None,
        classifier: TurnClassifier | None = None,
        attributes: AttributeModel | None = None,
        stages: StageModel | None = None,
    ) -> None:
        self.encoder = encoder
        self.classifier = classifier  # None: the rules decide, as prepare_batch does
        self.attributes = attributes  # None: no slot attributes, as prepare_batch does
        self.stages = stages  # None: the state patterns alone (read only beside attributes)
        self.policy = policy or MemoryPolicy()
        self.policies: PolicyBook = {}  # each namespace's redaction history (policies topic)
        self.partitions = partitions
        names = topic_names(topic_prefix)
        self.events_topic = names["events"]
        self.prepared_topic = names["prepared"]
        self.extractions = dict(extractions or {})
        self.keys = keys
        self._namespace_keys: dict[str, DataKey] = {}
        self._logs = [_Partition() for _ in range(partitions)]
        self.tables = {p: self._fresh_tables(p) for p in range(partitions)}
        self.outputs: list[PartitionOutput] = []

    @classmethod
    def configured(cls, encoder: Encoder, settings: Settings, partitions: int = 1) -> LocalPipeline:
        """The stages as ``settings`` configure them: its memory policy, and the classifier,
        attribute and stage models that fit ``encoder`` (what the worker's ``prepare`` would
        load)."""
        attributes, stages = statement_models(encoder.name, settings.slot_attributes)
        return cls(
            encoder,
            settings.memory,
            partitions=partitions,
            classifier=classifier_for(settings.classifier, encoder.name),
            attributes=attributes,
            stages=stages,
        )

    def _fresh_tables(
        self, partition: int, ledger: Mapping[int, ErasureRecorded] | None = None
    ) -> PartitionTables:
        """Live tables shred (with a ring); replay's read the erasure ledger instead."""
        return PartitionTables(
            partition,
            self.events_topic,
            self.policy,
            keys=self.keys,
            shred=self.keys is not None and ledger is None,
            recorded_erasures=dict(ledger or {}),
        )

    # -- the input log ---------------------------------------------------------------------
    def publish(
        self, namespace: str, value: bytes | object, key: bytes | None = None
    ) -> InputMessage:
        """Append to the namespace's partition (bytes as given, or a model encoded to JSON)."""
        raw = value if isinstance(value, bytes) else encode(value)  # type: ignore[arg-type]
        partition = partition_for(namespace, self.partitions)
        log = self._logs[partition]
        message = InputMessage(
            self.events_topic,
            partition,
            len(log.inputs),
            len(log.inputs),
            namespace.encode() if key is None else key,
            raw,
        )
        log.inputs.append(message)
        return message

    def publish_sealed(self, event: InputEvent) -> InputMessage:
        """Seal ``event`` as the client does (its own key, or the namespace's) and publish it."""
        if self.keys is None:
            raise ValueError("publish_sealed needs a LocalPipeline with a KeyRing")
        namespace = event.namespace
        key = self._namespace_keys.get(namespace)
        if has_own_key(event) or key is None or self.keys.state(key.key_id) != "live":
            key, record = self.keys.create(
                namespace, event.event_id if has_own_key(event) else None
            )
            self.keys.add(record, key.secret)
            if not has_own_key(event):
                self._namespace_keys[namespace] = key
        return self.publish(namespace, seal(event, namespace, key, "events"))

    # -- the stages ------------------------------------------------------------------------
    def prepare(self, batch_size: int = 64, *, resend_last: int = 0) -> None:
        """Prepare everything pending, ``batch_size`` inputs per encoder call.

        ``resend_last`` re-prepares that many already-prepared inputs first, as a ``prepare``
        worker does after a crash before it committed (at-least-once duplicates).
        """
        for log in self._logs:
            start = max(0, log.prepared_upto - resend_last)
            pending = log.inputs[start:]
            for index in range(0, len(pending), batch_size):
                chunk = pending[index : index + batch_size]
                batch = prepare_batch(
                    chunk,
                    self.encoder,
                    self.extractions,
                    self.keys,
                    time_notes=self.policy.time_notes,
                    classifier=self.classifier,
                    policies=self.policies,
                    attributes=self.attributes,
                    stages=self.stages,
                )
                for (message, _), value in zip(batch.prepared, batch.values, strict=True):
                    log.prepared.append(
                        PreparedMessage(
                            self.prepared_topic,
                            message.partition,
                            len(log.prepared),
                            message.key,
                            value,
                        )
                    )
            log.prepared_upto = len(log.inputs)

    def consolidate(self, batch_size: int = 500) -> None:
        """Consolidate everything prepared, committing every ``batch_size`` events."""
        for partition, log in enumerate(self._logs):
            tables = self.tables[partition]
            while log.consolidated_upto < len(log.prepared):
                chunk = log.prepared[log.consolidated_upto : log.consolidated_upto + batch_size]
                output = tables.apply_all(chunk)
                self._commit(log, output)
                log.consolidated_upto += len(chunk)

    def run(self, prepare_batch_size: int = 64, consolidate_batch_size: int = 500) -> None:
        self.prepare(prepare_batch_size)
        self.consolidate(consolidate_batch_size)

    def _commit(self, log: _Partition, output: PartitionOutput) -> None:
        """What ``commit_output`` writes, folded the way a restoring worker reads it back."""
        self.outputs.append(output)
        for memory_id, (_, record) in output.writes.items():
            if record is None:
                log.state.records.pop(memory_id, None)
            else:
                log.state.records[memory_id] = record
        for namespace, counters in output.counters.items():
            if counters is None:
                log.state.counters.pop(namespace, None)
            else:
                log.state.counters[namespace] = counters
        log.state.erasures.extend(output.erasures)
        if output.watermark is not None:
            log.state.watermark = output.watermark
        if self.keys is not None:
            # The data-key topic's side of the same transaction.
            self.keys.mark_destroyed(output.destroyed.values())
            self.keys.record_erasures(output.erasures)

    def restart(self) -> None:
        """Drop every table and restore it from the committed state (a crash or a rebalance)."""
        for partition, log in enumerate(self._logs):
            self.tables[partition] = PartitionTables.restore(
                partition,
                self.events_topic,
                self.policy,
                log.state,
                keys=self.keys,
                shred=self.keys is not None,
            )

    # -- reading ---------------------------------------------------------------------------
    def records(self) -> dict[str, MemoryRecord]:
        """Every current record, as the state topic holds it."""
        return {
            memory_id: record
            for log in self._logs
            for memory_id, record in log.state.records.items()
        }

    def watermarks(self) -> dict[int, Watermark]:
        return {
            partition: log.state.watermark
            for partition, log in enumerate(self._logs)
            if log.state.watermark is not None
        }

    def prepared_log(self, partition: int) -> Sequence[PreparedMessage]:
        return self._logs[partition].prepared

    def erasures(self) -> list[ErasureRecorded]:
        """The erasures the state topic would hold."""
        return [erasure for log in self._logs for erasure in log.state.erasures]

    def replayed(self, batch_size: int = 2_000) -> dict[str, MemoryRecord]:
        """What a replay builds from the prepared log: fresh tables, every event once more —
        without what was erased, with each recorded erase at its place."""
        records: dict[str, MemoryRecord] = {}
        ledger: dict[int, dict[int, ErasureRecorded]] = {}
        for erasure in self.keys.erasures() if self.keys is not None else []:
            ledger.setdefault(erasure.source.partition, {})[erasure.source.offset] = erasure
        self.replay_counts: Counter[str] = Counter()
        for partition, log in enumerate(self._logs):
            tables = self._fresh_tables(partition, ledger.get(partition, {}))
            for index in range(0, len(log.prepared), batch_size):
                output = tables.apply_all(log.prepared[index : index + batch_size])
                self.replay_counts.update(output.counts)
                for memory_id, (_, record) in output.writes.items():
                    if record is None:
                        records.pop(memory_id, None)
                    else:
                        records[memory_id] = record
        return records
