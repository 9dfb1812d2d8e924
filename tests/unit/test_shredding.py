"""Crypto-shredding through the stages' pure code (``LocalPipeline`` with a key ring).

Sealed turns, commands and signals go through prepare and consolidate; erases destroy data keys
in the same output as their tombstones; a replay afterwards reads nothing of what was erased,
counts it as shredded, and puts every recorded erasure back at its place (I2, I8).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from ingest_support import DAY, T0, BagOfWordsEncoder, Log
from test_consolidate import RecordingProducer
from test_local_pipeline import ADDRESS, MYSQL, OFFICE, PREFERENCE, Script

from pipeline.crypto.envelope import seal
from pipeline.crypto.keyring import KeyRing
from pipeline.crypto.wrapping import LocalKeyWrapper
from pipeline.ingest.commit import TopicsOut, commit_output
from pipeline.ingest.consolidate import PartitionTables, PreparedMessage
from pipeline.ingest.local import LocalPipeline
from pipeline.ingest.prepare import prepare_batch
from pipeline.runtime.settings import MemoryPolicy
from pipeline.views.state_topic import RecordEntry, Shredded, parse_state_message
from schemas.data_keys import KeyDestroyed
from schemas.errors import HindsightError
from schemas.events import TurnRecorded

MINUTE = timedelta(minutes=1)
SECRET = "My locker code is 4711"
# What must never show in sealed bytes: a phrase with spaces, which no hex id or base64 ciphertext
# holds by chance (a bare "4711" does, now and then).
LEAKED = b"code is 4711"


def ring() -> KeyRing:
    return KeyRing(LocalKeyWrapper(b"k" * 32))


def sealed_pipeline() -> LocalPipeline:
    return LocalPipeline(BagOfWordsEncoder(), partitions=2, keys=ring())


def dump(records: dict) -> dict:  # type: ignore[type-arg]
    return {k: v.model_dump(mode="json") for k, v in sorted(records.items())}


def test_sealed_input_builds_the_same_memories_as_plain_input() -> None:
    plain, sealed = (
        LocalPipeline(BagOfWordsEncoder()),
        LocalPipeline(BagOfWordsEncoder(), keys=ring()),
    )
    events = [Script().turn(text, T0 + i * MINUTE) for i, text in enumerate([MYSQL, OFFICE])]
    for event in events:
        plain.publish(event.namespace, event)
        sealed.publish_sealed(event)
    plain.run()
    sealed.run()
    for record in sealed.records().values():
        assert all(source.key_id is not None for source in record.provenance)

    def without_keys(records: dict) -> dict:  # type: ignore[type-arg]
        stripped = {}
        for memory_id, record in dump(records).items():
            for source in record["provenance"]:
                source["key_id"] = None
            stripped[memory_id] = record
        return stripped

    assert without_keys(sealed.records()) == without_keys(plain.records())
    # Nothing of the text is readable in the input or the prepared log.
    for partition in range(sealed.partitions):
        for message in sealed.prepared_log(partition):
            assert b"MySQL" not in (message.value or b"")


def test_a_namespace_erase_destroys_every_key_and_replay_reads_nothing_of_it() -> None:
    pipeline = sealed_pipeline()
    acme, globex = Script("acme"), Script("globex")
    for i, text in enumerate([MYSQL, OFFICE, "thanks!", SECRET]):
        pipeline.publish_sealed(acme.turn(text, T0 + i * MINUTE))
    pipeline.publish_sealed(globex.turn(PREFERENCE, T0))
    pipeline.publish_sealed(acme.recalled(["m_unknown"], T0 + 5 * MINUTE))
    pipeline.run()
    assert {r.namespace for r in pipeline.records().values()} == {"acme", "globex"}
    keys = pipeline.keys
    assert keys is not None
    acme_keys = keys.keys_of("acme")
    assert len(acme_keys) == 5  # four turns and the namespace's key (the recall signal's)
    globex_keys = keys.keys_of("globex")

    erase = acme.command("erase", T0 + DAY, whole_namespace=True)
    pipeline.publish_sealed(erase)
    pipeline.run()

    assert {r.namespace for r in pipeline.records().values()} == {"globex"}
    assert keys.keys_of("acme") == set()
    assert all(keys.state(k) == "destroyed" for k in acme_keys)
    assert keys.keys_of("globex") == globex_keys
    [erasure] = pipeline.erasures()
    assert erasure.whole_namespace and erasure.keys_destroyed == 6  # and the erase's own key
    assert erasure.cause_event_id == erase.event_id
    # Replay: the same live state, every acme event shredded, the erasure put back in its place.
    assert dump(pipeline.replayed()) == dump(pipeline.records())
    assert pipeline.replay_counts["shredded"] == 5  # four turns and the signal
    assert pipeline.replay_counts["erasures_recorded"] == 1
    # The namespace starts afresh: its schedule went with it, live and after a restart.
    pipeline.restart()
    assert "acme" not in pipeline.tables[erasure.source.partition].banks


def test_a_memory_erase_destroys_its_turns_keys_and_nothing_else() -> None:
    pipeline = sealed_pipeline()
    script = Script("acme")
    pipeline.publish_sealed(script.turn(SECRET, T0))
    pipeline.publish_sealed(script.turn(ADDRESS, T0 + MINUTE))
    again = script.turn(SECRET, T0 + 2 * MINUTE)  # restated: it confirms the first memory
    pipeline.publish_sealed(again)
    pipeline.run()
    by_content = {r.content: r for r in pipeline.records().values()}
    locker, address = by_content[SECRET], by_content[ADDRESS]
    assert len(locker.provenance) == 2
    locker_keys = {s.key_id for s in locker.provenance}
    address_keys = {s.key_id for s in address.provenance}

    erase = script.command("erase", T0 + DAY, memory_ids=[locker.id])
    pipeline.publish_sealed(erase)
    pipeline.run()

    keys = pipeline.keys
    assert keys is not None
    assert all(keys.state(k) == "destroyed" for k in locker_keys if k)
    assert all(keys.state(k) == "live" for k in address_keys if k)
    assert keys.keys_for_events("acme", [erase.event_id]) == set()  # the erase's own key too
    assert set(pipeline.records()) == {address.id}
    [erasure] = pipeline.erasures()
    assert (erasure.memory_ids, erasure.keys_destroyed) == ([locker.id], 3)
    replayed = pipeline.replayed()
    assert set(replayed) == {address.id}
    assert pipeline.replay_counts["shredded"] == 2


def test_an_event_after_a_namespace_erase_in_the_same_batch_is_shredded_if_its_key_went() -> None:
    keys = ring()
    pipeline = LocalPipeline(BagOfWordsEncoder(), keys=keys)
    script = Script("acme")
    pipeline.publish_sealed(script.turn(MYSQL, T0))
    pipeline.publish_sealed(script.command("erase", T0 + DAY, whole_namespace=True))
    late = pipeline.publish_sealed(script.turn(OFFICE, T0 + 2 * DAY))  # its key existed already
    pipeline.prepare()
    pipeline.consolidate(batch_size=10)  # all three in one batch
    assert pipeline.records() == {}
    assert pipeline.outputs[-1].counts["shredded"] == 1
    assert pipeline.watermarks()[late.partition].offset == late.offset
    assert dump(pipeline.replayed()) == dump(pipeline.records())


def test_prepare_shreds_a_destroyed_input_and_dead_letters_an_unknown_key() -> None:
    keys, stranger = ring(), ring()
    log = Log()
    turn = TurnRecorded(
        event_id="t1", namespace="acme", event_time=T0, session_id="s", speaker="a", text=SECRET
    )
    gone, created = keys.create("acme", "t1")
    keys.add(created, gone.secret)
    unknown, _ = stranger.create("acme", "t1")
    messages = [
        log.raw(seal(turn, "acme", gone, "events"), b"acme"),
        log.raw(seal(turn, "acme", unknown, "events"), b"acme"),
    ]
    keys.mark_destroyed(
        [KeyDestroyed(key_id=gone.key_id, namespace="acme", cause_event_id="e", at=T0)]
    )
    batch = prepare_batch(messages, BagOfWordsEncoder(), keys=keys)
    [(_, shredded), (_, rejected)] = batch.prepared
    assert shredded.rejected is not None and shredded.rejected.shredded
    assert batch.counts["shredded"] == 1
    [letter] = batch.dead_letters
    assert letter.field == "key_id" and unknown.key_id in letter.reason
    assert letter.source_offset == 1
    assert rejected.rejected is not None and not rejected.rejected.shredded


def test_a_sealed_prepared_event_moved_to_another_offset_is_dead_lettered() -> None:
    keys = ring()
    log = Log()
    turn = TurnRecorded(
        event_id="t1", namespace="acme", event_time=T0, session_id="s", speaker="a", text=SECRET
    )
    key, created = keys.create("acme", "t1")
    keys.add(created, key.secret)
    batch = prepare_batch(
        [log.raw(seal(turn, "acme", key, "events"), b"acme")], BagOfWordsEncoder(), keys=keys
    )
    value = batch.values[0]
    assert LEAKED not in value
    moved = value.replace(b'"offset":0', b'"offset":5')
    tables = PartitionTables(0, "hindsight.events.v1", MemoryPolicy(), keys=keys, shred=True)
    out = tables.apply_all([PreparedMessage("hindsight.prepared.v1", 0, 0, b"acme", moved)])
    [letter] = out.dead_letters
    assert letter.field == "ciphertext" and key.key_id in letter.reason
    assert not out.writes


def test_an_erase_commits_its_shredding_in_the_same_transaction() -> None:
    pipeline = sealed_pipeline()
    keys = pipeline.keys
    assert keys is not None
    topics = TopicsOut("state", "updates", "dead-letters", "data-keys")
    script = Script("acme")
    pipeline.publish_sealed(script.turn(SECRET, T0))
    pipeline.run()
    [record] = pipeline.records().values()

    # Before the erase: the record and its feed entry leave sealed, and they open.
    before = RecordingProducer()
    asyncio.run(commit_output(before, topics, pipeline.outputs[-1], keys=keys))  # type: ignore[arg-type]
    [value] = [v for t, _, k, v in before.sent if t == "state" and k == record.id.encode()]
    assert value is not None and LEAKED not in value
    assert isinstance(parse_state_message(record.id.encode(), value, keys), RecordEntry)
    assert all(LEAKED not in (v or b"") for t, _, _, v in before.sent if t == "updates")

    erase = script.command("erase", T0 + DAY, memory_ids=[record.id])
    pipeline.publish_sealed(erase)
    pipeline.run()
    erased = pipeline.outputs[-1]
    after = RecordingProducer()
    asyncio.run(commit_output(after, topics, erased, keys=keys))  # type: ignore[arg-type]

    # One transaction: the tombstone, a plain feed entry, and per key its destruction record
    # and a tombstone on the data-key topic, then the erasure.
    assert after.calls == ["begin", "commit"]
    [tombstone] = [v for t, _, k, v in after.sent if t == "state" and k == record.id.encode()]
    assert tombstone is None
    [feed] = [v for t, _, _, v in after.sent if t == "updates"]
    assert feed is not None and b'"change":"erased"' in feed and b'"content":""' in feed
    data_keys = [(k, v) for t, _, k, v in after.sent if t == "data-keys"]
    turn_key = record.provenance[0].key_id
    assert turn_key is not None
    assert turn_key in erased.destroyed
    assert len(erased.destroyed) == 2  # the turn's key and the erase's own
    assert {k for k, v in data_keys if v is None} == {k.encode() for k in erased.destroyed}
    assert data_keys[-1][0] == f"__erasure__:acme:{erase.event_id}".encode()
    # What was written before no longer opens anywhere.
    assert isinstance(parse_state_message(record.id.encode(), value, keys), Shredded)
    # Replay's commit path never destroys keys.
    with pytest.raises(HindsightError, match="data-key topic"):
        asyncio.run(commit_output(RecordingProducer(), TopicsOut("s", "u", "d"), erased, keys=keys))  # type: ignore[arg-type]
