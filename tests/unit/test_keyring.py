"""The key ring (a fold of the data-key topic), the master key file and the shredding rules."""

from __future__ import annotations

import os
import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipeline.crypto.envelope import seal, unseal
from pipeline.crypto.keyring import KeyRing, destruction_messages
from pipeline.crypto.shredding import has_own_key, keys_destroyed_by, record_key_id
from pipeline.crypto.wrapping import MASTER_KEY_FILE, LocalKeyWrapper, load_master_key
from pipeline.runtime.settings import Settings, SettingsError
from schemas.codec import encode
from schemas.data_keys import ErasureRecorded, KeyDestroyed
from schemas.errors import DataKeyDestroyed, UnknownDataKey
from schemas.events import CommandIssued, MemoriesRecalled, TurnRecorded
from schemas.memory import MemoryRecord, SourceTurn
from schemas.prepared import LogPosition

AT = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


def wrapper(seed: int = 1) -> LocalKeyWrapper:
    return LocalKeyWrapper(bytes([seed]) * 32)


def published(ring: KeyRing, reader: KeyRing, namespace: str, event_id: str | None = None):  # type: ignore[no-untyped-def]
    """Create a key in ``ring`` and let ``reader`` fold its record as the follower would."""
    key, record = ring.create(namespace, event_id)
    ring.add(record, key.secret)
    reader.fold(record.key_id.encode(), encode(record))
    return key


def test_a_reader_unwraps_what_the_creator_published() -> None:
    creator, reader = KeyRing(wrapper()), KeyRing(wrapper())
    key = published(creator, reader, "acme", "t1")
    assert reader.state(key.key_id) == "live"
    assert reader.key(key.key_id) == key.secret
    assert reader.namespace_of(key.key_id) == "acme"
    assert reader.keys_of("acme") == {key.key_id}
    assert reader.keys_for_events("acme", ["t1"]) == {key.key_id}
    assert reader.seals_event(key.key_id, "t1") and not reader.seals_event(key.key_id, "t2")


def test_unknown_destroyed_and_another_master_key_are_told_apart() -> None:
    creator, reader, stranger = KeyRing(wrapper()), KeyRing(wrapper()), KeyRing(wrapper(2))
    key = published(creator, reader, "acme")
    _, record = creator.create("acme")
    stranger.fold(record.key_id.encode(), encode(record))
    with pytest.raises(UnknownDataKey, match="different master key"):
        stranger.key(record.key_id)
    with pytest.raises(UnknownDataKey):
        reader.key("dk_" + "0" * 32)
    assert reader.state("dk_" + "0" * 32) == "unknown"
    # The destruction record comes first, then the tombstone: either alone means destroyed.
    destroyed = KeyDestroyed(key_id=key.key_id, namespace="acme", cause_event_id="e1", at=AT)
    first, tombstone = destruction_messages([destroyed])
    reader.fold(*first)
    assert reader.state(key.key_id) == "destroyed" and reader.key(key.key_id) is None
    assert tombstone == (key.key_id.encode(), None)
    late = KeyRing(wrapper())
    late.fold(*tombstone)
    assert late.state(key.key_id) == "destroyed"
    assert reader.keys_of("acme") == set()


def test_a_destroyed_key_never_comes_back_and_its_values_shred() -> None:
    ring = KeyRing(wrapper())
    key, record = ring.create("acme", "t1")
    ring.add(record, key.secret)
    raw = seal(b'{"x":1}', "acme", key, "events")
    ring.mark_destroyed(
        [KeyDestroyed(key_id=key.key_id, namespace="acme", cause_event_id="e", at=AT)]
    )
    ring.fold(record.key_id.encode(), encode(record))  # an old copy read again
    with pytest.raises(DataKeyDestroyed):
        unseal(raw, ring, "events")


def test_erasures_fold_into_the_ledger_and_bad_records_are_counted() -> None:
    ring = KeyRing(wrapper())
    erasure = ErasureRecorded(
        namespace="acme",
        cause_event_id="e1",
        at=AT,
        whole_namespace=True,
        keys_destroyed=3,
        source=LogPosition(topic="hindsight.events.v1", partition=0, offset=9),
    )
    [(key, value)] = destruction_messages([], [erasure])
    ring.fold(key, value)
    assert ring.erasure("acme", "e1") == erasure and ring.erasures() == [erasure]
    ring.fold(b"dk_" + b"1" * 32, b"{not json")
    ring.fold(b"__roll__", None)
    assert ring.invalid_records == 1


def test_the_master_key_file_is_created_private_and_reused(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path / "data")
    first = load_master_key(settings)
    path = tmp_path / "data" / MASTER_KEY_FILE
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_master_key(settings) == first and len(first) == 32
    assert [p.name for p in path.parent.iterdir()] == [MASTER_KEY_FILE]
    os.chmod(path, 0o644)
    with pytest.raises(SettingsError, match="chmod 600"):
        load_master_key(settings)


def test_the_master_key_from_the_environment_is_checked() -> None:
    with pytest.raises(SettingsError, match="HINDSIGHT_MASTER_KEY"):
        load_master_key(Settings(master_key_b64="c2hvcnQ="))
    env = Settings.from_env(
        {"HINDSIGHT_MASTER_KEY": "QUFB" * 11 + "QUE=", "HINDSIGHT_ENCRYPTION": "off"}
    )
    assert env.encryption is False
    assert "QUFB" not in repr(env)  # the key never shows in a repr or a log line


def turn(event_id: str) -> TurnRecorded:
    return TurnRecorded(
        event_id=event_id, namespace="acme", event_time=AT, session_id="s", speaker="a", text="x"
    )


def record(memory_id: str, *sources: tuple[str, str | None]) -> MemoryRecord:
    return MemoryRecord(
        id=memory_id,
        namespace="acme",
        region="semantic",
        kind="fact",
        content="c",
        search_text="c",
        base_importance=0.7,
        importance=0.7,
        created_at=AT,
        valid_from=AT,
        updated_at=AT,
        segment_id="g",
        activation=0.7,
        activation_at=AT,
        provenance=[
            SourceTurn(event_id=e, session_id="s", speaker="a", event_time=AT, key_id=k)
            for e, k in sources
        ],
    )


def test_which_events_have_keys_of_their_own() -> None:
    assert has_own_key(turn("t"))
    erase = CommandIssued(event_id="c", namespace="acme", event_time=AT, command="erase")
    forget = erase.model_copy(update={"command": "forget"})
    signal = MemoriesRecalled(event_id="s", namespace="acme", event_time=AT)
    assert has_own_key(erase) and not has_own_key(forget) and not has_own_key(signal)


def test_a_record_is_sealed_with_its_first_sealed_source() -> None:
    assert record_key_id(record("m", ("t0", None), ("t1", "dk_a"), ("t2", "dk_b"))) == "dk_a"
    assert record_key_id(record("m", ("t0", None))) is None


def test_erasing_memories_destroys_their_turns_keys_and_the_erase_key_only() -> None:
    ring = KeyRing(wrapper())

    def make(event_id: str | None, namespace: str = "acme") -> str:
        key, created = ring.create(namespace, event_id)
        ring.add(created, key.secret)
        return key.key_id

    first, confirm, retry = make("t1"), make("t2"), make("t1")  # t1 was sent twice
    other_turn, namespace_key, erase_key = make("t9"), make(None), make("e1")
    foreign = make("t1", "globex")
    erased = record("m1", ("t1", first), ("t2", confirm))
    erase = CommandIssued(
        event_id="e1", namespace="acme", event_time=AT, command="erase", memory_ids=["m1"]
    )
    assert keys_destroyed_by(erase, erase_key, [erased], ring) == {
        first,
        confirm,
        retry,
        erase_key,
    }
    # A per-memory erase sealed with the namespace's command key leaves that key alone.
    assert namespace_key not in keys_destroyed_by(erase, namespace_key, [erased], ring)
    whole = erase.model_copy(update={"whole_namespace": True, "memory_ids": []})
    everything = keys_destroyed_by(whole, erase_key, [], ring)
    assert everything == {first, confirm, retry, other_turn, namespace_key, erase_key}
    assert foreign not in everything
