"""Recorded LLM extractions: look up, or ask and record before use (I2).

``RecordedExtractions`` is how ``prepare`` gets extractions for a batch:

1. look each turn up among the ``ExtractionRecorded`` events already in the log
   (``hindsight.extractions.v1``, read from the beginning for the partitions in use);
2. call the LLM only for remembered turns without a record (or for every one in an explicit
   re-extract);
3. publish the new records (acks=all) and wait for the acknowledgements;
4. read the topic up to them and only then hand the records to ``prepare``.

Step 4 folds the records with the same rule a reindex uses (first record of the highest
revision), so even two workers racing on one turn during a rebalance use what a reindex will use.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from pipeline.crypto.envelope import seal, unseal
from pipeline.crypto.keyring import KeyRing
from pipeline.ingest.policies import PolicyBook
from pipeline.ingest.prepare import InputMessage, open_input, rules_analysis
from pipeline.memory.rules.llm_extraction import supersedes
from pipeline.memory.rules.redaction import step_in_log_order
from pipeline.models.llm import Extractor, OpenAICompatibleExtractor, extract_turn
from pipeline.runtime.kafka import client_kwargs, stop_consumer
from pipeline.runtime.settings import KafkaSecurity, Settings
from pipeline.views.state_topic import partition_ids
from schemas.codec import decode_event, encode
from schemas.errors import DataKeyDestroyed, HindsightError, InvalidEvent, UnknownDataKey
from schemas.events import ExtractionRecorded, TurnRecorded
from schemas.prepared import TurnAnalysis
from topics.catalogue import topic_names

log = logging.getLogger("hindsight.extractions")

ExtractionKey = tuple[str, str]  # (namespace, turn event id): event ids are unique per namespace


# (message, turn, its rules analysis, earlier turns of its session, the turn's data key id)
Candidate = tuple[InputMessage, TurnRecorded, TurnAnalysis, list[TurnRecorded], str | None]


class RecordedExtractions:
    """The extractions a batch's turns use, recorded in the log before they are used (I2).

    Without an extractor it only looks records up (plain replay). With one it calls the model for
    turns without a record; with ``re_extract`` it calls it for every turn and records the answers
    at a revision above any in the log (the explicit reprocess mode). A record is sealed with its
    turn's data key (``keys``), so erasing the turn erases the extraction too.
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        producer: AIOKafkaProducer | None = None,
        extractor: Extractor | None = None,
        re_extract: bool = False,
        concurrency: int = 4,
        catch_up_timeout_s: float = 60.0,
        security: KafkaSecurity | None = None,
        keys: KeyRing | None = None,
    ) -> None:
        if (extractor is not None or re_extract) and producer is None:
            raise ValueError("calling the LLM needs a producer: answers are recorded before use")
        if re_extract and extractor is None:
            raise ValueError("re_extract needs an extractor")
        self._bootstrap = bootstrap
        self._security = security
        self._topic = topic
        self._producer = producer
        self._extractor = extractor
        self._re_extract = re_extract
        self._concurrency = asyncio.Semaphore(max(1, concurrency))
        self._timeout_s = catch_up_timeout_s
        self._keys = keys
        self._consumer: AIOKafkaConsumer | None = None
        self._partitions: set[int] = set()
        self._assigned: set[int] = set()
        self._records: dict[ExtractionKey, ExtractionRecorded] = {}
        self.revision = 0  # the revision new records get
        self.counts: Counter[str] = Counter()

    async def start(self, *, load_all: bool = False) -> None:
        self._partitions = set(await partition_ids(self._bootstrap, self._topic, self._security))
        if not self._partitions and self._producer is not None:
            raise HindsightError(
                f"topic {self._topic}: missing; create the catalogue's topics "
                "(`hindsight topics create`) before enabling the LLM extractor"
            )
        self._consumer = AIOKafkaConsumer(
            bootstrap_servers=self._bootstrap,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            **client_kwargs(self._security),
        )
        await self._consumer.start()
        if load_all or self._re_extract:
            await self.catch_up(self._partitions)
        if self._re_extract:
            # Above every revision in the log, so the new answers win on later lookups.
            self.revision = 1 + max((r.revision for r in self._records.values()), default=-1)

    async def stop(self) -> None:
        if self._consumer is not None:
            await stop_consumer(self._consumer)
            self._consumer = None
        if self._extractor is not None:
            await self._extractor.aclose()

    @property
    def latest_revision(self) -> int:
        """The highest revision among the records read so far (0 when there are none)."""
        return max((r.revision for r in self._records.values()), default=0)

    def lookup(self, namespace: str, turn_event_id: str) -> ExtractionRecorded | None:
        return self._records.get((namespace, turn_event_id))

    def drain_counts(self) -> Counter[str]:
        counts, self.counts = self.counts, Counter()
        return counts

    # -- reading the log -------------------------------------------------------------------
    def _absorb(self, value: bytes | None, partition: int, offset: int) -> None:
        try:
            event = decode_event(unseal(value, self._keys, "extractions").content)
        except DataKeyDestroyed:
            self.counts["extraction_records_shredded"] += 1  # its turn was erased
            return
        except UnknownDataKey as error:
            log.warning("%s[%d]@%d: %s", self._topic, partition, offset, error)
            self.counts["extraction_records_unopened"] += 1
            return
        except InvalidEvent as error:
            log.warning(
                "%s[%d]@%d: unreadable extraction: %s", self._topic, partition, offset, error
            )
            self.counts["extraction_records_invalid"] += 1
            return
        if not isinstance(event, ExtractionRecorded):
            self.counts["extraction_records_invalid"] += 1
            return
        key = (event.namespace, event.turn_event_id)
        if supersedes(event, self._records.get(key)):
            self._records[key] = event

    async def _assign(self, partitions: set[int]) -> AIOKafkaConsumer:
        consumer = self._consumer
        if consumer is None:
            raise HindsightError("RecordedExtractions: start() first")
        missing = partitions - self._assigned
        if missing:
            positions = {
                p: await consumer.position(TopicPartition(self._topic, p)) for p in self._assigned
            }
            self._assigned |= missing
            # assign() forgets positions: put the known ones back, start new ones from the top.
            consumer.assign([TopicPartition(self._topic, p) for p in sorted(self._assigned)])
            for p in sorted(self._assigned):
                tp = TopicPartition(self._topic, p)
                if p in positions:
                    consumer.seek(tp, positions[p])
                else:
                    await consumer.seek_to_beginning(tp)
        return consumer

    async def catch_up(
        self, partitions: set[int], at_least: Mapping[int, int] | None = None
    ) -> None:
        """Fold every record up to the partitions' current ends (or ``at_least``) into the map."""
        wanted = {p for p in partitions if p in self._partitions}
        if not wanted:
            return
        consumer = await self._assign(wanted)
        tps = [TopicPartition(self._topic, p) for p in sorted(wanted)]
        ends = await consumer.end_offsets(tps)
        floor = at_least or {}
        targets = {tp: max(ends[tp], floor.get(tp.partition, 0)) for tp in tps}
        pending = {tp for tp in tps if await consumer.position(tp) < targets[tp]}
        deadline = time.monotonic() + self._timeout_s
        while pending:
            fetched = await consumer.getmany(*pending, timeout_ms=200, max_records=5000)
            for tp, messages in fetched.items():
                for message in messages:
                    self._absorb(message.value, tp.partition, message.offset)
            for tp in list(pending):
                if await consumer.position(tp) >= targets[tp]:
                    pending.discard(tp)
            if pending and time.monotonic() > deadline:
                raise HindsightError(
                    f"topic {self._topic}: could not read up to {targets} "
                    f"within {self._timeout_s:.0f}s"
                )

    # -- a batch ---------------------------------------------------------------------------
    async def for_batch(
        self, batch: Sequence[InputMessage], policies: PolicyBook | None = None
    ) -> dict[ExtractionKey, ExtractionRecorded]:
        """The recorded extraction of every turn in the batch that has one, after recording (and
        Kafka acknowledging) new ones for the remembered turns that had none.

        ``policies`` (a copy: it is updated in log order) redacts turns before the LLM sees them.
        """
        turns: list[tuple[InputMessage, TurnRecorded]] = []
        candidates: list[Candidate] = []
        sessions: dict[tuple[str, str], list[TurnRecorded]] = defaultdict(list)
        for message in batch:
            try:
                turn, envelope = open_input(message, self._keys)
            except (InvalidEvent, UnknownDataKey, DataKeyDestroyed):
                continue  # prepare dead-letters or shreds it
            if policies is not None:
                turn = step_in_log_order(turn, message.partition, message.offset, policies).event
            if not isinstance(turn, TurnRecorded):
                continue
            turns.append((message, turn))
            earlier = sessions[(turn.namespace, turn.session_id)]
            if self._extractor is not None:
                analysis = rules_analysis(turn)
                # The rules' filter still screens greetings and sign-offs: no call for "thanks!".
                if analysis.remember:
                    key_id = envelope.key_id if envelope is not None else None
                    candidates.append((message, turn, analysis, list(earlier), key_id))
            earlier.append(turn)
        if not turns:
            return {}
        await self.catch_up({message.partition for message, _ in turns})

        to_call: list[Candidate] = []
        calling: set[ExtractionKey] = set()
        for candidate in candidates:
            turn = candidate[1]
            key = (turn.namespace, turn.event_id)
            if key not in calling and self._needs_call(turn):
                calling.add(key)
                to_call.append(candidate)
        if to_call:
            await self._record(to_call)
        # Every turn with a record gets it, whatever today's rules say about it: a rule change
        # must not decide whether a recorded answer is used (live and replay agree).
        found = {(t.namespace, t.event_id): self.lookup(t.namespace, t.event_id) for _, t in turns}
        used = {key: record for key, record in found.items() if record is not None}
        self.counts["extractions_reused"] += len(used.keys() - calling)
        return used

    def _needs_call(self, turn: TurnRecorded) -> bool:
        if self._extractor is None:
            return False
        current = self.lookup(turn.namespace, turn.event_id)
        if self._re_extract:
            return current is None or current.revision < self.revision
        return current is None

    async def _record(self, to_call: Sequence[Candidate]) -> None:
        extractor, producer = self._extractor, self._producer
        assert extractor is not None and producer is not None

        async def one(
            turn: TurnRecorded, analysis: TurnAnalysis, context: list[TurnRecorded]
        ) -> ExtractionRecorded:
            async with self._concurrency:
                return await extract_turn(extractor, turn, analysis, context, self.revision)

        records = await asyncio.gather(*(one(t, a, c) for _, t, a, c, _ in to_call))
        self.counts["llm_calls"] += len(records)
        self.counts["llm_fallbacks"] += sum(1 for r in records if r.source == "rules_fallback")
        futures = []
        for (message, _, _, _, key_id), record in zip(to_call, records, strict=True):
            if message.partition not in self._partitions:
                raise HindsightError(
                    f"topic {self._topic}: has no partition {message.partition}; every pipeline "
                    "topic must share one partition count (co-partitioning by namespace)"
                )
            # Same partition number as the turn, so the worker that owns the turn reads it (I3).
            if key_id is None:
                value = encode(record)
            else:
                if self._keys is None:
                    raise HindsightError("sealing an extraction needs the data-key ring")
                key = self._keys.data_key(key_id)
                value = seal(record, record.namespace, key, "extractions")
            futures.append(
                await producer.send(
                    self._topic,
                    key=record.namespace.encode(),
                    value=value,
                    partition=message.partition,
                )
            )
        written = await asyncio.gather(*futures)
        at_least: dict[int, int] = {}
        for metadata in written:
            at_least[metadata.partition] = max(
                metadata.offset + 1, at_least.get(metadata.partition, 0)
            )
        # Read back up to our own records: what is used is what the log says, as on replay.
        await self.catch_up(set(at_least), at_least)


async def open_recorded_extractions(
    settings: Settings,
    producer: AIOKafkaProducer | None,
    *,
    call_llm: bool,
    re_extract: bool = False,
    load_all: bool = False,
    keys: KeyRing | None = None,
) -> RecordedExtractions:
    """The service for ``settings``' topics; ``call_llm`` builds the extractor from settings."""
    extractor = OpenAICompatibleExtractor.from_settings(settings) if call_llm else None
    service = RecordedExtractions(
        settings.bootstrap or "",
        topic_names(settings.topic_prefix)["extractions"],
        producer=producer if call_llm else None,
        extractor=extractor,
        re_extract=re_extract,
        security=settings.kafka,
        keys=keys,
    )
    try:
        await service.start(load_all=load_all)
    except BaseException:
        await service.stop()
        raise
    return service
