"""Operations on the real broker: the bounded log reader, health, readiness, metrics, dead letters.

The API runs in-process over ASGI with its own lifespan (client, log reader, change-feed hub).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from urllib.parse import parse_qs, urlparse

import httpx
import orjson
import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from pipeline.interfaces.client import Receipt
from pipeline.interfaces.dashboard.views import dead_letter_view
from pipeline.interfaces.http import create_api
from pipeline.runtime.settings import Settings
from pipeline.views.log_reader import LogReader
from pipeline.views.state_topic import make_producer, partition_for
from topics.admin import ensure_topics
from topics.catalogue import topic_names

pytestmark = pytest.mark.integration


async def _until(predicate, timeout: float = 60.0, what: str = "condition") -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.2)


@pytest.fixture(scope="module")
async def http(stack_settings: Settings, admin_key: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_api(stack_settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://hindsight.test",
            timeout=60,
            headers={"Authorization": f"Bearer {admin_key}"},
        ) as client:
            client.app = app  # type: ignore[attr-defined]
            yield client


async def _retain(http: httpx.AsyncClient, namespace: str, text: str) -> dict[str, object]:
    response = await http.post(
        f"/v1/namespaces/{namespace}/turns",
        json={"text": text, "speaker": "alice", "session_id": "s1"},
    )
    assert response.status_code == 201, response.text
    body: dict[str, object] = response.json()
    return body


# -- the log reader ----------------------------------------------------------------------------
async def test_log_reader_reads_exact_offsets_pages_and_group_lag(kafka_bootstrap: str) -> None:
    prefix = f"lr{uuid.uuid4().hex[:8]}."
    await ensure_topics(kafka_bootstrap, prefix, 1, 1)
    topic = topic_names(prefix)["dead_letters"]
    producer = make_producer(kafka_bootstrap, "test-log-reader")
    await producer.start()
    try:
        for n in range(30):
            await producer.send_and_wait(topic, key=b"k", value=f"m{n}".encode(), partition=0)
    finally:
        await producer.stop()
    reader = LogReader(kafka_bootstrap)
    await reader.start()
    try:
        assert await reader.ping() >= 1
        assert await reader.partitions(topic) == [0]
        assert await reader.partitions(f"{prefix}no-such-topic") == []
        exact = await reader.read_at(topic, 0, 17)
        assert exact is not None and exact.value == b"m17" and exact.key == b"k"
        assert await reader.read_at(topic, 0, 30) is None  # past the end
        tail, first, begin = await reader.read_tail(topic, 0, 10)
        assert [m.offset for m in tail] == list(range(20, 30)) and (first, begin) == (20, 0)
        older, first, _ = await reader.read_tail(topic, 0, 10, skip=25)
        assert [m.offset for m in older] == [0, 1, 2, 3, 4] and first == 0
        capped = await reader.read_range(TopicPartition(topic, 0), 0, 30, max_records=7)
        assert [m.offset for m in capped] == list(range(7))

        group = f"{prefix}group-consolidate"
        consumer = AIOKafkaConsumer(
            bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False
        )
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0)])
            await consumer.commit({TopicPartition(topic, 0): 12})
        finally:
            await consumer.stop()
        assert group in await reader.groups(f"{prefix}group")
        [lag] = await reader.group_lags([group])
        assert (lag.topic, lag.partition, lag.committed, lag.end, lag.lag) == (topic, 0, 12, 30, 18)
    finally:
        await reader.stop()


# -- health, readiness, metrics ----------------------------------------------------------------
async def test_healthz_readyz_and_metrics_mean_something(
    http: httpx.AsyncClient, namespace: str
) -> None:
    health = await http.get("/healthz")
    assert health.status_code == 200, health.text
    assert health.json()["status"] == "ok" and health.json()["brokers"] >= 1

    receipt = await _retain(http, namespace, "Our staging cluster runs Kubernetes 1.30.")
    recalled = await http.post(
        f"/v1/namespaces/{namespace}/recall",
        json={"query": "what runs staging?", "wait_for_offset": receipt["offset"]},
    )
    assert recalled.status_code == 200, recalled.text
    trace = recalled.json()["trace"]
    assert trace["route"] in {"episodic", "semantic", "procedural"} and trace["candidates"] >= 1
    assert "fused" in recalled.json()["memories"][0]

    ready = await http.get("/readyz")
    assert ready.status_code == 200, ready.text
    body = ready.json()
    assert body["ready"] is True and body["reasons"] == []
    events = topic_names(http.app.state.hindsight.settings.topic_prefix)["events"]  # type: ignore[attr-defined]
    assert f"{events}:{receipt['partition']}" in body["view_lag"]

    scraped = await http.get("/metrics")
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain")
    text = scraped.text
    route = recalled.json()["route"]
    assert f'hindsight_recall_seconds_count{{route="{route}"}}' in text
    assert f'hindsight_namespace_memories{{namespace="{namespace}"}}' in text
    assert "hindsight_view_following 1.0" in text
    assert "hindsight_ready 1.0" in text


async def test_a_failed_follower_turns_readiness_and_recall_red_with_the_cause(
    kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    settings = Settings(
        data_dir=tmp_path_factory.mktemp("failing"),
        bootstrap=kafka_bootstrap,
        topic_prefix=f"ff{uuid.uuid4().hex[:8]}.",
        app_id=f"hindsight-ff-{uuid.uuid4().hex[:6]}",
        partitions=1,
        auth=False,  # in-process, no listener: the local principal
    )
    await ensure_topics(kafka_bootstrap, settings.topic_prefix, 1, 1)
    app = create_api(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t", timeout=60) as http:
            assert (await http.get("/readyz")).status_code == 200
            # A record the follower cannot read: it stops, and says so.
            producer = make_producer(kafka_bootstrap, "test-poison")
            await producer.start()
            try:
                await producer.send_and_wait(
                    topic_names(settings.topic_prefix)["memory_state"],
                    key=b"m_poison",
                    value=b"{not json",
                    partition=0,
                )
            finally:
                await producer.stop()

            async def red() -> bool:
                return (await http.get("/readyz")).status_code == 503

            await _until(red, 30, "readiness to turn red")
            body = (await http.get("/readyz")).json()
            assert body["ready"] is False
            assert any("recall view stopped" in reason for reason in body["reasons"]), body
            recall = await http.post("/v1/namespaces/alice/recall", json={"query": "anything"})
            assert recall.status_code == 503, recall.text
            assert "state follower" in recall.json()["error"]
            assert "hindsight_view_following 0.0" in (await http.get("/metrics")).text


# -- the dashboard's reads and the dead-letter re-publish --------------------------------------
async def test_dashboard_pages_read_the_log_for_provenance_and_timeline(
    http: httpx.AsyncClient, namespace: str
) -> None:
    receipt = await _retain(http, namespace, "The release train leaves every Thursday at 16:00.")
    hs = http.app.state.hindsight  # type: ignore[attr-defined]
    await hs.wait_applied(
        Receipt(
            "", namespace, str(receipt["topic"]), int(receipt["partition"]), int(receipt["offset"])
        )  # type: ignore[call-overload]
    )
    [record] = hs.records(namespace)

    table = await http.get(f"/ui/ns/{namespace}")
    assert table.status_code == 200 and record.id in table.text
    assert "default-src 'self'" in table.headers["content-security-policy"]
    page = await http.get(f"/ui/ns/{namespace}/memories/{record.id}")
    assert page.status_code == 200
    position = f"{receipt['topic']}[{receipt['partition']}]@{receipt['offset']}"
    assert position in page.text  # provenance down to the turn's place in the log
    assert "Thursday at 16:00" in page.text and 'id="activation-plot"' in page.text
    assert "created" in page.text  # its change-feed entry
    timeline = await http.get(f"/ui/ns/{namespace}/timeline")
    assert "The release train leaves" in timeline.text and record.id in timeline.text
    playground = await http.get(
        f"/ui/ns/{namespace}/recall", params={"q": "when does the release train leave?"}
    )
    assert playground.status_code == 200 and 'class="paths explanation"' in playground.text
    assert f"(mem:{record.id[:8]})" in playground.text
    assert (await http.get("/ui")).status_code == 200
    missing = await http.get(f"/ui/ns/{namespace}/memories/m_nope")
    assert missing.status_code == 404


async def test_a_fixed_dead_letter_is_republished_into_the_input_log(
    http: httpx.AsyncClient, namespace: str, stack_settings: Settings
) -> None:
    names = topic_names(stack_settings.topic_prefix)
    bad = {
        "event_type": "TurnRecorded",
        "schema_version": 2,
        "event_id": f"turn-{uuid.uuid4().hex}",
        "namespace": namespace,
        "session_id": "s1",
        "speaker": "alice",
        "text": "   ",
        "event_time": "2024-05-01T10:00:00+00:00",
    }
    producer = make_producer(stack_settings.bootstrap or "", "test-dead-letter")
    await producer.start()
    try:
        await producer.send_and_wait(
            names["events"], key=namespace.encode(), value=orjson.dumps(bad)
        )
    finally:
        await producer.stop()
    reader: LogReader = http.app.state.reader  # type: ignore[attr-defined]
    found: dict[str, int] = {}

    async def dead_lettered() -> bool:
        for partition in await reader.partitions(names["dead_letters"]):
            tail, _, _ = await reader.read_tail(names["dead_letters"], partition, 50)
            for letter in filter(None, map(dead_letter_view, tail)):
                if bad["event_id"].encode() in letter.original:
                    found.update(partition=letter.partition, offset=letter.offset)
                    return True
        return False

    await _until(dead_lettered, 60, "the dead letter")
    ops = await http.get("/ui/ops")
    assert ops.status_code == 200 and f'id="dl-{found["partition"]}-{found["offset"]}"' in ops.text

    still_bad = await http.post(
        "/ui/ops/dead-letters/republish",
        data={**{k: str(v) for k, v in found.items()}, "value": orjson.dumps(bad).decode()},
    )
    assert still_bad.status_code == 422 and "text" in still_bad.text  # names the field

    fixed = {**bad, "text": "Deploys need a green canary for 30 minutes first."}
    done = await http.post(
        "/ui/ops/dead-letters/republish",
        data={**{k: str(v) for k, v in found.items()}, "value": orjson.dumps(fixed).decode()},
    )
    assert done.status_code == 303, done.text
    topic, partition, offset = parse_qs(urlparse(done.headers["location"]).query)["republished"][
        0
    ].rsplit(":", 2)
    assert topic == names["events"]
    assert int(partition) == partition_for(namespace, stack_settings.partitions)
    hs = http.app.state.hindsight  # type: ignore[attr-defined]
    await hs.wait_applied(Receipt(fixed["event_id"], namespace, topic, int(partition), int(offset)))
    assert any("green canary" in r.content for r in hs.records(namespace))
    republished = await reader.read_at(topic, int(partition), int(offset))
    assert republished is not None
    assert (
        dict(republished.headers)["hindsight-republished-from"]
        .decode()
        .startswith(names["dead_letters"])
    )
