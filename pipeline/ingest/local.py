"""The whole flow without a broker: prepare → consolidate in one process, in memory.

A test seam (in the manner of quix's ``StreamingDataFrame.test``) and the engine of the offline
LoCoMo harness: it runs exactly the stages' pure code — ``prepare_batch`` and
``PartitionTables`` — over an in-memory log with Kafka's partitioning, so unit tests can check
the logic with plain values. The integration tests still run the real stages on a real broker.

``restart()`` rebuilds every partition's tables from what the state topic would hold (the last
committed record per id, the counters, the watermark), which is what a worker does after a crash
or a rebalance.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pipeline.ingest.commit import PartitionOutput
from pipeline.ingest.consolidate import PartitionTables, PreparedMessage
from pipeline.ingest.prepare import ExtractionKey, InputMessage, prepare_batch
from pipeline.models.classifier import TurnClassifier
from pipeline.models.encoders import Encoder
from pipeline.runtime.settings import MemoryPolicy
from pipeline.views.state_topic import PartitionState, partition_for
from schemas.codec import encode
from schemas.events import ExtractionRecorded
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
        classifier: TurnClassifier | None = None,
    ) -> None:
        self.encoder = encoder
        self.classifier = classifier  # None: the rules decide, as prepare_batch does
        self.policy = policy or MemoryPolicy()
        self.partitions = partitions
        names = topic_names(topic_prefix)
        self.events_topic = names["events"]
        self.prepared_topic = names["prepared"]
        self.extractions = dict(extractions or {})
        self._logs = [_Partition() for _ in range(partitions)]
        self.tables = {p: self._fresh_tables(p) for p in range(partitions)}
        self.outputs: list[PartitionOutput] = []

    def _fresh_tables(self, partition: int) -> PartitionTables:
        return PartitionTables(partition, self.events_topic, self.policy)

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
                batch = prepare_batch(chunk, self.encoder, self.extractions, self.classifier)
                for message, prepared in batch.prepared:
                    log.prepared.append(
                        PreparedMessage(
                            self.prepared_topic,
                            message.partition,
                            len(log.prepared),
                            message.key,
                            encode(prepared),
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
        log.state.counters.update(output.counters)
        if output.watermark is not None:
            log.state.watermark = output.watermark

    def restart(self) -> None:
        """Drop every table and restore it from the committed state (a crash or a rebalance)."""
        for partition, log in enumerate(self._logs):
            self.tables[partition] = PartitionTables.restore(
                partition, self.events_topic, self.policy, log.state
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

    def replayed(self, batch_size: int = 2_000) -> dict[str, MemoryRecord]:
        """What a replay builds from the prepared log: fresh tables, every event once more."""
        records: dict[str, MemoryRecord] = {}
        for partition, log in enumerate(self._logs):
            tables = self._fresh_tables(partition)
            for index in range(0, len(log.prepared), batch_size):
                output = tables.apply_all(log.prepared[index : index + batch_size])
                for memory_id, (_, record) in output.writes.items():
                    if record is None:
                        records.pop(memory_id, None)
                    else:
                        records[memory_id] = record
        return records
