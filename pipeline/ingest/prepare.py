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
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import faust
import numpy as np
from aiokafka import AIOKafkaProducer

from pipeline.crypto.envelope import KeyLookup, seal, unseal
from pipeline.crypto.keyring import KeyRing
from pipeline.ingest.policies import PolicyBook
from pipeline.memory.rules.classify import (
    Classification,
    as_said_by,
    classify,
    decided,
    not_remembered,
)
from pipeline.memory.rules.echo import residue
from pipeline.memory.rules.extraction import extract_entities, extract_triplet, search_text
from pipeline.memory.rules.llm_extraction import apply_extraction
from pipeline.memory.rules.redaction import step_in_log_order
from pipeline.memory.rules.slots import NEVER_UPDATES, names_one_slot, slot_of
from pipeline.memory.rules.text import word_count
from pipeline.models.attributes import AttributeGuess, AttributeModel, attribute_model_for
from pipeline.models.classifier import TurnClassifier, TurnVerdict, classifier_for
from pipeline.models.encoders import (
    Encoder,
    VectorMemo,
    Vectors,
    encoder_id,
    known_share,
    load_encoder,
)
from pipeline.models.stages import StageGuess, StageModel, stage_model_for
from pipeline.runtime.kafka import faust_credentials
from pipeline.runtime.metrics import dead_letter_reason, metrics
from pipeline.runtime.settings import Settings
from pipeline.runtime.stage_stats import StageStats
from pipeline.views.state_topic import make_producer
from schemas.codec import decode_event, encode
from schemas.errors import DataKeyDestroyed, InvalidEvent, UnknownDataKey
from schemas.events import (
    CommandIssued,
    ExtractionRecorded,
    InputEvent,
    MemoriesRecalled,
    TurnRecorded,
)
from schemas.memory import DeadLetter, Slot
from schemas.policy import NamespacePolicies
from schemas.prepared import (
    EventPrepared,
    LogPosition,
    ModelIds,
    Rejected,
    TurnAnalysis,
    encode_vector,
)
from schemas.sealed import Sealed
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
    # The Kafka value of each prepared event: sealed with its input's data key, or plain.
    values: list[bytes] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    encode_seconds: float = 0.0
    # Namespaces whose policy history a set_policy in this batch changed: recorded (acks=all)
    # on the policies topic before the prepared events go out.
    policy_changes: dict[str, NamespacePolicies] = field(default_factory=dict)


@dataclass(frozen=True)
class Shredded:
    """An input whose data key was destroyed: it was erased, there is nothing to read."""

    key_id: str


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


def open_input(
    message: InputMessage, keys: KeyLookup | None = None
) -> tuple[InputEvent, Sealed | None]:
    """Open (when sealed), decode, upcast and validate one input; with the envelope it came in.

    The key must be the namespace (it chose the partition, I3), and a sealed event's envelope
    must name the namespace the event says. Raises ``InvalidEvent``, ``UnknownDataKey`` or
    ``DataKeyDestroyed``.
    """
    opened = unseal(message.value, keys, "events")
    event = decode_event(opened.content)
    if not isinstance(event, TurnRecorded | CommandIssued | MemoriesRecalled):
        raise InvalidEvent(f"{event.event_type} does not belong on the input log", "event_type")
    if message.key is not None and message.key.decode("utf-8", "replace") != event.namespace:
        raise InvalidEvent(
            f"message key {message.key!r} differs from namespace {event.namespace!r}",
            "namespace",
            "route",
        )
    if opened.envelope is not None and opened.envelope.namespace != event.namespace:
        raise InvalidEvent(
            f"sealed for namespace {opened.envelope.namespace!r}, the event says "
            f"{event.namespace!r}",
            "namespace",
            "unseal",
        )
    return event, opened.envelope


def decode_input(message: InputMessage, keys: KeyLookup | None = None) -> InputEvent:
    """``open_input`` without the envelope."""
    return open_input(message, keys)[0]


def _unknown_key(error: UnknownDataKey) -> InvalidEvent:
    return InvalidEvent(str(error).removeprefix("key_id: "), "key_id", "unseal")


def prepared_value(
    prepared: EventPrepared, key_id: str | None, keys: KeyRing | None
) -> tuple[EventPrepared, bytes]:
    """The prepared event's Kafka value: sealed with its input's key, its input position plain.

    A key destroyed since the input was opened turns the event into a shredded marker.
    """
    if key_id is None or prepared.event is None:
        return prepared, encode(prepared)
    if keys is None or keys.state(key_id) != "live":
        shredded = EventPrepared(
            source=prepared.source,
            models=prepared.models,
            rejected=Rejected(
                stage="prepare",
                reason=f"data key {key_id} was destroyed: the event was erased",
                field="key_id",
                shredded=True,
            ),
        )
        return shredded, encode(shredded)
    key = keys.data_key(key_id)
    return prepared, seal(prepared, key.namespace, key, "prepared", source=prepared.source)


def turn_search_text(turn: TurnRecorded, *, time_notes: bool = True) -> str:
    """What the indexes and the learned classifier see of a turn.

    The speaker frames the text for the indexes (pronouns, "my", who said it), and the dates its
    relative time phrases point at are resolved against the turn's time.
    """
    return search_text(turn.speaker, turn.text, turn.event_time, time_notes=time_notes)


def _under_policy(
    batch: PreparedBatch, policies: PolicyBook, message: InputMessage, event: InputEvent
) -> InputEvent:
    step = step_in_log_order(event, message.partition, message.offset, policies)
    if step.history is not None:
        batch.policy_changes[step.history.namespace] = step.history
    if step.redacted is not None:
        batch.counts["redacted_turns"] += 1
        batch.counts["redacted_values"] += len(step.redacted.spans)
    return step.event


def rules_analysis(turn: TurnRecorded, *, time_notes: bool = True) -> TurnAnalysis:
    """The rules' filter, kind, importance, triplet and entities for a turn (no vector yet)."""
    return analysis_for(turn, classify(turn.text), time_notes=time_notes)


def learned_classification(text: str, verdict: TurnVerdict) -> Classification:
    """The learned model's filter and kind, with the rules where they are precise.

    The rules' small-talk and kind patterns are precise but rare (on the corpus' held-back
    quarter: filter precision 1.0 at recall 0.13; kind patterns 0.82-0.94 precision at
    0.12-0.32 recall), the model the other way round. So a turn the rules call small talk stays
    filtered, a kind pattern that fired decides the kind, and the model decides the rest: whether
    to remember, and the kind when no pattern fired. Importance, region and the exact rules as
    always (``decided``).
    """
    rules = classify(text)
    if not rules.remember:
        return rules
    if not verdict.remember:
        return not_remembered(verdict.reason)
    if rules.reason.startswith("matched"):
        return decided(text, rules.kind, f"{rules.reason}; {verdict.reason}")
    return decided(text, verdict.kind, verdict.reason)


# The longest turn the gate judges. A longer turn has room for a fact inside the chatter ("Hey
# John! How've you been? I'm writing articles about fantasy novels now"), and the model, which saw
# few such turns as small talk, still often calls it that. Up to GATE_TRUSTED_WORDS a turn is
# filtered below GATE_KEEP; up to GATE_MAX_WORDS only below GATE_SURE_KEEP (near-certain). The
# lengths keep LoCoMo dev's loss at v2's gate's (4 of the 548 evidence turns among the 2,432 the
# rules keep as plain facts), chosen with the corpus folds (training/turn_classifier/RESULTS.md).
# GATE_KEEP is under the model's own threshold (v5: 0.44): at the model's threshold the gate
# filtered terse notes ("router is in the hallway closet", "出席了在西安举办的技术峰会。") that the
# corpus has few of and the tuning half's scenarios ask about. It sits just under the lowest keep
# the model gives a short note the tuning half asks about: v3 0.18, v4 0.14, v5 0.19 (its lowest:
# "和客户张总吃了顿饭，聊了续约的事。" 0.197). Since v5 a kind pattern that fired no longer stops
# the gate ("恭喜你表姐呀，太替她开心了" fires an emotion pattern, "how to squash commits?" a
# procedure one); a turn kept keeps the pattern's kind. Both together: out of fold 0.984 / 0.764
# -> 0.983 / 0.804 (training.turn_classifier.gate_report), LoCoMo dev and the scenarios unchanged.
GATE_MAX_WORDS = 10
GATE_TRUSTED_WORDS = 8
GATE_KEEP = 0.19
GATE_SURE_KEEP = 0.05
# Up to GATE_LONG_WORDS the gate also filters a turn the model is near-certain about
# (GATE_SURE_KEEP) when it calls it a request, greeting, thanks or acknowledgement, never small
# talk: long small talk is where friends tell their news (LoCoMo), long requests to an assistant
# ("what's the idiomatic way to read a file line by line in Rust?") are not. Out of fold 0.983 /
# 0.804 -> 0.981 / 0.827; LoCoMo dev: 13 turns more filtered (one of them evidence),
# recall_all@10 0.724 -> 0.725. Longer bounds, or small talk too, cost LoCoMo (RESULTS.md).
GATE_LONG_WORDS = 15


# What the model calls a short turn it would not keep, where the gate trusts it up to the model's
# own threshold rather than ``GATE_KEEP``: the notes that bound protects ("和客户张总吃了顿饭，
# 聊了续约的事。") are read as small talk, not as a greeting, thanks or a question, which "how do
# i revert a merge lol" or 溜了溜了明天见 are, kept at 0.2-0.4. Not "filler": on the folds as many
# short decisions and notes are read so ("行，那整个仓库都按这个约定来", "budget hotels fine") as
# acknowledgements ("嗯……让我想一下").
_NOT_NOTES = frozenset({"greeting", "thanks", "question"})


def gate_judges(text: str) -> bool:
    """True when the gate asks the model about this turn: the rules would keep it, and it has at
    most ``GATE_LONG_WORDS`` words or could be a topic echo. Turns where a kind pattern fired and
    long possible echoes are judged only for their keep probability, which the echo rule reads
    (a turn the model keeps at >= ``echo.ECHO_MAX_KEEP`` is a statement, never an echo); without
    it LoCoMo dev lost 0.002 recall_all@10, and judging every long turn would cost the second
    encoder about 20 % of the first's time instead of about 4 % (v5 on LoCoMo dev, the model's
    whole time against MiniLM's batched: 7 % up to 10 words, 13 % up to 15; RESULTS.md)."""
    if not classify(text).remember:
        return False
    if word_count(text) <= GATE_LONG_WORDS:
        return True
    left = residue(text)
    return left.acknowledges and not left.negated and not left.asserts


def gated_classification(text: str, verdict: TurnVerdict) -> Classification:
    """The rules' classification, with the model as a small-talk gate for short turns.

    The rules decide everything, except that a short turn they would keep is filtered when the
    model calls it small talk, filler, a greeting, thanks or a bare question (``GATE_*`` above
    say how short and how sure; a greeting, thanks or a question is trusted up to the model's own
    threshold, ``_NOT_NOTES``), a turn of up to ``GATE_LONG_WORDS`` words when the model is
    near-certain it is a request, greeting, thanks or acknowledgement (never small talk), and a
    short plain fact (no kind pattern fired) is kept as a preference when the model's most
    probable memory kind is that. The rules keep most chatter as facts (87 % of the corpus'
    held-back chatter), and chatter stored is chatter recalled; the learned classifier as a
    whole filters too many informative chatty turns on long conversations (LoCoMo, RESULTS.md),
    and those are long turns. The rules' "fact" is only their default (precision 0.14 on the
    held-back quarter) and their preference patterns find few preferences said without a verb
    of liking ("I only drink oolong", "牛肉我是真吃不惯": recall 0.27), where the model finds
    0.84; on long turns it calls LoCoMo's warm chatter preferences too ("Family's love really
    grounds us …": 211 of its dev turns, recall_all@10 0.686 → 0.674), so there the rules
    decide.
    """
    rules = classify(text)
    if not rules.remember:
        return rules
    words = word_count(text)
    if words > GATE_LONG_WORDS:
        return rules
    if words > GATE_MAX_WORDS:
        sure = not verdict.remember and verdict.keep_probability < GATE_SURE_KEEP
        if sure and verdict.label != "small_talk":
            return not_remembered(f"not small talk, longer ({verdict.reason})")
        return rules
    bound = GATE_KEEP if words <= GATE_TRUSTED_WORDS else GATE_SURE_KEEP
    if not verdict.remember and verdict.keep_probability < bound:
        return not_remembered(f"small talk, short ({verdict.reason})")
    if not verdict.remember and words <= GATE_TRUSTED_WORDS and verdict.label in _NOT_NOTES:
        return not_remembered(f"{verdict.label}, short ({verdict.reason})")
    if rules.reason.startswith("matched"):
        return rules
    if verdict.remember and verdict.kind == "preference":
        return decided(text, "preference", f"{rules.reason}; {verdict.reason}")
    return rules


def learned_analysis(
    turn: TurnRecorded, verdict: TurnVerdict, *, time_notes: bool = True, gate: bool = False
) -> TurnAnalysis:
    """The analysis of a turn the learned classifier judged from its search text's vector
    (as the gate of the rules when ``gate``)."""
    combine = gated_classification if gate else learned_classification
    analysis = analysis_for(turn, combine(turn.text, verdict), time_notes=time_notes)
    return analysis.model_copy(update={"keep_probability": _probability(verdict)})


def _probability(verdict: TurnVerdict) -> float:
    # Four digits are all a rule reads; clipped so rounding never leaves [0, 1].
    return min(1.0, max(0.0, round(verdict.keep_probability, 4)))


def analysis_for(
    turn: TurnRecorded, decision: Classification, *, time_notes: bool = True
) -> TurnAnalysis:
    """A turn's analysis once its filter, kind and importance are decided (no vector yet); a
    turn not said by the user weighs as second-hand (``classify.as_said_by``)."""
    decision = as_said_by(decision, turn.role)
    return TurnAnalysis(
        remember=decision.remember,
        kind=decision.kind,
        region=decision.region,
        base_importance=decision.base_importance,
        reason=decision.reason,
        content=turn.text,
        search_text=turn_search_text(turn, time_notes=time_notes),
        triplet=extract_triplet(turn.text, turn.speaker) if decision.remember else None,
        entities=extract_entities(turn.text) if decision.remember else [],
    )


def slot_signal(analysis: TurnAnalysis) -> Slot | None:
    """The slot signal of a remembered statement (its slot is compared by the statement's own
    vector, ``slots.slot_vector``: nothing more to embed).

    Procedures, emotions and small talk never take part in an update, so they get none.
    """
    return slot_of(analysis.content) if takes_slot(analysis) else None


def takes_slot(analysis: TurnAnalysis) -> bool:
    return analysis.remember and analysis.kind not in NEVER_UPDATES


def with_slot(
    analysis: TurnAnalysis,
    slot: Slot,
    guess: AttributeGuess | None = None,
    stage: StageGuess | None = None,
) -> TurnAnalysis:
    """The analysis with its slot signal and, if the attribute model read it, the attribute the
    statement gives a value of (and, if the stage model read it, the stage of its task)."""
    update: dict[str, Any] = guess.slot_fields() if guess is not None else {}
    if stage is not None:
        update.update(stage.slot_fields())
    return analysis.model_copy(update={"slot": slot.model_copy(update=update)})


def attribute_statements(slots: Mapping[int, Slot]) -> list[int]:
    """The statements (batch indices, in order) the attribute model reads: those brief enough to
    hold one slot (``slots.names_one_slot``)."""
    return sorted(index for index, slot in slots.items() if names_one_slot(slot))


def statement_models(
    encoder_name: str, enabled: bool = True
) -> tuple[AttributeModel | None, StageModel | None]:
    """The attribute model for ``encoder_name`` (if ``enabled``), and the stage model beside it:
    the stage model reads the rows the attribute model builds, so it runs only where that one
    does."""
    attributes = attribute_model_for(encoder_name, enabled)
    if attributes is None:
        return None, None
    return attributes, stage_model_for(encoder_name, attributes.second_encoder_id)


def attribute_guesses(
    model: AttributeModel,
    analyses: Mapping[int, TurnAnalysis],
    slots: Mapping[int, Slot],
    vectors: Vectors,
    row_of: Mapping[int, int],
    memo: VectorMemo | None = None,
    stages: StageModel | None = None,
) -> tuple[dict[int, AttributeGuess], dict[int, StageGuess]]:
    """The attribute model's guess for each statement of ``slots`` (batch index → its slot) that is
    brief enough to hold one slot (``slots.names_one_slot``): it reads the batch's vector of the
    statement's search text and its own second vector of that text (``memo``: shared with the
    turn classifier, which embedded the short turns it judged already). ``stages`` reads the same
    rows and tells each statement's task stage."""
    order = attribute_statements(slots)
    if not order:
        return {}, {}
    second = model.second_vectors([analyses[index].search_text for index in order], memo)
    first = np.asarray(vectors[[row_of[index] for index in order]], dtype=np.float64)
    rows = np.hstack([first, second])
    staged = {} if stages is None else dict(zip(order, stages.guesses(rows), strict=True))
    return dict(zip(order, model.guesses(rows), strict=True)), staged


def prepare_batch(
    messages: Sequence[InputMessage],
    encoder: Encoder,
    extractions: Mapping[ExtractionKey, ExtractionRecorded] | None = None,
    keys: KeyRing | None = None,
    *,
    time_notes: bool = True,
    classifier: TurnClassifier | None = None,
    policies: PolicyBook | None = None,
    attributes: AttributeModel | None = None,
    stages: StageModel | None = None,
) -> PreparedBatch:
    """Prepare a batch: one encoder call for every remembered turn and every forget query.

    With a learned ``classifier`` every turn's search text is embedded, because the filter reads
    that vector; with ``None`` the rules decide first and only remembered turns are embedded.
    ``extractions`` ((namespace, turn event id) → recorded LLM extraction) override either for
    those turns; they come from the log, never from a live call here (I2). ``keys`` opens sealed
    inputs and seals each prepared event with its input's key; an input whose key was destroyed
    passes on as a shredded marker, one whose key is unknown is dead-lettered. ``policies`` (each
    namespace's policy history, updated in place by the batch's ``set_policy`` commands) redacts
    turns before they are classified, extracted or encoded; the original stays only in the log.
    ``attributes`` says which attribute each statement that takes a slot gives a value of, and
    ``stages`` (read with it) the stage of the task it tells; their answers are recorded in the
    slot, so consolidate and replay never run them.
    """
    batch = PreparedBatch()
    recorded = extractions or {}
    encoder_name = encoder_id(encoder)
    classifier_name = classifier.id if classifier is not None else RULES_CLASSIFIER
    decoded: list[tuple[InputMessage, InputEvent | InvalidEvent | Shredded]] = []
    key_ids: list[str | None] = []
    for message in messages:
        key_id = None
        try:
            opened, envelope = open_input(message, keys)
            key_id = envelope.key_id if envelope is not None else None
            if policies is not None:
                opened = _under_policy(batch, policies, message, opened)
            if key_id is None:
                batch.counts["plain_inputs"] += 1  # a raw producer's: it cannot be shredded
            decoded.append((message, opened))
        except DataKeyDestroyed as destroyed:
            decoded.append((message, Shredded(destroyed.key_id)))
        except UnknownDataKey as unknown:
            decoded.append((message, _unknown_key(unknown)))
        except InvalidEvent as error:
            decoded.append((message, error))
        key_ids.append(key_id)

    analyses: dict[int, TurnAnalysis] = {}
    # Second-encoder vectors the classifier and the attribute model both read, embedded once.
    memo: VectorMemo = {}
    to_classify: dict[int, TurnRecorded] = {}  # turns the learned classifier decides
    used: dict[int, ExtractionRecorded] = {}
    texts: list[str] = []
    text_of: dict[int, int] = {}
    slot_of_turn: dict[int, Slot] = {}  # index -> its statement's slot signal
    for index, (_, event) in enumerate(decoded):
        if isinstance(event, TurnRecorded):
            record = recorded.get((event.namespace, event.event_id))
            if record is not None:
                analyses[index] = apply_extraction(
                    event, rules_analysis(event, time_notes=time_notes), record
                )
                used[index] = record
            elif classifier is None:
                analyses[index] = rules_analysis(event, time_notes=time_notes)
            else:
                to_classify[index] = event
                text_of[index] = len(texts)
                texts.append(turn_search_text(event, time_notes=time_notes))
            if index in analyses:
                analysis = analyses[index]
                if analysis.remember:
                    text_of[index] = len(texts)
                    texts.append(analysis.search_text)
                slot = slot_signal(analysis)
                if slot is not None:
                    slot_of_turn[index] = slot
        elif isinstance(event, CommandIssued) and event.query is not None:
            text_of[index] = len(texts)
            texts.append(event.query)
    judged: dict[int, TurnRecorded] = {}
    if classifier is not None:
        asked = set(judged_by_model(classifier, to_classify))
        judged = {index: turn for index, turn in to_classify.items() if index in asked}
        for index, turn in to_classify.items():
            if index not in asked:  # the rules' alone, known before any vector
                analyses[index] = rules_analysis(turn, time_notes=time_notes)
                slot = slot_signal(analyses[index])
                if slot is not None:
                    slot_of_turn[index] = slot
    ahead = second_vectors_ahead(
        classifier,
        [texts[text_of[index]] for index in judged],  # their search texts, embedded below too
        attributes,
        [analyses[index].search_text for index in attribute_statements(slot_of_turn)],
        memo,
    )
    started = time.perf_counter()
    vectors = encoder.encode(texts)
    batch.encode_seconds = time.perf_counter() - started
    batch.counts["encoded_texts"] += len(texts)
    if ahead is not None:
        ahead.result()  # the memo is the main thread's again
    if classifier is not None and judged:
        learned = classify_turns(
            classifier, judged, vectors, text_of, time_notes=time_notes, memo=memo
        )
        analyses.update(learned)
        for index, analysis in learned.items():  # the kind is known only now
            slot = slot_signal(analysis)
            if slot is not None:
                slot_of_turn[index] = slot

    guesses, staged = (
        attribute_guesses(attributes, analyses, slot_of_turn, vectors, text_of, memo, stages)
        if attributes is not None
        else ({}, {})
    )
    for index, (message, event) in enumerate(decoded):
        models = ModelIds(
            encoder=encoder_name,
            classifier=classifier_name,
            extractor=used[index].extractor if index in used else None,
            attributes=attributes.id if attributes is not None else None,
            stages=stages.id if stages is not None and attributes is not None else None,
        )
        if isinstance(event, Shredded):
            batch.counts["shredded"] += 1
            prepared = EventPrepared(
                source=message.position,
                models=models,
                rejected=Rejected(
                    stage="prepare",
                    reason=f"data key {event.key_id} was destroyed: the event was erased",
                    field="key_id",
                    shredded=True,
                ),
            )
        elif isinstance(event, InvalidEvent):
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
            if turn_analysis is not None and index in slot_of_turn:
                turn_analysis = with_slot(
                    turn_analysis, slot_of_turn[index], guesses.get(index), staged.get(index)
                )
            # A forget's query was embedded (it has a vector): its vector and how much of it the
            # encoder read go with it.
            query = event.query if isinstance(event, CommandIssued) and vector is not None else None
            prepared = EventPrepared(
                source=message.position,
                models=models,
                event=event,
                analysis=turn_analysis,
                query_vector_b64=(
                    None if query is None or vector is None else encode_vector(vector)
                ),
                query_known_share=1.0 if query is None else round(known_share(encoder, query), 4),
            )
            batch.counts[event.event_type] += 1
            if turn_analysis is not None and not turn_analysis.remember:
                batch.counts["filtered"] += 1
        prepared, value = prepared_value(prepared, key_ids[index], keys)
        batch.prepared.append((message, prepared))
        batch.values.append(value)
    return batch


def judged_by_model(classifier: TurnClassifier, turns: Mapping[int, TurnRecorded]) -> list[int]:
    """The turns (batch indices, in order) the model is asked about: every one, or under the gate
    only those it may filter or the echo rule may read (:func:`gate_judges`); the rest are the
    rules' alone (no keep probability recorded), which spares the second encoder most long turns."""
    gate = classifier.mode == "gate"
    return [index for index in turns if not gate or gate_judges(turns[index].text)]


# One thread beside the first encoder: the second encoder's vectors (USE) that the classifier and
# the attribute model will read are computed while the first encoder runs (both spend their time
# in native code that releases the GIL), so on a spare core the second encoder's time leaves the
# batch's. The vectors are each text's own either way (``encode_one_at_a_time``): only when they
# are computed changes, never what they are.
_SECOND_ENCODER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="second-encoder")


def second_vectors_ahead(
    classifier: TurnClassifier | None,
    classifier_texts: Sequence[str],
    attributes: AttributeModel | None,
    attribute_texts: Sequence[str],
    memo: VectorMemo,
) -> Future[None] | None:
    """Start computing, into ``memo``, the second vectors of the texts the classifier will judge
    and of the statements the attribute model will read that are known before the first encoder
    runs (the caller leaves ``memo`` alone until the future is done); None: nothing to compute."""
    jobs: list[tuple[Callable[[Sequence[str], VectorMemo], object], Sequence[str]]] = []
    if classifier is not None and classifier.second_encoder_name is not None and classifier_texts:
        jobs.append((classifier.second_vectors, classifier_texts))
    if attributes is not None and attribute_texts:
        jobs.append((attributes.second_vectors, attribute_texts))
    if not jobs:
        return None

    def run() -> None:
        for compute, texts in jobs:
            compute(texts, memo)

    return _SECOND_ENCODER.submit(run)


def classify_turns(
    classifier: TurnClassifier,
    turns: Mapping[int, TurnRecorded],
    vectors: Vectors,
    row_of: Mapping[int, int],
    *,
    time_notes: bool = True,
    memo: VectorMemo | None = None,
) -> dict[int, TurnAnalysis]:
    """The learned analyses of ``turns`` (by batch index; the ones :func:`judged_by_model` asks
    about) from their rows of the batch's vectors."""
    order = list(turns)
    search_texts = [turn_search_text(turns[index], time_notes=time_notes) for index in order]
    inputs = classifier.input_vectors(
        search_texts, vectors[[row_of[index] for index in order]], memo
    )
    verdicts = classifier.classify_many([turns[index].text for index in order], inputs)
    gate = classifier.mode == "gate"
    return {
        index: learned_analysis(turns[index], verdict, time_notes=time_notes, gate=gate)
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
            value=value,
            partition=message.partition,
        )
        for (message, _), value in zip(batch.prepared, batch.values, strict=True)
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


def observe_batch(batch: PreparedBatch, encoder_name: str, seconds: float) -> None:
    """Prometheus series of the stage (operations only; nothing decides on them)."""
    series = metrics()
    for event_type in ("TurnRecorded", "CommandIssued", "MemoriesRecalled"):
        if batch.counts[event_type]:
            series.events_in.labels("prepare", event_type).inc(batch.counts[event_type])
    series.events_out.labels("prepare", "prepared").inc(len(batch.prepared))
    for letter in batch.dead_letters:
        series.dead_letters.labels("prepare", dead_letter_reason(letter.stage, letter.field)).inc()
    series.encode_seconds.labels(encoder_name).observe(batch.encode_seconds)
    series.batch_seconds.labels("prepare").observe(seconds)


def _ring(state: dict[str, Any]) -> KeyRing | None:
    store = state.get("keys")
    return None if store is None else store.ring


def create_prepare_app(settings: Settings, encoder: Encoder | None = None) -> faust.App:
    """The ``prepare`` stage as a Faust app (built by a factory, never at import time)."""
    if not settings.bootstrap:
        raise ValueError("create_prepare_app needs settings.bootstrap (a running Kafka)")
    names = topic_names(settings.topic_prefix)
    app = faust.App(
        consumer_group(settings.app_id, "prepare"),
        broker=f"kafka://{settings.bootstrap}",
        broker_credentials=faust_credentials(settings.kafka),
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
        # On shutdown Faust stops fetching, then waits until every delivered event is acked (our
        # batch in flight published) before the shutdown hook closes the producer; only then
        # are the agents stopped, so no batch is cut in half and nothing unpublished is acked.
        stream_wait_empty=True,
        key_serializer="raw",
        value_serializer="raw",
    )
    events = app.topic(names["events"], key_type=bytes, value_type=bytes)
    state: dict[str, Any] = {}
    stats = StageStats("prepare")
    app.hindsight_stats = stats  # type: ignore[attr-defined]

    async def open_stage() -> None:
        """Open what the stage needs, once; after a failure the agent's restart resumes here
        with whatever did open (so a missing topic is reported again, never a KeyError)."""
        if state.get("ready"):
            return
        from pipeline.crypto.keystore import open_key_store
        from pipeline.ingest.policies import open_policy_store

        loop = asyncio.get_running_loop()
        if "encoder" not in state:
            state["encoder"] = encoder or await loop.run_in_executor(
                None, load_encoder, settings.encoder, settings.encoder_threads
            )
        if "attributes" not in state:
            state["attributes"], state["stages"] = statement_models(
                state["encoder"].name, settings.slot_attributes
            )
        if "classifier" not in state:
            state["classifier"] = classifier_for(settings.classifier, state["encoder"].name)
            log.info(
                "prepare: classifier %s",
                state["classifier"].id if state["classifier"] is not None else RULES_CLASSIFIER,
            )
        if "producer" not in state:
            producer = make_producer(
                settings.bootstrap or "", f"{settings.app_id}-prepare", settings.kafka
            )
            await producer.start()
            state["producer"] = producer
        if "keys" not in state:
            state["keys"] = await open_key_store(settings)
        if "policies" not in state:
            state["policies"] = await open_policy_store(settings, state["producer"])
        if settings.llm_base_url and "extractions" not in state:
            from pipeline.ingest.extractions import open_recorded_extractions

            state["extractions"] = await open_recorded_extractions(
                settings, state["producer"], call_llm=True, keys=_ring(state)
            )
        state["ready"] = True

    caught_up: set[int] = set()  # input partitions whose policy histories this worker has read

    @app.on_partitions_assigned.connect  # type: ignore[misc, arg-type]
    async def forget_caught_up(app: faust.App, *_: Any, **__: Any) -> None:
        # Any partition may have been held by another worker in between: read again before use.
        caught_up.clear()

    @app.timer(interval=2.0)
    async def write_stats() -> None:
        stats.write(settings.data_dir)

    @app.on_before_shutdown.connect  # type: ignore[misc, arg-type]
    async def close_stage(app: faust.App, **_: Any) -> None:
        stats.write(settings.data_dir)
        extractions = state.pop("extractions", None)
        if extractions is not None:
            await extractions.stop()
        keys = state.pop("keys", None)
        if keys is not None:
            await keys.stop()
        policies = state.pop("policies", None)
        if policies is not None:
            await policies.stop()
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
            if state["keys"] is not None:
                # Every key is acked before the first value sealed with it; the follower may
                # just not have read it yet. One still unknown after the wait is dead-lettered.
                with stats.timed("keys"):
                    await state["keys"].wait_for_values(
                        [m.value for m in messages], settings.key_wait_s
                    )
            # Only this worker writes the histories of the namespaces on a partition it holds, so
            # the topic is read again only for a partition it has not prepared since it was last
            # assigned: that catches up with what the previous holder wrote before handing over.
            fresh = {m.partition for m in messages} - caught_up
            if fresh:
                with stats.timed("policies"):
                    await state["policies"].catch_up()
                caught_up.update(fresh)
            book = state["policies"].book
            extractions = None
            if "extractions" in state:
                # Looked up, or asked and recorded (acks=all) before use (I2); the LLM sees
                # turns as redacted as the rules do.
                with stats.timed("extractions"):
                    extractions = await state["extractions"].for_batch(messages, dict(book))
            started = time.perf_counter()
            with stats.timed("prepare"):
                batch = await loop.run_in_executor(
                    None,
                    partial(
                        prepare_batch,
                        messages,
                        state["encoder"],
                        extractions,
                        _ring(state),
                        time_notes=settings.memory.time_notes,
                        classifier=state["classifier"],
                        attributes=state["attributes"],
                        stages=state["stages"],
                        policies=book,
                    ),
                )
            if batch.policy_changes:
                await state["policies"].record(batch.policy_changes.values())
            with stats.timed("publish"):
                await publish_prepared(state["producer"], settings, batch, names["prepared"])
            observe_batch(batch, encoder_id(state["encoder"]), time.perf_counter() - started)
            stats.seconds["encode"] += batch.encode_seconds
            stats.counts.update(batch.counts)
            stats.counts["events"] += len(messages)
            stats.counts["batches"] += 1

    return app
