"""The sealed envelope: round trips, and every way a value must refuse to open (I8)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import orjson
import pytest

from pipeline.crypto.envelope import (
    DataKey,
    new_key_id,
    new_secret,
    seal,
    sealed_envelope,
    unseal,
)
from schemas.codec import decode_event, encode
from schemas.errors import DataKeyDestroyed, InvalidEvent, UnknownDataKey
from schemas.events import TurnRecorded
from schemas.prepared import LogPosition

AT = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)
TURN = TurnRecorded(
    event_id="t1",
    namespace="acme",
    event_time=AT,
    session_id="s",
    speaker="alice",
    text="My locker code is 4711.",
)


class Keys:
    """A plain KeyLookup: live keys, destroyed ids, and nothing else known."""

    def __init__(self, *keys: DataKey, destroyed: tuple[str, ...] = ()) -> None:
        self.keys = {k.key_id: k for k in keys}
        self.destroyed = set(destroyed)

    def key(self, key_id: str) -> bytes | None:
        if key_id in self.destroyed:
            return None
        if key_id not in self.keys:
            raise UnknownDataKey(key_id)
        return self.keys[key_id].secret

    def namespace_of(self, key_id: str) -> str | None:
        key = self.keys.get(key_id)
        return key.namespace if key else None


def key(namespace: str = "acme") -> DataKey:
    return DataKey(new_key_id(), namespace, new_secret())


def test_a_sealed_turn_opens_to_the_same_bytes_and_hides_the_text() -> None:
    k = key()
    raw = seal(TURN, "acme", k, "events")
    # Phrases with spaces: a random key id (hex) or ciphertext (base64) never holds one, where a
    # bare "4711" turns up in them by chance (dk_…d5442471167…, a CI run of 2026-12-04).
    assert b"code is 4711" not in raw and b"locker" not in raw
    envelope = orjson.loads(raw)
    assert envelope["event_type"] == "Sealed"
    assert (envelope["namespace"], envelope["key_id"]) == ("acme", k.key_id)
    opened = unseal(raw, Keys(k), "events")
    assert opened.content == encode(TURN)
    assert opened.key_id == k.key_id
    assert decode_event(opened.content) == TURN


def test_two_seals_of_the_same_content_differ() -> None:
    k = key()
    assert seal(TURN, "acme", k, "events") != seal(TURN, "acme", k, "events")


def test_a_plain_value_passes_through() -> None:
    plain = encode(TURN)
    opened = unseal(plain, Keys(), "events")
    assert opened.content == plain and opened.envelope is None
    assert unseal(b"not json", None, "events").content == b"not json"
    # Content that merely mentions the word is not an envelope.
    assert sealed_envelope(encode(TURN.model_copy(update={"text": '"Sealed" box'}))) is None


def test_a_wrong_key_fails_naming_the_key_id() -> None:
    right, wrong = key(), key()
    raw = seal(TURN, "acme", right, "events")
    impostor = Keys(DataKey(right.key_id, "acme", wrong.secret))
    with pytest.raises(InvalidEvent) as failure:
        unseal(raw, impostor, "events")
    assert failure.value.field == "ciphertext"
    assert right.key_id in str(failure.value)


def test_a_value_moved_to_another_topic_role_does_not_open() -> None:
    k = key()
    raw = seal(TURN, "acme", k, "events")
    with pytest.raises(InvalidEvent, match="topic role memory_state"):
        unseal(raw, Keys(k), "memory_state")


def test_a_changed_namespace_or_position_does_not_open() -> None:
    k = key()
    position = LogPosition(topic="hindsight.events.v1", partition=0, offset=7, timestamp_ms=1)
    raw = seal(TURN, "acme", k, "prepared", source=position)
    moved = orjson.loads(raw)
    moved["source"]["offset"] = 8
    with pytest.raises(InvalidEvent, match=k.key_id):
        unseal(orjson.dumps(moved), Keys(k), "prepared")
    other = orjson.loads(raw)
    other["namespace"] = "globex"
    with pytest.raises(InvalidEvent, match="belongs to namespace 'acme'"):
        unseal(orjson.dumps(other), Keys(k), "prepared")


def test_a_tampered_ciphertext_does_not_open() -> None:
    k = key()
    envelope = orjson.loads(seal(TURN, "acme", k, "events"))
    data = bytearray(base64.b64decode(envelope["ciphertext"]))
    data[3] ^= 0x01
    envelope["ciphertext"] = base64.b64encode(bytes(data)).decode()
    with pytest.raises(InvalidEvent, match="tampered"):
        unseal(orjson.dumps(envelope), Keys(k), "events")


def test_a_destroyed_key_shreds_and_an_unknown_one_says_so() -> None:
    k = key()
    raw = seal(TURN, "acme", k, "events")
    with pytest.raises(DataKeyDestroyed) as destroyed:
        unseal(raw, Keys(destroyed=(k.key_id,)), "events")
    assert destroyed.value.key_id == k.key_id
    with pytest.raises(UnknownDataKey, match=k.key_id):
        unseal(raw, Keys(), "events")
    with pytest.raises(UnknownDataKey, match="encryption is off"):
        unseal(raw, None, "events")


def test_a_malformed_envelope_names_the_field() -> None:
    k = key()
    envelope = orjson.loads(seal(TURN, "acme", k, "events"))
    envelope["nonce"] = "!!!!!!!!!!!!!!!!"
    with pytest.raises(InvalidEvent) as failure:
        unseal(orjson.dumps(envelope), Keys(k), "events")
    assert failure.value.field == "nonce"
    del envelope["key_id"]
    with pytest.raises(InvalidEvent) as missing:
        sealed_envelope(orjson.dumps(envelope))
    assert missing.value.field == "key_id"


def test_sealing_with_another_namespaces_key_is_refused() -> None:
    with pytest.raises(InvalidEvent, match="belongs to namespace 'globex'"):
        seal(TURN, "acme", key("globex"), "events")
