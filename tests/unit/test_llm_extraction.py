"""LLM extraction, the pure half: prompt, strict parser, recorded events, and applying a record
to a turn's analysis (also through ``prepare_batch`` and consolidation)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import orjson
import pytest
from ingest_support import T0, Log, Stages, by_content, only

from pipeline.ingest.prepare import rules_analysis
from pipeline.memory.rules.classify import SECOND_HAND_IMPORTANCE
from pipeline.memory.rules.extraction import memory_id
from pipeline.memory.rules.llm_extraction import (
    MAX_CONTEXT_TURNS,
    PROMPT_VERSION,
    ExtractionResponseError,
    apply_extraction,
    build_messages,
    extractor_info,
    parse_response,
    record_extraction,
    rules_extraction,
    supersedes,
)
from schemas.codec import decode_event, encode
from schemas.errors import HindsightError
from schemas.events import Extraction, ExtractionRecorded, TurnRecorded
from schemas.memory import KINDS, Triplet

INFO = extractor_info("test-model")


def turn(text: str, **changes: Any) -> TurnRecorded:
    fields: dict[str, Any] = {
        "event_id": "turn-1",
        "namespace": "acme",
        "event_time": T0,
        "session_id": "s1",
        "speaker": "Alice",
        "text": text,
    }
    fields.update(changes)
    return TurnRecorded(**fields)


def answer(**changes: Any) -> str:
    payload: dict[str, Any] = {
        "remember": True,
        "kind": "decision",
        "importance": 0.8,
        "triplet": {"subject": "alice", "attribute": "database", "value": "PostgreSQL"},
        "entities": ["PostgreSQL", "MySQL"],
        "content": None,
    }
    for key, value in changes.items():
        if value is ...:
            payload.pop(key)
        else:
            payload[key] = value
    return orjson.dumps(payload).decode()


def rejected(text: str) -> ExtractionResponseError:
    with pytest.raises(ExtractionResponseError) as caught:
        parse_response(text)
    return caught.value


# -- prompt -------------------------------------------------------------------------------------


def test_prompt_is_a_pure_function_of_the_turn_and_its_context() -> None:
    first = build_messages(turn("We moved to PostgreSQL"), [turn("hi", event_id="t0")])
    again = build_messages(turn("We moved to PostgreSQL"), [turn("hi", event_id="t0")])

    assert first == again
    assert [m["role"] for m in first] == ["system", "user"]
    assert "We moved to PostgreSQL" in first[1]["content"]
    assert "Alice" in first[1]["content"]
    assert "Earlier in this session" in first[1]["content"]


def test_prompt_names_every_kind_and_the_keys_it_expects() -> None:
    system = build_messages(turn("x"))[0]["content"]

    for kind in KINDS:
        assert f'"{kind}"' in system
    for key in ("remember", "kind", "importance", "triplet", "entities", "content"):
        assert f'"{key}"' in system
    assert PROMPT_VERSION.startswith("hindsight-extract-v")


def test_prompt_shows_only_the_last_few_context_turns() -> None:
    context = [turn(f"context number {n}", event_id=f"c{n}") for n in range(10)]
    user = build_messages(turn("the turn"), context)[1]["content"]

    assert "context number 9" in user
    assert f"context number {9 - MAX_CONTEXT_TURNS}" not in user


def test_no_context_no_context_section() -> None:
    assert "Earlier" not in build_messages(turn("the turn"))[1]["content"]


# -- parser -------------------------------------------------------------------------------------


def test_a_valid_answer_parses() -> None:
    parsed = parse_response(answer())

    assert parsed == Extraction(
        remember=True,
        kind="decision",
        importance=0.8,
        triplet=Triplet(subject="alice", attribute="database", value="PostgreSQL"),
        entities=["PostgreSQL", "MySQL"],
    )


def test_a_markdown_fence_around_the_object_is_tolerated() -> None:
    assert parse_response(f"```json\n{answer()}\n```").kind == "decision"
    assert parse_response(f"```\n{answer()}\n```").kind == "decision"


def test_unknown_keys_are_ignored_and_content_is_optional() -> None:
    parsed = parse_response(answer(content=..., confidence=0.3))

    assert parsed.content is None


def test_blank_content_means_no_override_and_entities_are_deduplicated() -> None:
    parsed = parse_response(answer(content="  ", entities=["Go", "go ", "Rust"]))

    assert parsed.content is None
    assert parsed.entities == ["Go", "Rust"]


@pytest.mark.parametrize("text", ["not json", '{"remember": true', "", "Sure! Here it is: {}"])
def test_malformed_json_is_rejected(text: str) -> None:
    assert "malformed JSON" in rejected(text).reason


def test_a_json_value_that_is_not_an_object_is_rejected() -> None:
    assert "object" in rejected("[1, 2]").reason


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"remember": ...}, "remember"),
        ({"remember": "yes"}, "remember"),
        ({"remember": 1}, "remember"),
        ({"kind": "gossip"}, "kind"),
        ({"kind": ...}, "kind"),
        ({"importance": 1.5}, "importance"),
        ({"importance": -0.1}, "importance"),
        ({"importance": "high"}, "importance"),
        ({"importance": True}, "importance"),
        ({"triplet": ...}, "triplet"),
        ({"triplet": "alice likes go"}, "triplet"),
        ({"triplet": {"subject": "alice", "attribute": "database"}}, "triplet.value"),
        ({"triplet": {"subject": "alice", "attribute": "", "value": "x"}}, "triplet.attribute"),
        ({"triplet": {"subject": 3, "attribute": "a", "value": "x"}}, "triplet.subject"),
        ({"entities": "PostgreSQL"}, "entities"),
        ({"entities": ["PostgreSQL", 7]}, "entities[1]"),
        ({"content": 42}, "content"),
    ],
)
def test_invalid_fields_are_named(changes: dict[str, Any], field: str) -> None:
    error = rejected(answer(**changes))

    assert error.field == field
    assert str(error).startswith(f"{field}: ")
    assert isinstance(error, HindsightError)


def test_a_null_triplet_is_allowed() -> None:
    assert parse_response(answer(triplet=None)).triplet is None


# -- recorded events ----------------------------------------------------------------------------


def test_a_record_carries_the_turns_time_and_a_deterministic_id() -> None:
    the_turn = turn("We moved to PostgreSQL", event_time=T0 + timedelta(days=3))
    record = record_extraction(the_turn, INFO, parse_response(answer()))
    again = record_extraction(the_turn, INFO, parse_response(answer()))

    assert record.event_time == the_turn.event_time
    assert record.turn_event_id == the_turn.event_id
    assert record.namespace == the_turn.namespace
    assert record.event_id == again.event_id
    assert record.extractor.model == "test-model"
    assert record.extractor.prompt_version == PROMPT_VERSION
    assert record_extraction(the_turn, INFO, record.extraction, revision=1).event_id != (
        record.event_id
    )


def test_a_record_round_trips_through_the_codec() -> None:
    record = record_extraction(
        turn("We moved to PostgreSQL"),
        INFO,
        rules_extraction(rules_analysis(turn("We moved to PostgreSQL"))),
        source="rules_fallback",
        error="kind: expected one of …",
    )
    decoded = decode_event(encode(record))

    assert isinstance(decoded, ExtractionRecorded)
    assert decoded == record
    assert decoded.schema_version == 1


def test_the_highest_revision_wins_and_the_first_of_a_revision_stays() -> None:
    the_turn = turn("We moved to PostgreSQL")
    first = record_extraction(the_turn, INFO, parse_response(answer()))
    second = record_extraction(the_turn, extractor_info("other"), parse_response(answer()))
    revised = record_extraction(the_turn, INFO, parse_response(answer()), revision=1)

    assert supersedes(first, None)
    assert not supersedes(second, first)
    assert supersedes(revised, first)
    assert not supersedes(first, revised)


# -- applying -----------------------------------------------------------------------------------


def test_rules_extraction_is_the_rule_based_result() -> None:
    analysis = rules_analysis(turn("We moved from MySQL to PostgreSQL"))
    extraction = rules_extraction(analysis)

    assert extraction.kind == analysis.kind
    assert extraction.importance == analysis.base_importance
    assert extraction.triplet == analysis.triplet
    assert extraction.entities == analysis.entities
    assert extraction.remember


def test_applying_the_rules_result_changes_no_decision() -> None:
    the_turn = turn("We moved from MySQL to PostgreSQL")
    analysis = rules_analysis(the_turn)
    applied = apply_extraction(the_turn, analysis, rules_extraction(analysis))

    assert applied.remember == analysis.remember
    assert applied.kind == analysis.kind
    assert applied.region == analysis.region
    assert applied.base_importance == analysis.base_importance
    assert applied.triplet == analysis.triplet
    assert applied.entities == analysis.entities
    assert applied.content == analysis.content
    assert applied.search_text == analysis.search_text


def test_an_extraction_overrides_kind_importance_region_triplet_and_entities() -> None:
    the_turn = turn("Sometimes I think about the mountains")
    analysis = rules_analysis(the_turn)
    record = record_extraction(
        the_turn,
        INFO,
        parse_response(
            answer(
                kind="procedure",
                importance=0.42,
                triplet={"subject": "I", "attribute": " Favourite Place ", "value": "mountains."},
                entities=["mountains"],
            )
        ),
    )
    applied = apply_extraction(the_turn, analysis, record)

    assert applied.kind == "procedure"
    assert applied.region == "procedural"
    assert applied.base_importance == 0.42
    assert applied.remember
    assert "test-model" in applied.reason
    # First-person subjects become the speaker, as the rules' triplets do.
    assert applied.triplet == Triplet(
        subject="alice", attribute="favourite place", value="mountains"
    )
    assert applied.entities == ["mountains"]
    # No content override: the memory keeps the turn's words.
    assert applied.content == the_turn.text
    assert applied.search_text == analysis.search_text


def test_an_extraction_of_the_assistants_words_weighs_as_second_hand() -> None:
    # The LLM scores the words, not who said them: an assistant's summary of the user's plans is
    # kept, but at second-hand weight, as the rules' own analysis keeps it.
    the_turn = turn("Your flight to Lisbon leaves Friday at 7am", role="assistant")
    record = record_extraction(the_turn, INFO, parse_response(answer(importance=0.9)))
    applied = apply_extraction(the_turn, rules_analysis(the_turn), record)

    assert applied.remember
    assert applied.base_importance == SECOND_HAND_IMPORTANCE
    assert applied.reason.endswith("; said by assistant")

    users_turn = turn("My flight to Lisbon leaves Friday at 7am")
    users = record_extraction(users_turn, INFO, parse_response(answer(importance=0.9)))
    assert apply_extraction(users_turn, rules_analysis(users_turn), users).base_importance == 0.9


def test_remember_false_filters_the_turn() -> None:
    the_turn = turn("We moved from MySQL to PostgreSQL")
    applied = apply_extraction(
        the_turn,
        rules_analysis(the_turn),
        parse_response(answer(remember=False, kind="chit_chat")),
    )

    assert not applied.remember
    assert applied.triplet is None
    assert applied.entities == []


def test_a_content_override_replaces_the_text_the_memory_keeps() -> None:
    the_turn = turn("We moved it there")
    applied = apply_extraction(
        the_turn,
        rules_analysis(the_turn),
        parse_response(answer(content="Alice moved the billing database to PostgreSQL")),
    )

    assert applied.content == "Alice moved the billing database to PostgreSQL"
    assert applied.search_text == "Alice: Alice moved the billing database to PostgreSQL"


def test_a_fallback_record_says_so_in_the_reason() -> None:
    the_turn = turn("We moved from MySQL to PostgreSQL")
    analysis = rules_analysis(the_turn)
    record = record_extraction(
        the_turn,
        INFO,
        rules_extraction(analysis),
        source="rules_fallback",
        error="malformed JSON",
    )

    assert "llm fallback: malformed JSON" in apply_extraction(the_turn, analysis, record).reason


# -- through prepare and consolidation ----------------------------------------------------------


def recorded_for(raw_value: bytes | None, **changes: Any) -> ExtractionRecorded:
    event = decode_event(raw_value)
    assert isinstance(event, TurnRecorded)
    return record_extraction(event, INFO, parse_response(answer(**changes)))


def keyed(*records: ExtractionRecorded) -> dict[tuple[str, str], ExtractionRecorded]:
    return {(r.namespace, r.turn_event_id): r for r in records}


def test_prepare_applies_recorded_extractions_by_namespace_and_turn() -> None:
    log = Log()
    raw = log.turn("Sometimes I think about the mountains")
    plain = log.turn("The office is in the city center", T0 + timedelta(minutes=1))
    record = recorded_for(raw.value, kind="preference", importance=0.55, triplet=None)
    stages = Stages()

    result = stages.process([raw, plain], keyed(record))

    memories = by_content(stages)
    assert memories["Sometimes I think about the mountains"].kind == "preference"
    assert memories["Sometimes I think about the mountains"].base_importance == 0.55
    assert memories["The office is in the city center"].kind == "fact"  # no record: the rules
    assert len(only(result, "created")) == 2


def test_the_prepared_event_records_which_extractor_decided() -> None:
    log = Log()
    raw = log.turn("Sometimes I think about the mountains")
    plain = log.turn("The office is in the city center")
    record = recorded_for(raw.value, kind="preference")

    batch = Stages().process([raw, plain], keyed(record)).prepared

    [(_, extracted), (_, rules)] = batch.prepared
    assert extracted.models.extractor == INFO
    assert rules.models.extractor is None
    assert extracted.models.encoder == rules.models.encoder == "bag-of-words-test"
    assert extracted.analysis is not None and extracted.analysis.kind == "preference"
    assert "test-model" in extracted.analysis.reason


def test_an_extraction_of_another_namespace_is_not_applied() -> None:
    log = Log()
    raw = log.turn("Sometimes I think about the mountains")
    record = recorded_for(raw.value, kind="preference", importance=0.55)
    stages = Stages()

    result = stages.process([raw], {("other-ns", record.turn_event_id): record})

    assert by_content(stages)["Sometimes I think about the mountains"].kind == "fact"
    [(_, prepared)] = result.prepared.prepared
    assert prepared.models.extractor is None


def test_a_recorded_remember_false_filters_the_turn_and_skips_its_embedding() -> None:
    log = Log()
    raw = log.turn("We moved from MySQL to PostgreSQL")
    record = recorded_for(raw.value, remember=False, kind="chit_chat")
    stages = Stages()

    result = stages.process([raw], keyed(record))

    assert result.counts["filtered"] == 1
    assert not result.changes
    assert stages.encoder.calls == [[]]
    [(_, prepared)] = result.prepared.prepared
    assert prepared.analysis is not None and prepared.analysis.vector_b64 is None


def test_a_content_override_is_what_the_memory_keeps_embeds_and_is_addressed_by() -> None:
    log = Log()
    raw = log.turn("We moved it there", speaker="Alice")
    rewritten = "Alice moved the billing database to PostgreSQL"
    record = recorded_for(raw.value, content=rewritten)
    stages = Stages()

    stages.process([raw], keyed(record))

    [memory] = stages.bank("acme").records.values()
    assert memory.content == rewritten
    assert memory.search_text == f"Alice: {rewritten}"
    # The slot is the rewritten content's too.
    assert stages.encoder.calls == [[f"Alice: {rewritten}"]]
    assert memory.slot is not None and memory.slot.frame == "Alice moved the billing database to …"
    assert memory.id == memory_id("acme", [record.turn_event_id], rewritten)
    assert memory.source_event_ids == [record.turn_event_id]  # provenance is still the turn


def test_the_same_records_give_the_same_memories() -> None:
    def run() -> list[dict[str, Any]]:
        log = Log()
        raws = [
            log.turn("We use MySQL for billing", T0),
            log.turn("Actually it is Postgres now", T0 + timedelta(hours=1)),
        ]
        records = [
            recorded_for(
                raws[0].value,
                triplet={"subject": "alice", "attribute": "database", "value": "MySQL"},
            ),
            recorded_for(
                raws[1].value,
                triplet={"subject": "alice", "attribute": "database", "value": "PostgreSQL"},
            ),
        ]
        stages = Stages()
        stages.process(raws, keyed(*records))
        bank = stages.bank("acme")
        return sorted(
            (r.model_dump(mode="json") for r in bank.records.values()), key=lambda r: r["id"]
        )

    first = run()
    assert first == run()
    # The LLM's triplets drive contradiction handling like the rules' do.
    assert sorted(r["status"] for r in first) == ["active", "superseded"]
