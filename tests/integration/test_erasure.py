"""Erasure that holds: after ``hindsight erase`` and a hard forget, nothing readable is left.

The test runs its own broker (its segment files are what it scans) under the stack's data dir, as
``hindsight up`` lays it out, with a worker process and a real Milvus Lite file. It retains turns
carrying unique markers, checks they are recallable, shows that the scan finds what is there
before (the markers and vectors in Milvus, the wrapped keys and the sealed turns in the broker's
files, a plain control file), erases one namespace through the CLI (a real subprocess) and one
memory of another namespace with a hard forget, and then — waiting on conditions with deadlines —
scans every file of the broker and of the stack's data dir for the markers, the vectors' float32
bytes and the destroyed keys (wrapped and in the clear): zero hits but the control file. A replay
afterwards reads nothing of what was erased, counts it as shredded and records the erasures.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import orjson
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from infra.broker import LocalKafka
from pipeline.crypto.envelope import sealed_envelope, unseal
from pipeline.ingest.replay import run_replay
from pipeline.interfaces.client import Hindsight
from pipeline.models.encoders import load_encoder
from pipeline.runtime.settings import Settings
from pipeline.runtime.stack import WorkerProcess, wait_worker_ready
from pipeline.views.state_topic import RecordEntry, parse_state_message, partition_ids
from schemas.errors import DataKeyDestroyed
from schemas.memory import MemoryRecord
from topics.admin import ensure_topics
from topics.catalogue import topic_names

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2024, 7, 1, 9, 0, tzinfo=UTC)
CONTROL_FILE = "control-plain.txt"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Settings, LocalKafka]]:
    data_dir = tmp_path_factory.mktemp("erasure") / "stack"
    broker = LocalKafka(data_dir / "kafka")  # where `hindsight up` puts it
    broker.start()
    settings = Settings(
        data_dir=data_dir,
        bootstrap=broker.bootstrap,
        partitions=2,
        app_id=f"hindsight-erasure-{uuid.uuid4().hex[:6]}",
    )
    worker = WorkerProcess(settings)
    try:
        asyncio.run(ensure_topics(broker.bootstrap, "", settings.partitions, 1))
        worker.start()
        asyncio.run(wait_worker_ready(settings, worker))
        yield settings, broker
    finally:
        worker.stop()
        broker.stop()


def scan(roots: list[Path], needles: dict[str, bytes]) -> list[tuple[str, str]]:
    """(needle, file) for every needle found in any file under ``roots``."""
    hits = []
    for root in roots:
        for path in sorted(root.rglob("*")):
            try:
                if not path.is_file():
                    continue
                # Kafka preallocates its index files: zeros at the end hide nothing.
                data = path.read_bytes().rstrip(b"\x00")
            except (FileNotFoundError, PermissionError):
                continue  # a segment replaced by the cleaner while we walked
            hits += [(label, str(path)) for label, needle in needles.items() if needle in data]
    return hits


async def wait_until(what: str, condition, timeout: float) -> float:  # type: ignore[no-untyped-def]
    """Seconds until ``condition()`` held; polls with a deadline (no fixed waits)."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{what}: not within {timeout:.0f}s")
        await asyncio.sleep(0.5)
    return time.monotonic() - started


def vector_needles(label: str, record: MemoryRecord) -> dict[str, bytes]:
    """A vector as Milvus and the prepared topic would hold it: float32 bytes, base64, JSON."""
    raw = np.asarray(record.vector, dtype="<f4").tobytes()
    assert len(raw) == 4 * 384, "a real vector, or the needles would match anything"
    return {
        f"{label}:f32": raw[:64],
        f"{label}:f32-tail": raw[-64:],
        f"{label}:b64": base64.b64encode(raw)[:48],
        f"{label}:json": orjson.dumps(record.vector[:3])[1:-1],
    }


async def sealed_inputs(settings: Settings, namespace: str) -> list[bytes]:
    """The namespace's values on the input log, as stored (sealed)."""
    topic = topic_names(settings.topic_prefix)["events"]
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, group_id=None)
    await consumer.start()
    values: list[bytes] = []
    try:
        for partition in await partition_ids(settings.bootstrap or "", topic):
            tp = TopicPartition(topic, partition)
            end = (await consumer.end_offsets([tp]))[tp]
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            while await consumer.position(tp) < end:
                for message in (await consumer.getmany(tp, timeout_ms=500)).get(tp, []):
                    if message.key == namespace.encode() and message.value:
                        values.append(message.value)
    finally:
        await consumer.stop()
    return values


async def state_entries(settings: Settings, client: Hindsight) -> list[object]:
    """Every message of the state topic, parsed with the client's keys."""
    topic = topic_names(settings.topic_prefix)["memory_state"]
    consumer = AIOKafkaConsumer(
        bootstrap_servers=settings.bootstrap, group_id=None, isolation_level="read_committed"
    )
    await consumer.start()
    entries: list[object] = []
    try:
        for partition in await partition_ids(settings.bootstrap or "", topic):
            tp = TopicPartition(topic, partition)
            end = (await consumer.end_offsets([tp]))[tp]
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            while await consumer.position(tp) < end:
                for message in (await consumer.getmany(tp, timeout_ms=500)).get(tp, []):
                    entries.append(parse_state_message(message.key, message.value, client.keys))
    finally:
        await consumer.stop()
    return entries


def erase_with_the_cli(settings: Settings, namespace: str) -> dict[str, object]:
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "pipeline.interfaces.cli",
            "erase",
            namespace,
            "--bootstrap",
            settings.bootstrap or "",
            "--data-dir",
            str(settings.data_dir),
            "--partitions",
            str(settings.partitions),
            "--reason",
            "the user asked to be forgotten",
            "--json",
        ],
        cwd=ROOT,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        timeout=180,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr.decode()
    return json.loads(completed.stdout)


async def test_an_erase_leaves_nothing_readable_in_any_file(
    stack: tuple[Settings, LocalKafka], tmp_path: Path
) -> None:
    settings, broker = stack
    data_dir = Path(settings.data_dir)
    tag = uuid.uuid4().hex[:12]
    gone, partly = f"gone-{tag}", f"partly-{tag}"
    markers = {f"m{i}": f"zq{tag}x{i}" for i in range(6)}
    gone_texts = [
        f"My locker code is {markers['m0']}.",
        f"My home address is {markers['m1']} Elm Street.",
        f"I prefer to be called {markers['m2']} at work.",
        f"thanks {markers['m3']}!",  # chit-chat: never a memory, but it is in the log
    ]
    forgotten_text = f"My passport number is {markers['m4']}."
    kept_text = f"Our staging cluster is called {markers['m5']}."
    timings: dict[str, float] = {}

    async with Hindsight.connect(settings, encoder=load_encoder("minilm")) as client:
        keys = client.keys
        assert keys is not None, "encryption is on by default"
        receipts = [
            await client.retain(gone, text, event_time=T0 + timedelta(minutes=i))
            for i, text in enumerate(gone_texts)
        ]
        receipts.append(await client.retain(partly, forgotten_text, event_time=T0))
        receipts.append(await client.retain(partly, kept_text, event_time=T0))
        for receipt in receipts:
            await client.wait_applied(receipt, timeout=120)
        found = await client.recall(gone, "what is my locker code?", at=T0, reinforce=False)
        assert markers["m0"] in found.memories[0].content, "retained and recallable"
        found = await client.recall(partly, "my passport number", at=T0)  # a sealed signal
        assert markers["m4"] in found.memories[0].content
        assert found.signal is not None
        await client.wait_applied(found.signal)

        by_content = {r.content: r for r in client.records(partly)}
        forgotten, kept = by_content[forgotten_text], by_content[kept_text]
        gone_records = client.records(gone)
        assert len(gone_records) >= 3  # the marker may make even the "thanks" a memory
        # The vectors exactly as the pipeline wrote them (the hot index keeps its own copy).
        written = {
            e.record.id: e.record
            for e in await state_entries(settings, client)
            if isinstance(e, RecordEntry)
        }
        gone_records = [written[r.id] for r in gone_records]
        forgotten = written[forgotten.id]
        # What must go: the markers of the erased turns, their vectors, every key of the erased
        # namespace and of the forgotten memory's turns — wrapped (as the topic holds them) and
        # in the clear (which must never have been written anywhere).
        erased_markers = {k: v.encode() for k, v in markers.items() if k != "m5"}
        needles: dict[str, bytes] = dict(erased_markers)
        for index, record in enumerate([*gone_records, forgotten]):
            needles.update(vector_needles(f"vector{index}", record))
        destroyed_ids = keys.keys_of(gone) | {
            s.key_id for s in forgotten.provenance if s.key_id is not None
        }
        assert len(destroyed_ids) >= 5  # four turns and the namespace's command key
        for key_id in sorted(destroyed_ids):
            wrapped_key, secret = keys.wrapped(key_id), keys.key(key_id)
            assert wrapped_key is not None and secret is not None
            needles[f"{key_id}:wrapped"] = base64.b64encode(wrapped_key)  # as the topic holds it
            needles[f"{key_id}:wrapped-raw"] = wrapped_key
            needles[f"{key_id}:secret"] = secret
            needles[f"{key_id}:secret-b64"] = base64.b64encode(secret)
        broker_dir, milvus_dir = broker.data_dir, data_dir / "milvus"

        # Before: the scan finds what is there. Milvus holds the memories in the clear (a view
        # for search); the broker holds the wrapped keys and the sealed turns, never the text.
        def in_milvus(label_prefix: str) -> bool:
            labels = {label for label, _ in scan([milvus_dir], needles)}
            return all(f"{label_prefix}{i}" in labels for i in (0, 1, 2, 4))

        await wait_until("the markers reach the Milvus files", lambda: in_milvus("m"), 120)
        before = {label for label, _ in scan([broker_dir], needles)}
        assert not before & set(erased_markers), "turn text never reaches the broker's files"
        assert {f"{k}:wrapped" for k in destroyed_ids} <= before
        assert not {label for label in before if label.endswith((":secret", ":secret-b64"))}
        sealed = await sealed_inputs(settings, gone)
        assert len(sealed) == len(gone_texts)
        opened = b"".join(unseal(v, keys, "events").content or b"" for v in sealed)
        assert all(marker.encode() in opened for marker in list(markers.values())[:4])
        envelope = sealed_envelope(sealed[0])
        assert envelope is not None
        assert scan([broker_dir], {"ciphertext": envelope.ciphertext[:64].encode()})
        (data_dir / CONTROL_FILE).write_text(f"a plain copy: {markers['m0']}\n")
        assert ("m0", str(data_dir / CONTROL_FILE)) in scan([data_dir], needles)

        # Erase: the whole namespace through the CLI, one memory with a hard forget.
        started = time.monotonic()
        result = erase_with_the_cli(settings, gone)
        # The CLI returns once the erase is applied and its keys are destroyed (one transaction).
        timings["cli_erase_s"] = round(time.monotonic() - started, 2)
        assert sorted(result["memory_ids"]) == sorted(r.id for r in gone_records)  # type: ignore[arg-type]
        assert int(result["keys_destroyed"]) >= 5  # type: ignore[call-overload]
        outcome = await client.forget_and_report(
            partly, memory_ids=[forgotten.id], hard=True, reason="remove my passport"
        )
        assert outcome.memory_ids == [forgotten.id]
        erased_at = time.monotonic()  # both erases applied, all their keys destroyed

        # The views: nothing of it to recall, the rest intact.
        await client.wait_offset(gone, int(result["offset"]), timeout=60)  # type: ignore[call-overload]
        assert client.records(gone) == []
        assert [r.id for r in client.records(partly)] == [kept.id]
        assert not (await client.recall(gone, "locker code", reinforce=False)).memories
        # The client's key ring follows the data-key topic on its own consumer: the destructions
        # are committed (the CLI returned), the ring sees them once it has read that far.
        await wait_until(
            "the client's key ring sees every key destroyed",
            lambda: all(keys.state(k) == "destroyed" for k in destroyed_ids),
            60,
        )
        for value in sealed:
            with pytest.raises(DataKeyDestroyed):
                unseal(value, keys, "events")  # the sealed turns are still in the log: unreadable
        entries = await state_entries(settings, client)
        readable = [e.record for e in entries if isinstance(e, RecordEntry)]
        assert readable and all(r.namespace != gone and r.id != forgotten.id for r in readable)

        # Milvus: the sink purged the deleted rows out of its files; the kept memory is still
        # there (the same scan finds it).
        await wait_until(
            "erased rows leave the Milvus files", lambda: not scan([milvus_dir], needles), 180
        )
        timings["milvus_files_clean_after_s"] = round(time.monotonic() - erased_at, 2)
        # The purge may still be renaming its copy into place (the Milvus Lite server works
        # beside this test): the kept memory is back in the files once it is done.
        await wait_until(
            "the kept memory is in the Milvus files",
            lambda: bool(scan([milvus_dir], {"kept": markers["m5"].encode()})),
            60,
        )

        # The broker: compaction takes the wrapped keys out of the data-key segment files.
        wrapped = {k: v for k, v in needles.items() if ":wrapped" in k}
        await wait_until(
            "the destroyed keys leave the broker's files",
            lambda: not scan([broker_dir], wrapped),
            300,
        )
        timings["wrapped_keys_gone_after_s"] = round(time.monotonic() - erased_at, 2)

        # Every file of the broker and of the stack's data dir: only the control file matches.
        hits = scan([data_dir], needles)
        assert {path for _, path in hits} == {str(data_dir / CONTROL_FILE)}, hits[:10]

    # Replay: nothing readable of the erased namespace, the shredded events counted, the
    # erasures recorded as events.
    replayed = await run_replay(settings, tmp_path / "replay", progress=False)
    snapshot = [
        MemoryRecord.model_validate(orjson.loads(line))
        for line in Path(replayed["snapshot"]).read_bytes().splitlines()
        if line.strip()
    ]
    assert not [r for r in snapshot if r.namespace == gone or r.id == forgotten.id]
    assert [r.id for r in snapshot if r.namespace == partly] == [kept.id]
    assert replayed["shredded"] >= len(gone_texts) + 1
    erasures = [orjson.loads(line) for line in Path(replayed["erasures"]).read_bytes().splitlines()]
    assert {(e["namespace"], e["whole_namespace"]) for e in erasures} >= {
        (gone, True),
        (partly, False),
    }
    assert [e["memory_ids"] for e in erasures if e["namespace"] == partly] == [[forgotten.id]]
    hits = scan([data_dir, tmp_path / "replay"], needles)
    assert {path for _, path in hits} == {str(data_dir / CONTROL_FILE)}, hits[:10]
    print("\nerasure timings (preliminary, shared machine):", json.dumps(timings))
