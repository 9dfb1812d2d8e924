"""Stage ``prepare``: decode, validate, classify, extract and encode; stateless and batched.

Reads the input log ``hindsight.events.v1`` and writes one ``EventPrepared`` per input event to
``hindsight.prepared.v1`` — same key, same partition, same order — carrying the decoded event,
the analysis of a turn, the vectors and the ids of the models that made them. Bad input becomes a
dead letter (original bytes, stage, reason, field) plus a rejected marker, so the views'
watermarks still pass it (I7). Commands and signals pass through in order.

Any number of ``prepare`` workers can run (one consumer group): this is where the expensive
model runs. It is at-least-once: after a crash a batch may be prepared twice, and
``consolidate`` skips input offsets it already applied, so duplicates change nothing (I4).

The pure part (:func:`prepare_batch`) is what replay's ``--reindex`` runs too.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import faust
from aiokafka import AIOKafkaProducer

from pipeline.memory.rules.classify import Classification, classify, decided, not_remembered
from pipeline.memory.rules.extraction import extract_entities, extract_triplet
from pipeline.memory.rules.llm_extraction import apply_extraction
from pipeline.models.classifier import TurnClassifier, TurnVerdict, classifier_for
from pipeline.models.encoders import Encoder, Vectors, encoder_id, load_encoder
from pipeline.runtime.settings import Settings
from pipeline.runtime.stage_stats import StageStats
from pipeline.views.state_topic import make_producer
from schemas.codec import decode_event, encode
from schemas.errors import InvalidEvent
from schemas.events import (
    CommandIssued,
    ExtractionRecorded,
    InputEvent,
    MemoriesRecalled,
    TurnRecorded,
)
from schemas.memory import DeadLetter
from schemas.prepared import (
    EventPrepared,
    LogPosition,
    ModelIds,
    Rejected,
    TurnAnalysis,
    encode_vector,
)
from topics.catalogue import consumer_group, topic_names

log = logging.getLogger("hindsight.prepare")

RULES_CLASSIFIER = "rules-v1"
ExtractionKey = tuple[str, str]  # (namespace, turn event id)


@dataclass(frozen=True)
class InputMessage:
    """One message as read from the input log."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None

    @property
    def position(self) -> LogPosition:
        return LogPosition(
            topic=self.topic,
            partition=self.partition,
            offset=self.offset,
            timestamp_ms=self.timestamp_ms,
        )


@dataclass
class PreparedBatch:
    prepared: list[tuple[InputMessage, EventPrepared]] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    encode_seconds: float = 0.0


def dead_letter(message: InputMessage, error: InvalidEvent) -> DeadLetter:
    return DeadLetter(
        stage=error.stage,
        reason=error.reason,
        field=error.field,
        source_topic=message.topic,
        source_partition=message.partition,
        source_offset=message.offset,
        original_key_b64=base64.b64encode(message.key).decode()
        if message.key is not None
        else None,
        original_value_b64=base64.b64encode(message.value or b"").decode(),
    )


def decode_input(message: InputMessage) -> InputEvent:
    """Decode, upcast and validate; the key must be the namespace (it chose the partition, I3)."""
    event = decode_event(message.value)
    if not isinstance(event, TurnRecorded | CommandIssued | MemoriesRecalled):
        raise InvalidEvent(f"{event.event_type} does not belong on the input log", "event_type")
    if message.key is not None and message.key.decode("utf-8", "replace") != event.namespace:
        raise InvalidEvent(
            f"message key {message.key!r} differs from namespace {event.namespace!r}",
            "namespace",
            "route",
        )
    return event


def search_text_of(turn: TurnRecorded) -> str:
    """What the indexes and the learned classifier see of a turn.

    The speaker frames the text for the indexes (pronouns, "my", who said it).
    """
    return f"{turn.speaker}: {turn.text}"


def rules_analysis(turn: TurnRecorded) -> TurnAnalysis:
    """The rules' filter, kind, importance, triplet and entities for a turn (no vector yet)."""
    return analysis_for(turn, classify(turn.text))


def learned_classification(turn: TurnRecorded, verdict: TurnVerdict) -> Classification:
    """The learned model's filter and kind; importance, region and the exact rules as always."""
    if not verdict.remember:
        return not_remembered(verdict.reason)
    return decided(turn.text, verdict.kind, verdict.reason)


def learned_analysis(turn: TurnRecorded, verdict: TurnVerdict) -> TurnAnalysis:
    """The analysis of a turn the learned classifier judged from its search text's vector."""
    return analysis_for(turn, learned_classification(turn, verdict))


def analysis_for(turn: TurnRecorded, decision: Classification) -> TurnAnalysis:
    """A turn's analysis once its filter, kind and importance are decided (no vector yet)."""
    return TurnAnalysis(
        remember=decision.remember,
        kind=decision.kind,
        region=decision.region,
        base_importance=decision.base_importance,
        reason=decision.reason,
        content=turn.text,
        search_text=search_text_of(turn),
        triplet=extract_triplet(turn.text, turn.speaker) if decision.remember else None,
        entities=extract_entities(turn.text) if decision.remember else [],
    )


def prepare_batch(
    messages: Sequence[InputMessage],
    encoder: Encoder,
    extractions: Mapping[ExtractionKey, ExtractionRecorded] | None = None,
    classifier: TurnClassifier | None = None,
) -> PreparedBatch:
    """Prepare a batch: one encoder call for the turns and the forget queries.

    With a learned ``classifier`` every turn's search text is embedded, because the filter reads
    that vector; with ``None`` the rules decide first and only remembered turns are embedded.
    ``extractions`` ((namespace, turn event id) → recorded LLM extraction) override either for
    those turns; they come from the log, never from a live call here (I2).
    """
    batch = PreparedBatch()
    recorded = extractions or {}
    encoder_name = encoder_id(encoder)
    classifier_name = classifier.id if classifier is not None else RULES_CLASSIFIER
    decoded: list[tuple[InputMessage, InputEvent | InvalidEvent]] = []
    for message in messages:
        try:
            decoded.append((message, decode_input(message)))
        except InvalidEvent as error:
            decoded.append((message, error))

    analyses: dict[int, TurnAnalysis] = {}
    to_classify: dict[int, TurnRecorded] = {}  # turns the learned classifier decides
    used: dict[int, ExtractionRecorded] = {}
    texts: list[str] = []
    text_of: dict[int, int] = {}
    for index, (_, event) in enumerate(decoded):
        if isinstance(event, TurnRecorded):
            record = recorded.get((event.namespace, event.event_id))
            if record is not None:
                analyses[index] = apply_extraction(event, rules_analysis(event), record)
                used[index] = record
            elif classifier is None:
                analyses[index] = rules_analysis(event)
            else:
                to_classify[index] = event
                text_of[index] = len(texts)
                texts.append(search_text_of(event))
            if index in analyses and analyses[index].remember:
                text_of[index] = len(texts)
                texts.append(analyses[index].search_text)
        elif isinstance(event, CommandIssued) and event.query is not None:
            text_of[index] = len(texts)
            texts.append(event.query)
    started = time.perf_counter()
    vectors = encoder.encode(texts)
    batch.encode_seconds = time.perf_counter() - started
    if classifier is not None and to_classify:
        analyses.update(classify_turns(classifier, to_classify, vectors, text_of))

    for index, (message, event) in enumerate(decoded):
        models = ModelIds(
            encoder=encoder_name,
            classifier=classifier_name,
            extractor=used[index].extractor if index in used else None,
        )
        if isinstance(event, InvalidEvent):
            batch.dead_letters.append(dead_letter(message, event))
            batch.counts["dead_letters"] += 1
            prepared = EventPrepared(
                source=message.position,
                models=models,
                rejected=Rejected(stage=event.stage, reason=event.reason, field=event.field),
            )
        else:
            vector = vectors[text_of[index]] if index in text_of else None
            turn_analysis = analyses.get(index)
            if turn_analysis is not None and vector is not None and turn_analysis.remember:
                turn_analysis = turn_analysis.model_copy(
                    update={"vector_b64": encode_vector(vector)}
                )
            prepared = EventPrepared(
                source=message.position,
                models=models,
                event=event,
                analysis=turn_analysis,
                query_vector_b64=(
                    encode_vector(vector)
                    if vector is not None and isinstance(event, CommandIssued)
                    else None
                ),
            )
            batch.counts[event.event_type] += 1
            if turn_analysis is not None and not turn_analysis.remember:
                batch.counts["filtered"] += 1
        batch.prepared.append((message, prepared))
    return batch


def classify_turns(
    classifier: TurnClassifier,
    turns: Mapping[int, TurnRecorded],
    vectors: Vectors,
    row_of: Mapping[int, int],
) -> dict[int, TurnAnalysis]:
    """The learned analyses of ``turns`` (by batch index) from their rows of the batch's vectors."""
    order = list(turns)
    verdicts = classifier.classify_many(
        [turns[index].text for index in order], vectors[[row_of[index] for index in order]]
    )
    return {
        index: learned_analysis(turns[index], verdict)
        for index, verdict in zip(order, verdicts, strict=True)
    }


async def publish_prepared(
    producer: AIOKafkaProducer, settings: Settings, batch: PreparedBatch, prepared_topic: str
) -> None:
    """Send every prepared event to its input partition and the dead letters; wait for acks."""
    names = topic_names(settings.topic_prefix)
    futures = [
        await producer.send(
            prepared_topic,
            key=message.key,
            value=encode(prepared),
            partition=message.partition,
        )
        for message, prepared in batch.prepared
    ]
    futures += [
        await producer.send(
            names["dead_letters"],
            key=str(letter.source_offset).encode(),
            value=encode(letter),
            partition=letter.source_partition,
        )
        for letter in batch.dead_letters
    ]
    if futures:
        await asyncio.gather(*futures)


def create_prepare_app(settings: Settings, encoder: Encoder | None = None) -> faust.App:
    """The ``prepare`` stage as a Faust app (built by a factory, never at import time)."""
    if not settings.bootstrap:
        raise ValueError("create_prepare_app needs settings.bootstrap (a running Kafka)")
    names = topic_names(settings.topic_prefix)
    app = faust.App(
        consumer_group(settings.app_id, "prepare"),
        broker=f"kafka://{settings.bootstrap}",
        datadir=str(Path(settings.data_dir) / "faust-prepare"),
        web_enabled=False,
        producer_acks=-1,
        consumer_auto_offset_reset="earliest",
        topic_partitions=settings.partitions,
        topic_replication_factor=settings.replication_factor,
        broker_commit_every=1000,
        broker_commit_interval=1.0,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=settings.heartbeat_interval_s,
        stream_wait_empty=False,
        key_serializer="raw",
        value_serializer="raw",
    )
    events = app.topic(names["events"], key_type=bytes, value_type=bytes)
    state: dict[str, Any] = {}
    stats = StageStats("prepare")
    app.hindsight_stats = stats  # type: ignore[attr-defined]

    async def open_stage() -> None:
        if "producer" in state:
            return
        loop = asyncio.get_running_loop()
        state["encoder"] = encoder or await loop.run_in_executor(
            None, load_encoder, settings.encoder
        )
        state["classifier"] = classifier_for(settings.classifier, state["encoder"].name)
        log.info(
            "prepare: classifier %s",
            state["classifier"].id if state["classifier"] is not None else RULES_CLASSIFIER,
        )
        producer = make_producer(settings.bootstrap or "", f"{settings.app_id}-prepare")
        await producer.start()
        state["producer"] = producer
        if settings.llm_base_url:
            from pipeline.ingest.extractions import open_recorded_extractions

            state["extractions"] = await open_recorded_extractions(
                settings, producer, call_llm=True
            )

    @app.timer(interval=2.0)
    async def write_stats() -> None:
        stats.write(settings.data_dir)

    @app.on_before_shutdown.connect  # type: ignore[misc, arg-type]
    async def close_stage(app: faust.App, **_: Any) -> None:
        stats.write(settings.data_dir)
        extractions = state.pop("extractions", None)
        if extractions is not None:
            await extractions.stop()
        producer = state.pop("producer", None)
        if producer is not None:
            await producer.stop()

    @app.agent(events)
    async def prepare(stream: faust.StreamT[bytes]) -> None:
        loop = asyncio.get_running_loop()
        await open_stage()
        batches = stream.take_events(  # type: ignore[attr-defined]
            settings.batch_size, within=settings.batch_window_s
        )
        async for taken in batches:
            messages = [
                InputMessage(
                    topic=e.message.topic,
                    partition=e.message.partition,
                    offset=e.message.offset,
                    timestamp_ms=int(e.message.timestamp * 1000),
                    key=e.message.key,
                    value=e.message.value,
                )
                for e in taken
            ]
            extractions = None
            if "extractions" in state:
                # Looked up, or asked and recorded (acks=all) before use (I2).
                with stats.timed("extractions"):
                    extractions = await state["extractions"].for_batch(messages)
            with stats.timed("prepare"):
                batch = await loop.run_in_executor(
                    None,
                    prepare_batch,
                    messages,
                    state["encoder"],
                    extractions,
                    state["classifier"],
                )
            with stats.timed("publish"):
                await publish_prepared(state["producer"], settings, batch, names["prepared"])
            stats.seconds["encode"] += batch.encode_seconds
            stats.counts.update(batch.counts)
            stats.counts["events"] += len(messages)
            stats.counts["batches"] += 1

    return app
