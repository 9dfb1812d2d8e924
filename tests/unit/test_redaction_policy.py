"""Redaction as a namespace policy on the input log: in force from its own offset on, applied in
``prepare`` before classification, extraction and encoding, and the same however the log is cut
into batches or whichever worker prepares it."""

from __future__ import annotations

import pytest
from ingest_support import BagOfWordsEncoder, Log

from pipeline.ingest.local import LocalPipeline
from pipeline.ingest.policies import PolicyBook
from pipeline.ingest.prepare import InputMessage, PreparedBatch, prepare_batch
from pipeline.memory.rules.redaction import policy_in_force
from schemas.codec import validate
from schemas.errors import InvalidEvent
from schemas.events import CommandIssued, TurnRecorded
from schemas.policy import RedactionSettings

EMAIL_TURN = "My work email is dana.lee@example.org, write there"
PHONE_TURN = "Call me on +44 20 7946 0958 after six"
REDACT_ALL = RedactionSettings(enabled=True)


def prepared_texts(batch: PreparedBatch) -> list[str]:
    texts = []
    for _, prepared in batch.prepared:
        if isinstance(prepared.event, TurnRecorded):
            assert prepared.analysis is not None
            texts.append(prepared.analysis.content)
    return texts


def run(messages: list[InputMessage], book: PolicyBook) -> PreparedBatch:
    return prepare_batch(messages, BagOfWordsEncoder(), policies=book)  # type: ignore[arg-type]


def test_turns_after_the_policy_are_redacted_and_turns_before_it_are_not() -> None:
    log = Log()
    before = log.turn(EMAIL_TURN)
    policy = log.command("set_policy", redaction=REDACT_ALL)
    after = [log.turn(EMAIL_TURN), log.turn(PHONE_TURN)]
    book: PolicyBook = {}

    batch = run([before, policy, *after], book)

    assert prepared_texts(batch) == [
        EMAIL_TURN,
        "My work email is [EMAIL_1], write there",
        "Call me on [PHONE_1] after six",
    ]
    assert batch.counts["redacted_turns"] == 2
    # The turn the prepared event carries is redacted too, and so is what the encoder saw.
    redacted_turn = batch.prepared[2][1].event
    assert isinstance(redacted_turn, TurnRecorded) and "example.org" not in redacted_turn.text
    analysis = batch.prepared[2][1].analysis
    assert analysis is not None and "example.org" not in analysis.search_text
    # The history is what goes to the policies topic: the policy and where it took effect.
    [history] = batch.policy_changes.values()
    assert [(e.partition, e.offset) for e in history.entries] == [(0, policy.offset)]
    assert book["acme"] == history


def test_preparing_again_from_the_history_gives_the_same_result() -> None:
    """A batch prepared twice (a crash before the commit), or by the worker that takes the
    partition over with the history from the topic, redacts exactly as the first time."""
    log = Log()
    messages = [
        log.turn(EMAIL_TURN),
        log.command("set_policy", redaction=REDACT_ALL),
        log.turn(EMAIL_TURN),
    ]
    book: PolicyBook = {}
    first = run(messages, book)

    again = run(messages, dict(book))  # the history already holds the policy
    takeover = run(messages[2:], dict(book))  # resumes after the policy event

    assert prepared_texts(again) == prepared_texts(first)
    assert prepared_texts(takeover) == prepared_texts(first)[1:]
    assert again.policy_changes["acme"] == first.policy_changes["acme"]


def test_a_policy_is_per_namespace_and_can_be_switched_off() -> None:
    log = Log()
    messages = [
        log.command("set_policy", redaction=REDACT_ALL),
        log.turn(EMAIL_TURN, namespace="other"),
        log.command("set_policy", redaction=RedactionSettings(enabled=False)),
        log.turn(EMAIL_TURN),
    ]
    batch = run(messages, {})
    assert prepared_texts(batch) == [EMAIL_TURN, EMAIL_TURN]


def test_only_the_chosen_kinds_are_redacted() -> None:
    log = Log()
    only_phones = RedactionSettings(enabled=True, kinds=["PHONE"])
    messages = [
        log.command("set_policy", redaction=only_phones),
        log.turn(f"{EMAIL_TURN}; {PHONE_TURN}"),
    ]
    [text] = prepared_texts(run(messages, {}))
    assert "dana.lee@example.org" in text and "[PHONE_1]" in text


def test_the_policy_in_force_looks_at_the_partition_and_the_offset() -> None:
    log = Log()
    book: PolicyBook = {}
    run([log.turn("hello"), log.command("set_policy", redaction=REDACT_ALL)], book)
    history = book["acme"]
    assert policy_in_force(history, 0, 1) is None  # the policy's own offset: not yet
    assert policy_in_force(history, 0, 2) is not None
    assert policy_in_force(history, 1, 99) is None  # another partition's offsets
    assert policy_in_force(None, 0, 2) is None


def test_set_policy_needs_its_redaction_and_nothing_else_carries_one() -> None:
    base = {"event_id": "c1", "namespace": "acme", "event_time": "2025-01-01T00:00:00+00:00"}
    with pytest.raises(InvalidEvent) as caught:
        validate(CommandIssued, {**base, "command": "set_policy"})
    assert caught.value.field == "redaction"
    with pytest.raises(InvalidEvent) as caught:
        validate(CommandIssued, {**base, "command": "forget", "redaction": {"enabled": True}})
    assert caught.value.field == "redaction"
    with pytest.raises(InvalidEvent) as caught:
        validate(CommandIssued, {**base, "command": "set_policy", "redaction": {"kinds": ["NAME"]}})
    assert caught.value.field == "redaction.kinds.0"


def test_the_local_pipeline_stores_placeholders_not_values() -> None:
    pipeline = LocalPipeline(BagOfWordsEncoder())  # type: ignore[arg-type]
    log = Log()
    for message in [log.command("set_policy", redaction=REDACT_ALL), log.turn(EMAIL_TURN)]:
        pipeline.publish("acme", message.value or b"")
    pipeline.run()
    contents = [r.content for r in pipeline.records().values()]
    assert contents and all("example.org" not in c for c in contents)
    assert any("[EMAIL_1]" in c for c in contents)
    # Replay from the log alone gives the same memories.
    assert {i: r.content for i, r in pipeline.replayed().items()} == {
        i: r.content for i, r in pipeline.records().items()
    }
