"""The optional LLM extractor end to end, against a fake OpenAI-compatible server on loopback.

Answers are recorded as ``ExtractionRecorded`` events before use (I2): the live worker applies
them, replay rebuilds the same memories from the records without calling the server, a malformed
answer falls back to the rules and is recorded as such, and ``re_extract`` is the one mode that
calls again (recording a new revision that later replays use).
"""

from __future__ import annotations

import asyncio
import socket
import threading
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
import uvicorn
from aiokafka import AIOKafkaConsumer, TopicPartition
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from pipeline.crypto.envelope import sealed_envelope, unseal
from pipeline.crypto.keystore import open_key_store
from pipeline.ingest.prepare import rules_analysis
from pipeline.ingest.replay import run_replay
from pipeline.interfaces.client import Hindsight
from pipeline.memory.rules.llm_extraction import build_messages
from pipeline.models.encoders import Encoder, load_encoder
from pipeline.models.llm import ExtractorUnavailable, OpenAICompatibleExtractor, extract_turn
from pipeline.runtime.settings import Settings
from pipeline.runtime.stack import WorkerProcess, wait_worker_ready
from schemas.codec import decode_event
from schemas.events import ExtractionRecorded, TurnRecorded
from schemas.memory import MemoryRecord
from topics.admin import ensure_topics
from topics.catalogue import topic_names

pytestmark = pytest.mark.integration

T0 = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
MOUNTAINS = "I love hiking in the mountains every summer."
REPORT = "The quarterly report is due on Friday."
THANKS = "thanks!"
BROKEN = "BROKEN answer for this one: we use MySQL for the billing database."
PONDER = "Let me think about that for a second, it is a lot to take in."
MARKER = "Turn to extract from:\n"


@dataclass
class FakeLLM:
    """Canned chat completions keyed on the turn text, counting every call."""

    mountains_importance: float = 0.77
    reject_json_mode: bool = False
    fail_with: int | None = None
    calls: list[str] = field(default_factory=list)
    bodies: list[dict[str, Any]] = field(default_factory=list)

    def answer(self, text: str) -> str:
        if text.startswith("BROKEN"):
            return "Sure! {not really json"
        if "think about that" in text:
            payload: dict[str, Any] = {
                "remember": False,
                "kind": "chit_chat",
                "importance": 0.1,
                "triplet": None,
                "entities": [],
            }
        elif "mountains" in text:
            payload = {
                "remember": True,
                "kind": "preference",
                "importance": self.mountains_importance,
                "triplet": {
                    "subject": "I",
                    "attribute": "favourite landscape",
                    "value": "mountains",
                },
                "entities": ["Alps"],
                "content": None,
            }
        else:
            payload = {
                "remember": True,
                "kind": "fact",
                "importance": 0.33,
                "triplet": None,
                "entities": ["llm-entity"],
            }
        return orjson.dumps(payload).decode()

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.post("/v1/chat/completions")
        async def complete(request: Request) -> JSONResponse:
            body = await request.json()
            self.bodies.append(body)
            if self.reject_json_mode and "response_format" in body:
                return JSONResponse({"error": "response_format is not supported"}, 400)
            if self.fail_with is not None:
                return JSONResponse({"error": "boom"}, self.fail_with)
            text = body["messages"][-1]["content"].split(MARKER, 1)[1]
            self.calls.append(text)
            message = {"role": "assistant", "content": self.answer(text)}
            return JSONResponse({"choices": [{"index": 0, "message": message}]})

        return app


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[tuple[FakeLLM, str]]:
    fake = FakeLLM()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(fake.app(), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(100):
        if server.started:
            break
        threading.Event().wait(0.05)
    try:
        yield fake, f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture(scope="module")
def encoder() -> Encoder:
    return load_encoder("minilm")


@pytest.fixture(scope="module")
def own_settings(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("llm-live"),
        bootstrap=kafka_bootstrap,
        topic_prefix=f"x{uuid.uuid4().hex[:8]}.",
        app_id=f"hindsight-llm-{uuid.uuid4().hex[:6]}",
        partitions=2,
    )
    asyncio.run(ensure_topics(kafka_bootstrap, settings.topic_prefix, settings.partitions, 1))
    return settings


@pytest.fixture
async def connected(own_settings: Settings, encoder: Encoder) -> AsyncIterator[Hindsight]:
    async with Hindsight.connect(own_settings, encoder=encoder) as client:
        yield client


async def read_extractions(settings: Settings) -> list[ExtractionRecorded]:
    """The extractions topic as recorded: each one sealed with its turn's data key."""
    topic = topic_names(settings.topic_prefix)["extractions"]
    keys = await open_key_store(settings)
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, group_id=None)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(settings.partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        ends = await consumer.end_offsets(tps)
        events: list[ExtractionRecorded] = []
        for tp in tps:
            while await consumer.position(tp) < ends[tp]:
                for message in (await consumer.getmany(tp, timeout_ms=500)).get(tp, []):
                    assert sealed_envelope(message.value) is not None  # never in plain text
                    ring = None if keys is None else keys.ring
                    opened = unseal(message.value, ring, "extractions").content
                    event = decode_event(opened)
                    assert isinstance(event, ExtractionRecorded)
                    events.append(event)
        return events
    finally:
        await consumer.stop()
        if keys is not None:
            await keys.stop()


def snapshot(path: str) -> list[MemoryRecord]:
    return [
        MemoryRecord.model_validate(orjson.loads(line))
        for line in Path(path).read_bytes().splitlines()
        if line.strip()
    ]


def comparable(records: list[MemoryRecord]) -> list[tuple[Any, ...]]:
    return sorted(
        (r.id, r.status, r.kind, r.region, r.content, round(r.importance, 6), r.triplet, r.entities)
        for r in records
    )


def by_text(records: list[MemoryRecord]) -> dict[str, MemoryRecord]:
    return {r.content: r for r in records}


# -- the client on its own ----------------------------------------------------------------------


def a_turn(text: str) -> TurnRecorded:
    return TurnRecorded(
        event_id="t-1", namespace="acme", event_time=T0, session_id="s", speaker="alice", text=text
    )


async def test_the_client_falls_back_to_plain_mode_when_json_mode_is_refused(
    fake_llm: tuple[FakeLLM, str],
) -> None:
    fake, url = fake_llm
    extractor = OpenAICompatibleExtractor(url, "fake-model", api_key="secret")
    fake.reject_json_mode = True
    try:
        answer = await extractor.complete(build_messages(a_turn(MOUNTAINS)))
    finally:
        fake.reject_json_mode = False
        fake.calls.remove(MOUNTAINS)
        await extractor.aclose()

    assert '"preference"' in answer
    assert "response_format" in fake.bodies[-2]
    assert "response_format" not in fake.bodies[-1]
    assert fake.bodies[-1]["temperature"] == 0


async def test_a_failing_endpoint_is_retried_then_recorded_as_a_fallback(
    fake_llm: tuple[FakeLLM, str],
) -> None:
    fake, url = fake_llm
    extractor = OpenAICompatibleExtractor(url, "fake-model", retries=1, backoff_s=0.01)
    before = len(fake.bodies)
    fake.fail_with = 503
    try:
        with pytest.raises(ExtractorUnavailable, match="HTTP 503"):
            await extractor.complete(build_messages(a_turn(REPORT)))
        record = await extract_turn(extractor, a_turn(REPORT), rules_analysis(a_turn(REPORT)))
    finally:
        fake.fail_with = None
        await extractor.aclose()

    assert len(fake.bodies) - before == 4  # two attempts per call
    assert record.source == "rules_fallback"
    assert record.error is not None and "HTTP 503" in record.error
    assert record.extraction.kind == rules_analysis(a_turn(REPORT)).kind


# -- worker, log and replay ---------------------------------------------------------------------


async def test_llm_extractions_are_recorded_used_and_replayed_without_calling_again(
    own_settings: Settings,
    connected: Hindsight,
    fake_llm: tuple[FakeLLM, str],
    encoder: Encoder,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake, url = fake_llm
    namespace = f"llm-{uuid.uuid4().hex[:6]}"
    monkeypatch.setenv("HINDSIGHT_LLM_BASE_URL", url)
    monkeypatch.setenv("HINDSIGHT_LLM_MODEL", "fake-model")
    worker = WorkerProcess(own_settings, log_name="worker-llm.log")
    worker.start()  # the subprocess inherits the HINDSIGHT_LLM_* variables
    texts = [MOUNTAINS, REPORT, THANKS, BROKEN, PONDER]
    calls_before = len(fake.calls)
    try:
        await wait_worker_ready(own_settings, worker)
        receipts = await connected.retain_many(
            [
                {
                    "namespace": namespace,
                    "text": text,
                    "speaker": "alice",
                    "session_id": "s1",
                    "event_time": T0 + timedelta(minutes=n),
                    "event_id": f"{namespace}-turn-{n}",
                }
                for n, text in enumerate(texts)
            ]
        )
        for receipt in receipts:
            await connected.wait_applied(receipt, timeout=180)
        live = connected.records(namespace)
    finally:
        worker.stop()

    # The rules still screen "thanks!"; every other turn was asked about exactly once.
    assert sorted(fake.calls[calls_before:]) == sorted([MOUNTAINS, REPORT, BROKEN, PONDER])
    memories = by_text(live)
    assert set(memories) == {MOUNTAINS, REPORT, BROKEN}, "the LLM said not to remember PONDER"
    mountains = memories[MOUNTAINS]
    assert (mountains.kind, mountains.base_importance) == ("preference", 0.77)
    assert mountains.triplet is not None
    assert (mountains.triplet.subject, mountains.triplet.attribute) == (
        "alice",
        "favourite landscape",
    )
    assert mountains.entities == ["Alps"]
    assert (memories[REPORT].kind, memories[REPORT].base_importance) == ("fact", 0.33)
    rules = rules_analysis(a_turn(BROKEN))
    assert memories[BROKEN].kind == rules.kind
    assert memories[BROKEN].triplet == rules.triplet

    recorded = {
        e.turn_event_id: e for e in await read_extractions(own_settings) if e.namespace == namespace
    }
    assert set(recorded) == {f"{namespace}-turn-{n}" for n in (0, 1, 3, 4)}
    assert all(e.revision == 0 and e.extractor.model == "fake-model" for e in recorded.values())
    assert recorded[f"{namespace}-turn-0"].event_time == T0
    broken = recorded[f"{namespace}-turn-3"]
    assert broken.source == "rules_fallback"
    assert broken.error is not None and "malformed JSON" in broken.error
    assert recorded[f"{namespace}-turn-4"].extraction.remember is False

    # Replay reads the prepared events (the records are in them): no model, no call.
    calls_live = len(fake.calls)
    rebuilt = await run_replay(
        own_settings,
        tmp_path / "rebuild",
        target_prefix=f"rb{uuid.uuid4().hex[:6]}.",
        progress=False,
    )
    replayed = [r for r in snapshot(rebuilt["snapshot"]) if r.namespace == namespace]
    assert comparable(replayed) == comparable(live)
    assert len(fake.calls) == calls_live

    # A reindex re-runs prepare over the input log: it reuses the recorded answers.
    reindexed = await run_replay(
        own_settings,
        tmp_path / "reindex",
        reindex_with=encoder,
        target_prefix=f"ri{uuid.uuid4().hex[:6]}.",
        progress=False,
    )
    assert comparable(
        [r for r in snapshot(reindexed["snapshot"]) if r.namespace == namespace]
    ) == comparable(live)
    assert len(fake.calls) == calls_live
    assert reindexed["reindex"]["counts"].get("llm_calls", 0) == 0

    # The explicit reprocess mode calls again, records a new revision, prepares into a topic of
    # its own and uses the new answers...
    fake.mountains_importance = 0.66
    llm = replace(own_settings, llm_base_url=url, llm_model="fake-model-2")
    reextracted = await run_replay(
        llm,
        tmp_path / "re-extract",
        reindex_with=encoder,
        target_prefix=f"rx{uuid.uuid4().hex[:6]}.",
        progress=False,
        re_extract=True,
    )
    assert sorted(fake.calls[calls_live:]) == sorted([MOUNTAINS, REPORT, BROKEN, PONDER])
    assert reextracted["prepared_topic"] != reindexed["prepared_topic"]
    redone = by_text([r for r in snapshot(reextracted["snapshot"]) if r.namespace == namespace])
    assert redone[MOUNTAINS].base_importance == 0.66
    revised = [
        e
        for e in await read_extractions(own_settings)
        if e.namespace == namespace and e.revision == 1
    ]
    assert len(revised) == 4
    assert {e.extractor.model for e in revised} == {"fake-model-2"}

    # ...and a fresh reindex afterwards finds the newest revision, still without calling.
    calls_after = len(fake.calls)
    again = await run_replay(
        own_settings,
        tmp_path / "again",
        reindex_with=encoder,
        target_prefix=f"ra{uuid.uuid4().hex[:6]}.",
        progress=False,
    )
    assert again["prepared_topic"] == reextracted["prepared_topic"], "the newest revision's topic"
    final = [r for r in snapshot(again["snapshot"]) if r.namespace == namespace]
    assert comparable(final) == comparable(
        [r for r in snapshot(reextracted["snapshot"]) if r.namespace == namespace]
    )
    assert len(fake.calls) == calls_after
