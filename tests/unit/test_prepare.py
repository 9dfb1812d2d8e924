"""``prepare_batch``: decode and validate (dead letters with the original bytes plus a rejected
marker in the input's place), the rules' analysis, and one encoder call per batch for the
remembered turns and the forget queries."""

from __future__ import annotations

import base64
from pathlib import Path

import numpy as np
import orjson
import pytest
from ingest_support import (
    BROKER_T0_MS,
    EVENTS,
    T0,
    BagOfWordsEncoder,
    ExactEncoder,
    Log,
)

import schemas
from pipeline.ingest.prepare import (
    GATE_KEEP,
    GATE_SURE_KEEP,
    RULES_CLASSIFIER,
    PreparedBatch,
    prepare_batch,
    rules_analysis,
)
from pipeline.memory.rules.classify import SECOND_HAND_IMPORTANCE
from pipeline.memory.rules.llm_extraction import extractor_info, record_extraction, rules_extraction
from pipeline.models.classifier import LEXICAL_FEATURES, TurnClassifier
from schemas.codec import decode_event, decode_prepared, encode
from schemas.events import ExtractorInfo, TurnRecorded
from schemas.memory import DeadLetter
from schemas.prepared import EventPrepared

MYSQL = "We use MySQL for the billing database"
OFFICE = "The office is in the city center"
FORGET = "forget my home address"


def prepare(*messages: object, encoder: BagOfWordsEncoder | None = None) -> PreparedBatch:
    return prepare_batch(list(messages), encoder or BagOfWordsEncoder())  # type: ignore[arg-type]


def dead(batch: PreparedBatch) -> tuple[DeadLetter, EventPrepared]:
    """The batch's one dead letter and the rejected marker left in its place."""
    [letter] = batch.dead_letters
    assert batch.counts["dead_letters"] == 1
    [marker] = [p for _, p in batch.prepared if p.rejected is not None]
    assert marker.event is None and marker.analysis is None
    assert marker.source.offset == letter.source_offset
    assert marker.rejected is not None
    assert (marker.rejected.stage, marker.rejected.reason, marker.rejected.field) == (
        letter.stage,
        letter.reason,
        letter.field,
    )
    return letter, marker


def turn_payload(log: Log, text: str = MYSQL) -> dict[str, object]:
    payload: dict[str, object] = orjson.loads(log.turn(text).value or b"")
    return payload


# -- dead letters and rejected markers (I7) -----------------------------------------------------


def test_malformed_bytes_become_a_dead_letter_with_the_original_bytes() -> None:
    log = Log()
    garbage = b'{"event_type": "TurnRecorded", oops'
    bad = log.raw(garbage, b"acme")

    letter, marker = dead(prepare(bad))

    assert base64.b64decode(letter.original_value_b64) == garbage
    assert letter.original_key_b64 is not None
    assert base64.b64decode(letter.original_key_b64) == b"acme"
    assert letter.stage == "decode"
    assert "malformed JSON" in letter.reason
    assert (letter.source_topic, letter.source_partition, letter.source_offset) == (
        EVENTS,
        0,
        bad.offset,
    )
    # A dead letter is itself a versioned JSON event, and so is the marker.
    assert orjson.loads(encode(letter))["event_type"] == "DeadLetter"
    assert decode_prepared(encode(marker)) == marker


def test_the_batch_keeps_going_after_a_poison_event_in_input_order() -> None:
    log = Log()
    messages = [log.turn(MYSQL), log.raw(b"\xff\x00 not json", b"acme"), log.turn(OFFICE)]

    batch = prepare(*messages)

    assert [m for m, _ in batch.prepared] == messages
    assert [p.source.offset for _, p in batch.prepared] == [0, 1, 2]
    assert [p.rejected is None for _, p in batch.prepared] == [True, False, True]
    assert batch.counts["TurnRecorded"] == 2
    assert batch.dead_letters[0].source_offset == 1


def test_an_invalid_field_is_named_in_the_dead_letter() -> None:
    log = Log()
    payload = turn_payload(log)
    del payload["text"]
    value = orjson.dumps(payload)

    letter, _ = dead(prepare(log.raw(value, b"acme")))

    assert letter.stage == "validate"
    assert letter.field == "text"
    assert base64.b64decode(letter.original_value_b64) == value


def test_an_unknown_schema_version_is_dead_lettered_at_the_upcast_stage() -> None:
    log = Log()
    payload = turn_payload(log)
    payload["schema_version"] = 9

    letter, _ = dead(prepare(log.raw(orjson.dumps(payload), b"acme")))

    assert letter.stage == "upcast"
    assert letter.field == "schema_version"


def test_a_message_whose_key_differs_from_its_namespace_is_dead_lettered() -> None:
    log = Log()
    value = log.turn(MYSQL, namespace="acme").value

    letter, _ = dead(prepare(log.raw(value, b"globex")))

    assert letter.stage == "route"
    assert letter.field == "namespace"
    assert "globex" in letter.reason


def test_a_message_without_a_key_is_taken_by_its_namespace() -> None:
    log = Log()

    batch = prepare(log.raw(log.turn(MYSQL).value, None))

    assert batch.dead_letters == []
    [(_, prepared)] = batch.prepared
    assert prepared.namespace == "acme"


@pytest.mark.parametrize("event_type", ["ExtractionRecorded", "EventPrepared"])
def test_an_event_that_is_not_an_input_event_is_dead_lettered(event_type: str) -> None:
    log = Log()
    if event_type == "ExtractionRecorded":
        turn = TurnRecorded.model_validate(turn_payload(log))
        value = encode(
            record_extraction(turn, extractor_info("m"), rules_extraction(rules_analysis(turn)))
        )
    else:
        [(_, prepared)] = prepare(log.turn(MYSQL)).prepared
        value = encode(prepared)

    letter, _ = dead(prepare(log.raw(value, b"acme")))

    assert letter.field == "event_type"
    assert event_type in letter.reason


def test_an_empty_value_is_dead_lettered() -> None:
    letter, _ = dead(prepare(Log().raw(None, b"acme")))

    assert letter.stage == "decode"
    assert letter.original_value_b64 == ""


def test_an_out_of_range_event_time_is_a_dead_letter_not_a_crash() -> None:
    log = Log()
    payload = turn_payload(log)
    payload["event_time"] = "0001-01-01T00:00:00+05:00"

    letter, _ = dead(prepare(log.raw(orjson.dumps(payload), b"acme")))

    assert letter.field == "event_time"


def test_an_old_turn_version_is_upcast_before_it_is_prepared() -> None:
    fixture = (Path(schemas.__file__).parent / "fixtures" / "turn_v1.json").read_bytes()

    [(_, prepared)] = prepare(Log().raw(fixture, b"acme")).prepared

    assert isinstance(prepared.event, TurnRecorded)
    assert prepared.event.schema_version == 2
    assert prepared.analysis is not None and prepared.analysis.content == prepared.event.text


# -- analysis, vectors and the one encoder call -------------------------------------------------


def test_one_encoder_call_for_the_remembered_turns_and_the_forget_queries() -> None:
    encoder = BagOfWordsEncoder()
    log = Log()

    batch = prepare(
        log.turn("hi"),
        log.turn(MYSQL),
        log.command("forget", query=FORGET),
        log.command("forget", memory_ids=["m_1"]),
        log.recalled(["m_1"]),
        log.turn(OFFICE, speaker="bob"),
        encoder=encoder,
    )

    # The remembered turns and the forget query, all in one call (a slot is compared by its
    # statement's own vector, so nothing more is embedded for it).
    assert encoder.calls == [[f"alice: {MYSQL}", FORGET, f"bob: {OFFICE}"]]
    prepared = [p for _, p in batch.prepared]
    hi, mysql, by_query, by_ids, signal, office = prepared
    assert hi.analysis is not None and not hi.analysis.remember
    assert hi.analysis.vector_b64 is None
    assert mysql.analysis is not None
    np.testing.assert_array_equal(mysql.analysis.vector(), encoder.row(f"alice: {MYSQL}"))
    query_vector = by_query.query_vector()
    assert query_vector is not None
    np.testing.assert_array_equal(query_vector, encoder.row(FORGET))
    assert by_ids.query_vector() is None and by_ids.analysis is None
    assert signal.analysis is None and signal.query_vector() is None
    assert office.analysis is not None
    np.testing.assert_array_equal(office.analysis.vector(), encoder.row(f"bob: {OFFICE}"))
    assert batch.counts == {
        "TurnRecorded": 3,
        "filtered": 1,
        "CommandIssued": 2,
        "MemoriesRecalled": 1,
        "plain_inputs": 6,  # no envelope: a raw producer's input cannot be shredded
        "encoded_texts": 3,  # two remembered turns, one forget query
    }


class ReadsHalf(BagOfWordsEncoder):
    def known_share(self, text: str) -> float:
        return 0.5 if text == FORGET else 1.0


def test_a_forget_query_records_how_much_of_it_the_encoder_read() -> None:
    log = Log()
    batch = prepare(
        log.command("forget", query=FORGET),
        log.command("forget", memory_ids=["m_1"]),
        encoder=ReadsHalf(),
    )
    by_query, by_ids = [p for _, p in batch.prepared]
    assert by_query.query_known_share == 0.5
    assert by_ids.query_known_share == 1.0  # nothing read: nothing to weigh
    # and an encoder that cannot say reads everything
    [(_, plain)] = prepare(log.command("forget", query=FORGET)).prepared
    assert plain.query_known_share == 1.0


def test_a_batch_of_nothing_to_embed_still_makes_one_empty_call() -> None:
    encoder = BagOfWordsEncoder()
    log = Log()

    batch = prepare(log.turn("thanks!"), log.command("tick"), encoder=encoder)

    assert encoder.calls == [[]]
    assert len(batch.prepared) == 2


def test_the_analysis_is_the_rules_analysis_with_its_vector() -> None:
    log = Log()
    message = log.turn(MYSQL, speaker="alice", session_id="chat-1")

    [(_, prepared)] = prepare(message).prepared

    assert isinstance(prepared.event, TurnRecorded)
    analysis = prepared.analysis
    assert analysis is not None
    assert analysis.model_copy(update={"vector_b64": None, "slot": None}) == rules_analysis(
        prepared.event
    )
    assert (analysis.kind, analysis.region, analysis.base_importance) == ("fact", "semantic", 0.7)
    assert analysis.search_text == f"alice: {MYSQL}"
    assert analysis.triplet is not None and analysis.triplet.value == "MySQL"


def test_a_prepared_event_says_where_its_input_is_and_which_models_made_it() -> None:
    log = Log(partition=2)
    log.next_offset = 41
    message = log.turn(MYSQL)

    [(source, prepared)] = prepare(message).prepared

    assert source is message
    assert (prepared.source.topic, prepared.source.partition, prepared.source.offset) == (
        EVENTS,
        2,
        41,
    )
    assert prepared.source.timestamp_ms == BROKER_T0_MS + 41
    assert prepared.models.encoder == "bag-of-words-test"
    assert prepared.models.classifier == RULES_CLASSIFIER
    assert prepared.models.extractor is None
    assert prepared.event is not None and prepared.event.event_time == T0


def test_the_encoder_id_is_recorded_when_the_encoder_has_one() -> None:
    class Versioned(BagOfWordsEncoder):
        id = "bag-of-words-test/v2"

    [(_, prepared)] = prepare(Log().turn(MYSQL), encoder=Versioned()).prepared

    assert prepared.models.encoder == "bag-of-words-test/v2"


def test_preparing_twice_gives_identical_bytes() -> None:
    def once() -> list[bytes]:
        log = Log()
        messages = [log.turn(MYSQL), log.command("forget", query=FORGET), log.raw(b"x", b"acme")]
        return [encode(p) for _, p in prepare(*messages).prepared]

    assert once() == once()


def test_model_ids_with_an_extractor_round_trip() -> None:
    info = ExtractorInfo(model="m", prompt_version="p1")
    [(_, prepared)] = prepare(Log().turn(MYSQL)).prepared
    with_extractor = prepared.model_copy(
        update={"models": prepared.models.model_copy(update={"extractor": info})}
    )

    assert decode_prepared(encode(with_extractor)).models.extractor == info


# -- the learned classifier's path ----------------------------------------------------------------
# A tiny classifier whose vectors name their label: axis i of the test encoder's vector is label
# i, so each turn's label is chosen by the test, and only prepare's wiring is under test here.
TINY_LABELS = (
    "small_talk",
    "filler",
    "greeting",
    "thanks",
    "question",
    "preference",
    "fact",
    "task_state",
    "procedure",
    "decision",
    "emotion",
)
TINY_DIMENSION = 16


def tiny_classifier() -> TurnClassifier:
    lexical = len(LEXICAL_FEATURES)
    dense = np.zeros((TINY_DIMENSION + lexical, len(TINY_LABELS)))
    dense[: len(TINY_LABELS), :] = 20.0 * np.eye(len(TINY_LABELS))
    manifest = {
        "model_id": "tiny-classifier-test",
        "encoder_id": "exact-test",
        "encoder_name": "exact-test",
        "embedding_dimension": TINY_DIMENSION,
        "labels": list(TINY_LABELS),
        "keep_threshold": 0.5,
        "gram_buckets": 0,
        "lexical_features": list(LEXICAL_FEATURES),
    }
    arrays = {
        "weight_dense": dense,
        "weight_grams": np.zeros((0, len(TINY_LABELS))),
        "bias": np.zeros(len(TINY_LABELS)),
        "lexical_mean": np.zeros(lexical),
        "lexical_scale": np.ones(lexical),
    }
    return TurnClassifier(manifest, arrays)


def labelled(**texts: str) -> ExactEncoder:
    """An encoder that gives each text the axis of its label (``fact="..."``)."""
    vectors: dict[str, list[float]] = {}
    for label, text in texts.items():
        axis = TINY_LABELS.index(label.rstrip("_0123456789"))
        vectors[text] = [0.0] * axis + [1.0]
    return ExactEncoder(vectors, dimension=TINY_DIMENSION)


def prepare_learned(
    encoder: ExactEncoder, *messages: object, extractions: object = None
) -> PreparedBatch:
    classifier = tiny_classifier()
    return prepare_batch(list(messages), encoder, extractions, classifier=classifier)  # type: ignore[arg-type]


def test_learned_every_turn_is_embedded_in_one_call() -> None:
    encoder = labelled(greeting="hi there", fact=MYSQL, question="what time is it?")
    log = Log()

    batch = prepare_learned(
        encoder,
        log.turn("hi there"),
        log.turn(MYSQL),
        log.command("forget", query=FORGET),
        log.turn("what time is it?", speaker="bob"),
    )

    assert encoder.calls == [
        ["alice: hi there", f"alice: {MYSQL}", FORGET, "bob: what time is it?"],
    ]
    hi, mysql, forget, question = [p for _, p in batch.prepared]
    assert all(p.models.classifier == "tiny-classifier-test" for p in (hi, mysql, forget, question))
    assert hi.analysis is not None and question.analysis is not None
    # "hi there" is the rules' small talk (precise, kept first); the question is the model's.
    for filtered, label in ((hi.analysis, "small talk"), (question.analysis, "learned: question")):
        assert (filtered.remember, filtered.kind, filtered.base_importance) == (
            False,
            "chit_chat",
            0.2,
        )
        assert filtered.vector_b64 is None and filtered.triplet is None
        assert filtered.reason.startswith(label)
    assert mysql.analysis is not None and mysql.analysis.remember
    assert (mysql.analysis.kind, mysql.analysis.region, mysql.analysis.base_importance) == (
        "fact",
        "semantic",
        0.7,
    )
    assert mysql.analysis.triplet is not None and mysql.analysis.triplet.value == "MySQL"
    np.testing.assert_array_equal(mysql.analysis.vector(), encoder.row(f"alice: {MYSQL}"))
    assert mysql.analysis.slot is not None and mysql.analysis.slot.vector_b64 is None
    assert mysql.analysis.slot.frame == "We use … for the billing database"
    assert hi.analysis.slot is None and question.analysis.slot is None
    assert forget.query_vector() is not None
    assert batch.counts["filtered"] == 2
    assert batch.counts["encoded_texts"] == 4  # the four texts of the one call


@pytest.mark.parametrize(
    ("label", "kind", "region", "importance"),
    [
        ("preference", "preference", "semantic", 0.9),
        ("task_state", "task_state", "episodic", 0.85),
        ("decision", "decision", "semantic", 0.85),
        ("procedure", "procedure", "procedural", 0.65),
        ("emotion", "emotion", "episodic", 0.5),
        ("fact", "fact", "semantic", 0.7),
    ],
)
def test_learned_labels_become_kinds_with_the_seeds_importance_and_region(
    label: str, kind: str, region: str, importance: float
) -> None:
    text = "the staging cluster runs on three nodes"
    [(_, prepared)] = prepare_learned(labelled(**{label: text}), Log().turn(text)).prepared

    analysis = prepared.analysis
    assert analysis is not None and analysis.remember
    assert (analysis.kind, analysis.region, analysis.base_importance) == (kind, region, importance)


def test_a_turn_the_assistant_said_is_kept_as_second_hand() -> None:
    log = Log()
    said = "Their bakery section is popular, and the sourdough sells out by noon"

    batch = prepare(log.turn(said, speaker="assistant", role="assistant"), log.turn(said))

    assistant, user = [p.analysis for _, p in batch.prepared]
    assert assistant is not None and user is not None
    assert assistant.remember and assistant.kind == user.kind
    assert assistant.base_importance == SECOND_HAND_IMPORTANCE < user.base_importance
    assert assistant.reason == f"{user.reason}; said by assistant"


def test_learned_the_exact_rules_still_hold_critical_importance_and_requests_to_forget() -> None:
    allergy, forget = "I am allergic to penicillin", "please forget my home address"
    log = Log()

    batch = prepare_learned(
        labelled(fact=allergy, fact_2=forget), log.turn(allergy), log.turn(forget)
    )

    critical, request = [p.analysis for _, p in batch.prepared]
    assert critical is not None and critical.remember and critical.base_importance == 0.9
    assert "critical" in critical.reason
    assert request is not None and not request.remember and request.reason == "a request to forget"


def test_learned_a_recorded_extraction_still_decides_its_turn() -> None:
    log = Log()
    message = log.turn(MYSQL)
    turn = decode_event(message.value)
    assert isinstance(turn, TurnRecorded)
    extraction = rules_extraction(rules_analysis(turn)).model_copy(
        update={"remember": False, "kind": "chit_chat"}
    )
    record = record_extraction(turn, extractor_info("m"), extraction)
    encoder = labelled(fact=MYSQL)

    batch = prepare_learned(encoder, message, extractions={(turn.namespace, turn.event_id): record})

    [(_, prepared)] = batch.prepared
    assert prepared.analysis is not None and not prepared.analysis.remember
    assert prepared.models.extractor == record.extractor
    assert prepared.models.classifier == "tiny-classifier-test"
    assert encoder.calls == [[]], "the extraction decided: nothing to embed for the filter"


def prepare_gated(encoder: ExactEncoder, *messages: object) -> PreparedBatch:
    return prepare_batch(list(messages), encoder, classifier=tiny_classifier().as_gate())  # type: ignore[arg-type]


def test_gated_the_model_filters_short_plain_turns_the_rules_would_keep() -> None:
    short, long = (
        "lovely weather out there isn't it",
        ("hey, long time no see! how have you been, by the way my sister moved to Lisbon in May"),
    )
    log = Log()
    batch = prepare_gated(
        labelled(small_talk=short, small_talk_2=long), log.turn(short), log.turn(long)
    )

    gated, kept = [p for _, p in batch.prepared]
    assert gated.models.classifier == "rules-v1+gate-v4:tiny-classifier-test"
    assert gated.analysis is not None and not gated.analysis.remember
    assert gated.analysis.reason.startswith("small talk, short (learned: small_talk")
    # Long enough to carry a fact inside the chatter: the rules decide.
    assert kept.analysis is not None and kept.analysis.remember
    assert (kept.analysis.kind, kept.analysis.reason) == ("fact", "default: fact")


def test_gated_a_pattern_keeps_its_kind_but_not_a_turn_the_model_is_sure_is_chatter() -> None:
    # A kind pattern fires on each ("I prefer", "I love"); the model never keeps what the rules
    # filter ("hello").
    preference, cheer, hello = "I prefer tea", "I love that for you!", "hello"
    log = Log()
    batch = prepare_gated(
        labelled(fact=preference, small_talk=cheer, fact_2=hello),
        log.turn(preference),
        log.turn(cheer),
        log.turn(hello),
    )

    kept, cheered, filtered = [p.analysis for _, p in batch.prepared]
    assert kept is not None and kept.remember and kept.kind == "preference"
    assert cheered is not None and not cheered.remember
    assert cheered.reason.startswith("small talk, short (learned: small_talk")
    assert filtered is not None and not filtered.remember and filtered.reason == "small talk"


def test_gated_a_plain_fact_the_model_calls_a_preference_is_kept_as_one() -> None:
    # No preference pattern fires ("only drink"): the rules would keep it as their default fact.
    tea, sister = "I only drink oolong these days", "my sister moved to Lisbon"
    log = Log()
    batch = prepare_gated(labelled(preference=tea, fact=sister), log.turn(tea), log.turn(sister))

    preference, fact = [p.analysis for _, p in batch.prepared]
    assert preference is not None and preference.remember
    assert (preference.kind, preference.base_importance) == ("preference", 0.9)
    assert preference.reason.startswith("default: fact; learned: preference")
    assert preference.slot is not None  # a preference takes part in updates
    assert fact is not None and (fact.kind, fact.reason) == ("fact", "default: fact")


def test_the_learned_keep_probability_is_recorded_on_the_analysis() -> None:
    log = Log()
    batch = prepare_gated(labelled(fact=MYSQL, small_talk="nice one"), log.turn(MYSQL))
    rules = prepare_batch([log.turn(MYSQL)], labelled(fact=MYSQL))

    [(_, prepared)] = batch.prepared
    assert prepared.analysis is not None and prepared.analysis.keep_probability is not None
    assert prepared.analysis.keep_probability > 0.99  # its axis is the fact label's
    [(_, by_rules)] = rules.prepared
    assert by_rules.analysis is not None and by_rules.analysis.keep_probability is None


def test_gated_the_longer_a_turn_the_surer_the_model_must_be_to_filter_it() -> None:
    # Under the model's threshold (0.5) both: leaning to small talk (keep about 0.07, under
    # GATE_KEEP, over GATE_SURE_KEEP) and doubtful (keep about 0.35, over GATE_KEEP).
    leaning = [0.77, 0.0, 0.0, 0.0, 0.0, 0.0, 0.64]
    doubtful = [0.72, 0.0, 0.0, 0.0, 0.0, 0.0, 0.69]
    seven = "the weather was lovely out there today"
    nine = "the weather was lovely out there today, really lovely"
    sure_nine = "what a lovely sunny day out there today, so lovely"
    six = "the garden looks lovely this year"
    encoder = ExactEncoder(
        {seven: leaning, nine: leaning, sure_nine: [1.0], six: doubtful}, TINY_DIMENSION
    )
    log = Log()
    batch = prepare_gated(
        encoder, log.turn(seven), log.turn(nine), log.turn(sure_nine), log.turn(six)
    )

    short, longer, sure, unsure = [p.analysis for _, p in batch.prepared]
    assert short is not None and not short.remember
    assert short.keep_probability is not None
    assert GATE_SURE_KEEP < short.keep_probability < GATE_KEEP
    assert longer is not None and longer.remember and longer.reason == "default: fact"
    assert sure is not None and not sure.remember
    assert unsure is not None and unsure.remember and unsure.reason == "default: fact"
    assert unsure.keep_probability is not None and GATE_KEEP < unsure.keep_probability < 0.5


def test_gated_a_short_turn_read_as_a_greeting_thanks_or_question_is_trusted_to_the_threshold() -> (
    None
):
    # Each doubtful (keep about 0.35: over GATE_KEEP, under the threshold), read as another label.
    def doubtful(label: str) -> list[float]:
        row = [0.0] * TINY_LABELS.index("fact") + [0.69]
        row[TINY_LABELS.index(label)] = 0.72
        return row

    texts = {
        "question": "how do i revert a merge lol",
        "thanks": "thanx that fixd it",
        "small_talk": "the garden looks lovely this year",
        "filler": "ok the contract part, understood",
    }
    encoder = ExactEncoder({t: doubtful(label) for label, t in texts.items()}, TINY_DIMENSION)
    log = Log()
    batch = prepare_gated(encoder, *(log.turn(text) for text in texts.values()))

    question, thanks, small_talk, filler = [p.analysis for _, p in batch.prepared]
    for analysis in (question, thanks, small_talk, filler):
        assert analysis is not None and analysis.keep_probability is not None
        assert GATE_KEEP < analysis.keep_probability < 0.5
    assert question is not None and not question.remember
    assert question.reason.startswith("question, short (learned: question")
    assert thanks is not None and not thanks.remember
    # Short notes are read as small talk and short decisions as filler: GATE_KEEP still decides.
    assert small_talk is not None and small_talk.remember
    assert filler is not None and filler.remember


def test_gated_a_turn_longer_than_the_gate_is_judged_only_if_it_could_be_an_echo() -> None:
    long = "my sister moved to Lisbon in May and she loves the food and the people there a lot"
    echo = "ok ok thanks so much for the reminder about the parent teacher meeting at the school"
    log = Log()
    batch = prepare_gated(
        labelled(small_talk=long, small_talk_2=echo), log.turn(long), log.turn(echo)
    )

    statement, acknowledgement = [p.analysis for _, p in batch.prepared]
    assert statement is not None and statement.remember and statement.keep_probability is None
    # Too long to be filtered; its keep probability is what the echo rule reads.
    assert acknowledgement is not None and acknowledgement.remember
    assert acknowledgement.keep_probability is not None and acknowledgement.keep_probability < 0.5


def test_gated_a_longer_turn_is_filtered_only_when_the_model_is_sure_it_is_not_small_talk() -> None:
    request = "is there a way to make my tests stop at the first failure please"  # 14 words
    chatter = "the weather has been so strange this week, sunny one minute then hail"  # 13
    longest = "could you tell me if there is a way to make my test runner stop at the first failure"
    log = Log()
    batch = prepare_gated(
        labelled(question=request, small_talk=chatter, question_2=longest),
        log.turn(request),
        log.turn(chatter),
        log.turn(longest),
    )

    filtered, small_talk, too_long = [p.analysis for _, p in batch.prepared]
    assert filtered is not None and not filtered.remember
    assert filtered.reason.startswith("not small talk, longer (learned: question")
    # Long small talk is where friends tell their news: the rules keep it.
    assert small_talk is not None and small_talk.remember and small_talk.reason == "default: fact"
    assert too_long is not None and too_long.remember and too_long.keep_probability is None


def test_gated_a_long_turn_the_model_calls_a_preference_stays_the_rules_fact() -> None:
    long = "my family and my friends are always there for me and they keep me going every day"
    log = Log()
    batch = prepare_gated(labelled(preference=long), log.turn(long))

    [(_, prepared)] = batch.prepared
    assert prepared.analysis is not None and prepared.analysis.remember
    assert (prepared.analysis.kind, prepared.analysis.reason) == ("fact", "default: fact")
