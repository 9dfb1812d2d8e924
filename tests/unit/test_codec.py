"""``schemas.codec.decode_event``: bytes in, a current-version event or an ``InvalidEvent`` out."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import orjson
import pytest

from schemas.codec import decode_event, encode
from schemas.errors import HindsightError, InvalidEvent, UnknownSchemaVersion
from schemas.events import (
    MAX_EVENT_BYTES,
    MAX_TURN_CHARS,
    CommandIssued,
    MemoriesRecalled,
    RecallHit,
    TurnRecorded,
    check_namespace,
)

AT = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def turn_payload(**changes: Any) -> dict[str, Any]:
    """A valid v2 turn as it sits on the wire; ``...`` as a value removes the field."""
    payload: dict[str, Any] = {
        "event_type": "TurnRecorded",
        "schema_version": 2,
        "event_id": "turn-1",
        "namespace": "acme",
        "session_id": "s1",
        "speaker": "alice",
        "role": "user",
        "text": "We use PostgreSQL for billing.",
        "event_time": "2024-05-01T10:00:00+00:00",
        "metadata": {"dia_id": "D1:3"},
    }
    for key, value in changes.items():
        if value is ...:
            payload.pop(key, None)
        else:
            payload[key] = value
    return payload


def raw(**changes: Any) -> bytes:
    return orjson.dumps(turn_payload(**changes))


def rejected(data: bytes | None) -> InvalidEvent:
    with pytest.raises(InvalidEvent) as caught:
        decode_event(data)
    return caught.value


# -- valid input --------------------------------------------------------------------------------


def test_valid_v2_turn_decodes_to_a_frozen_turn_with_utc_event_time() -> None:
    event = decode_event(raw())

    assert isinstance(event, TurnRecorded)
    assert event.schema_version == 2
    assert event.event_id == "turn-1"
    assert event.namespace == "acme"
    assert event.session_id == "s1"
    assert event.speaker == "alice"
    assert event.role == "user"
    assert event.text == "We use PostgreSQL for billing."
    assert event.event_time == AT
    assert event.event_time.tzinfo is not None
    assert event.metadata == {"dia_id": "D1:3"}
    with pytest.raises(Exception, match="frozen"):
        event.text = "changed"  # type: ignore[misc]


def test_event_time_with_an_offset_is_normalised_to_utc() -> None:
    event = decode_event(raw(event_time="2024-05-01T12:00:00+02:00"))

    assert event.event_time == AT
    assert event.event_time.utcoffset() == UTC.utcoffset(None)


def test_optional_turn_fields_take_their_defaults() -> None:
    event = decode_event(raw(role=..., metadata=...))

    assert isinstance(event, TurnRecorded)
    assert event.role == "user"
    assert event.metadata == {}


def test_unknown_extra_fields_are_ignored() -> None:
    event = decode_event(raw(added_in_a_later_producer=True))

    assert isinstance(event, TurnRecorded)
    assert not hasattr(event, "added_in_a_later_producer")


def test_text_of_exactly_the_limit_is_accepted() -> None:
    event = decode_event(raw(text="x" * MAX_TURN_CHARS))

    assert isinstance(event, TurnRecorded)
    assert len(event.text) == MAX_TURN_CHARS


def test_chinese_text_survives_decoding() -> None:
    event = decode_event(raw(text="以后所有代码都用 TypeScript"))

    assert isinstance(event, TurnRecorded)
    assert event.text == "以后所有代码都用 TypeScript"


# -- malformed input ----------------------------------------------------------------------------


def test_errors_share_the_hindsight_root() -> None:
    assert issubclass(InvalidEvent, HindsightError)
    assert issubclass(UnknownSchemaVersion, InvalidEvent)


def test_missing_value_is_rejected() -> None:
    error = rejected(None)

    assert error.stage == "decode"
    assert "no value" in error.reason


@pytest.mark.parametrize("data", [b"{not json", b"", b'{"event_type": "TurnRecorded"', b"\xff\xfe"])
def test_malformed_json_is_rejected_at_decode(data: bytes) -> None:
    error = rejected(data)

    assert error.stage == "decode"
    assert "malformed JSON" in error.reason


@pytest.mark.parametrize("data", [b"[1, 2]", b'"a string"', b"42", b"null", b"true"])
def test_json_that_is_not_an_object_is_rejected(data: bytes) -> None:
    error = rejected(data)

    assert error.stage == "decode"
    assert "JSON object" in error.reason


@pytest.mark.parametrize(
    "field", ["text", "event_id", "namespace", "session_id", "speaker", "event_time"]
)
def test_missing_required_field_is_named(field: str) -> None:
    error = rejected(raw(**{field: ...}))

    assert error.field == field
    assert error.stage == "validate"
    assert str(error).startswith(f"{field}:")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("text", 123),
        ("text", ["a", "b"]),
        ("speaker", None),
        ("metadata", "not a mapping"),
        ("event_time", "yesterday"),
        ("role", "boss"),
        ("event_id", ""),
    ],
)
def test_wrong_type_or_value_names_the_field(field: str, value: object) -> None:
    error = rejected(raw(**{field: value}))

    assert error.field == field
    assert error.stage == "validate"


def test_nested_field_errors_name_the_path() -> None:
    payload = {
        "event_type": "MemoriesRecalled",
        "schema_version": 1,
        "event_id": "r1",
        "namespace": "acme",
        "event_time": "2024-05-01T10:00:00+00:00",
        "hits": [{"memory_id": "m_1", "rank": -1, "score": 0.5}],
    }
    error = rejected(orjson.dumps(payload))

    assert error.field == "hits.0.rank"


@pytest.mark.parametrize("event_type", ["TurnDeleted", "turnrecorded", "", 5, None])
def test_unknown_event_type_is_rejected(event_type: object) -> None:
    error = rejected(raw(event_type=event_type))

    assert error.field == "event_type"
    assert "unknown event_type" in error.reason


def test_missing_event_type_is_rejected() -> None:
    assert rejected(raw(event_type=...)).field == "event_type"


@pytest.mark.parametrize("version", [0, 3, 99, -1])
def test_unknown_schema_version_names_schema_version(version: int) -> None:
    error = rejected(raw(schema_version=version))

    assert isinstance(error, UnknownSchemaVersion)
    assert error.field == "schema_version"
    assert str(version) in error.reason
    assert "TurnRecorded" in error.reason


@pytest.mark.parametrize("version", ["2", 2.5, True, None, ...])
def test_schema_version_must_be_an_integer(version: object) -> None:
    error = rejected(raw(schema_version=version))

    assert error.field == "schema_version"


def test_unknown_schema_version_of_a_command_is_rejected() -> None:
    payload = {
        "event_type": "CommandIssued",
        "schema_version": 2,
        "event_id": "c1",
        "namespace": "acme",
        "event_time": "2024-05-01T10:00:00+00:00",
        "command": "tick",
    }
    assert rejected(orjson.dumps(payload)).field == "schema_version"


@pytest.mark.parametrize("text", ["", " ", "   \n\t  ", "\u3000"])
def test_empty_or_whitespace_text_names_text(text: str) -> None:
    error = rejected(raw(text=text))

    assert error.field == "text"
    assert "empty" in error.reason


def test_text_longer_than_the_limit_names_text() -> None:
    error = rejected(raw(text="x" * (MAX_TURN_CHARS + 1)))

    assert error.field == "text"
    assert str(MAX_TURN_CHARS) in error.reason


def test_oversized_event_bytes_are_rejected_before_parsing() -> None:
    data = raw(metadata={"padding": "x" * MAX_EVENT_BYTES})
    assert len(data) > MAX_EVENT_BYTES

    error = rejected(data)

    assert error.stage == "decode"
    assert str(MAX_EVENT_BYTES) in error.reason


def test_oversized_garbage_is_rejected_by_size_not_parsed() -> None:
    error = rejected(b"{" * (MAX_EVENT_BYTES + 1))

    assert "limit" in error.reason


@pytest.mark.parametrize(
    "namespace",
    ["", "has space", "-starts-with-dash", "slash/inside", "x" * 129, "émoji😀", "tab\tns"],
)
def test_bad_namespace_format_names_namespace(namespace: str) -> None:
    error = rejected(raw(namespace=namespace))

    assert error.field == "namespace"


@pytest.mark.parametrize("namespace", ["a", "acme", "user:42", "team.alpha_1", "bob@example.com"])
def test_good_namespaces_are_accepted(namespace: str) -> None:
    assert decode_event(raw(namespace=namespace)).namespace == namespace
    assert check_namespace(namespace) == namespace


def test_check_namespace_outside_an_event_names_the_field() -> None:
    with pytest.raises(InvalidEvent) as caught:
        check_namespace("no spaces allowed")

    assert caught.value.field == "namespace"


@pytest.mark.parametrize("event_time", ["2024-05-01T10:00:00", "2024-05-01 10:00:00"])
def test_event_time_without_timezone_is_rejected(event_time: str) -> None:
    error = rejected(raw(event_time=event_time))

    assert error.field == "event_time"
    assert "timezone" in error.reason


@pytest.mark.parametrize("event_time", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:00:00-05:00"])
def test_event_time_that_overflows_in_utc_is_an_invalid_event_not_a_crash(event_time: str) -> None:
    # A poison event must become a dead letter (I7), never an OverflowError that stops the stream.
    error = rejected(raw(event_time=event_time))

    assert error.field == "event_time"


def test_unknown_command_names_command() -> None:
    payload = {
        "event_type": "CommandIssued",
        "schema_version": 1,
        "event_id": "c1",
        "namespace": "acme",
        "event_time": "2024-05-01T10:00:00+00:00",
        "command": "explode",
    }
    assert rejected(orjson.dumps(payload)).field == "command"


# -- round trips --------------------------------------------------------------------------------

ROUND_TRIP_EVENTS: list[TurnRecorded | CommandIssued | MemoriesRecalled] = [
    TurnRecorded(
        event_id="t1",
        namespace="acme",
        event_time=AT,
        session_id="s1",
        speaker="alice",
        role="assistant",
        text="以后所有代码都用 TypeScript — noted.",
        metadata={"dia_id": "D1:1", "nested": {"k": [1, 2]}},
    ),
    CommandIssued(event_id="c1", namespace="acme", event_time=AT, command="tick"),
    CommandIssued(
        event_id="c2",
        namespace="acme",
        event_time=AT,
        command="forget",
        memory_ids=["m_1", "m_2"],
        reason="user asked",
        query="billing",
    ),
    CommandIssued(
        event_id="c3", namespace="acme", event_time=AT, command="erase", whole_namespace=True
    ),
    CommandIssued(
        event_id="c4",
        namespace="acme",
        event_time=AT,
        command="feedback",
        memory_ids=["m_1"],
        score=0.5,
    ),
    CommandIssued(event_id="c5", namespace="acme", event_time=AT, command="pin", memory_ids=["m"]),
    CommandIssued(event_id="c6", namespace="acme", event_time=AT, command="unpin"),
    MemoriesRecalled(
        event_id="r1",
        namespace="acme",
        event_time=AT,
        query="what database?",
        hits=[
            RecallHit(memory_id="m_1", rank=0, score=0.91),
            RecallHit(memory_id="m_2", rank=1, score=0.5),
        ],
    ),
    MemoriesRecalled(event_id="r2", namespace="acme", event_time=AT),
]


@pytest.mark.parametrize(
    "event", ROUND_TRIP_EVENTS, ids=[e.event_type + ":" + e.event_id for e in ROUND_TRIP_EVENTS]
)
def test_encode_then_decode_returns_an_equal_event(
    event: TurnRecorded | CommandIssued | MemoriesRecalled,
) -> None:
    data = encode(event)
    decoded = decode_event(data)

    assert type(decoded) is type(event)
    assert decoded == event
    assert encode(decoded) == data


def test_encoded_events_carry_type_and_version_on_the_wire() -> None:
    for event in ROUND_TRIP_EVENTS:
        wire = orjson.loads(encode(event))
        assert wire["event_type"] == event.event_type
        assert wire["schema_version"] == event.schema_version
        assert datetime.fromisoformat(wire["event_time"]).tzinfo is not None
