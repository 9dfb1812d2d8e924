"""The upcaster chain (I6, STYLE #1): every fixture of every old version becomes the current one."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

import schemas
from schemas.codec import decode_event
from schemas.errors import InvalidEvent
from schemas.events import CURRENT_VERSIONS, EVENT_TYPES, TurnRecorded
from schemas.upcasting import UPCASTERS, upcast

FIXTURES = Path(schemas.__file__).parent / "fixtures"
FIXTURE_FILES = sorted(FIXTURES.glob("*.json"))
FIXTURE_NAME = re.compile(r"^(?P<stem>[a-z_]+)_v(?P<version>\d+)\.json$")
FIXTURE_TYPES = {"turn": "TurnRecorded", "command": "CommandIssued", "signal": "MemoriesRecalled"}


def load(path: Path) -> dict[str, Any]:
    payload: dict[str, Any] = orjson.loads(path.read_bytes())
    return payload


def _stem(event_type: str) -> str:
    return {value: key for key, value in FIXTURE_TYPES.items()}[event_type]


def v1_turn(**changes: Any) -> dict[str, Any]:
    payload = load(FIXTURES / "turn_v1.json")
    for key, value in changes.items():
        if value is ...:
            payload.pop(key, None)
        else:
            payload[key] = value
    return payload


def test_there_are_fixtures() -> None:
    assert FIXTURE_FILES, f"no fixtures under {FIXTURES}"


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=[p.name for p in FIXTURE_FILES])
def test_fixture_name_matches_its_content(path: Path) -> None:
    match = FIXTURE_NAME.match(path.name)
    assert match, f"{path.name}: expected <kind>_v<N>.json"
    payload = load(path)

    assert payload["event_type"] == FIXTURE_TYPES[match.group("stem")]
    assert payload["schema_version"] == int(match.group("version"))


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=[p.name for p in FIXTURE_FILES])
def test_every_fixture_decodes_to_the_current_version(path: Path) -> None:
    payload = load(path)
    event = decode_event(path.read_bytes())

    assert type(event) is EVENT_TYPES[payload["event_type"]]
    assert event.schema_version == CURRENT_VERSIONS[payload["event_type"]]  # type: ignore[union-attr]
    assert event.event_id == payload["event_id"]
    assert event.namespace == payload["namespace"]
    assert event.event_time.tzinfo is not None


def test_every_old_version_has_an_upcaster_and_a_fixture() -> None:
    fixtures = {(load(path)["event_type"], load(path)["schema_version"]) for path in FIXTURE_FILES}
    for event_type, current in CURRENT_VERSIONS.items():
        for version in range(1, current):
            assert (event_type, version) in UPCASTERS, f"no upcaster for {event_type} v{version}"
            assert (event_type, version) in fixtures, f"no fixture for {event_type} v{version}"
        assert (event_type, current) not in UPCASTERS


def test_every_upcaster_moves_exactly_one_version_forward() -> None:
    for (event_type, version), step in UPCASTERS.items():
        fixture = FIXTURES / f"{_stem(event_type)}_v{version}.json"
        upgraded = step(load(fixture))
        assert upgraded["schema_version"] == version + 1
        assert upgraded["event_type"] == event_type


def test_v1_turn_upcasts_to_the_same_event_as_its_v2_fixture() -> None:
    old = decode_event((FIXTURES / "turn_v1.json").read_bytes())
    new = decode_event((FIXTURES / "turn_v2.json").read_bytes())

    assert isinstance(old, TurnRecorded)
    assert isinstance(new, TurnRecorded)
    assert old.text == new.text
    assert old.speaker == new.speaker
    assert old.namespace == new.namespace
    assert old.event_time == new.event_time == datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def test_v1_turn_field_mapping() -> None:
    upgraded = upcast(v1_turn())

    assert upgraded["schema_version"] == 2
    assert upgraded["text"] == "We use PostgreSQL for billing."
    assert upgraded["speaker"] == "alice"
    assert upgraded["session_id"] == "default"
    assert datetime.fromisoformat(upgraded["event_time"]) == datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
    assert not {"content", "user", "timestamp"} & upgraded.keys()


def test_v1_turn_keeps_its_session_and_defaults_its_speaker() -> None:
    event = decode_event(orjson.dumps(v1_turn(session_id="chat-7", user=...)))

    assert isinstance(event, TurnRecorded)
    assert event.session_id == "chat-7"
    assert event.speaker == "user"


def test_upcasting_does_not_mutate_its_input() -> None:
    payload = v1_turn()
    before = dict(payload)

    upcast(payload)

    assert payload == before


def test_current_version_passes_through_unchanged() -> None:
    payload = load(FIXTURES / "turn_v2.json")

    assert upcast(dict(payload)) == payload


@pytest.mark.parametrize("timestamp", ["2024-05-01", None, True, ...])
def test_v1_timestamp_must_be_epoch_seconds(timestamp: object) -> None:
    with pytest.raises(InvalidEvent) as caught:
        decode_event(orjson.dumps(v1_turn(timestamp=timestamp)))

    assert caught.value.field == "timestamp"
    assert caught.value.stage == "upcast"


@pytest.mark.parametrize("timestamp", [1e20, -1e15, 253402300800])
def test_v1_timestamp_out_of_range_is_an_invalid_event_not_a_crash(timestamp: float) -> None:
    with pytest.raises(InvalidEvent) as caught:
        decode_event(orjson.dumps(v1_turn(timestamp=timestamp)))

    assert caught.value.field == "timestamp"


def test_v1_turn_with_float_timestamp_is_accepted() -> None:
    event = decode_event(orjson.dumps(v1_turn(timestamp=1714557600.5)))

    assert event.event_time == datetime(2024, 5, 1, 10, 0, 0, 500000, tzinfo=UTC)


def test_v1_turn_without_content_fails_validation_naming_text() -> None:
    with pytest.raises(InvalidEvent) as caught:
        decode_event(orjson.dumps(v1_turn(content=...)))

    assert caught.value.field == "text"
