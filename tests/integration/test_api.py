"""HTTP API against the real stack: httpx over ASGI, with the app's own lifespan (one client)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from pipeline.interfaces.http import create_api
from pipeline.runtime.settings import Settings

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def http(stack_settings: Settings, admin_key: str) -> AsyncIterator[httpx.AsyncClient]:
    app = create_api(stack_settings)
    # ASGITransport does not run lifespans; enter it here so the app connects its client.
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport,
            base_url="http://hindsight.test",
            timeout=60,
            headers={"Authorization": f"Bearer {admin_key}"},
        ) as client:
            yield client


async def _retain(http: httpx.AsyncClient, namespace: str, text: str) -> dict[str, object]:
    response = await http.post(
        f"/v1/namespaces/{namespace}/turns",
        json={"text": text, "speaker": "alice", "session_id": "s1"},
    )
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


async def test_retain_then_recall_reads_its_write(http: httpx.AsyncClient, namespace: str) -> None:
    receipt = await _retain(http, namespace, "We use PostgreSQL 16 as our main database.")
    assert receipt["namespace"] == namespace and isinstance(receipt["offset"], int)

    response = await http.post(
        f"/v1/namespaces/{namespace}/recall",
        json={"query": "Which database do we use?", "wait_for_offset": receipt["offset"]},
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["route"] in {"episodic", "semantic", "procedural"}
    assert any("PostgreSQL" in m["content"] for m in body["memories"]), body
    assert "PostgreSQL" in body["context"]

    memory_id = body["memories"][0]["id"]
    inspected = await http.get(f"/v1/namespaces/{namespace}/memories/{memory_id}")
    assert inspected.status_code == 200, inspected.text
    record = inspected.json()
    assert record["provenance"][0]["event_id"] == receipt["event_id"]
    assert record["history"][0]["change"] == "created"
    assert "vector" not in record

    stats = await http.get(f"/v1/namespaces/{namespace}/stats")
    assert stats.status_code == 200 and stats.json()["memories"] >= 1


async def test_forget_makes_a_memory_unrecallable(http: httpx.AsyncClient, namespace: str) -> None:
    receipt = await _retain(http, namespace, "My favourite editor is Helix.")
    recalled = await http.post(
        f"/v1/namespaces/{namespace}/recall",
        json={"query": "favourite editor", "wait_for_offset": receipt["offset"]},
    )
    ids = [m["id"] for m in recalled.json()["memories"]]
    assert ids, recalled.text

    forgotten = await http.post(f"/v1/namespaces/{namespace}/forget", json={"ids": ids})
    assert forgotten.status_code == 200, forgotten.text
    assert forgotten.json()["applied"] is True and forgotten.json()["memory_ids"] == ids

    after = await http.post(
        f"/v1/namespaces/{namespace}/recall", json={"query": "favourite editor"}
    )
    assert after.status_code == 200
    assert not [m for m in after.json()["memories"] if m["id"] in ids]
    # Soft forget keeps the record for audit, with its status.
    inspected = await http.get(f"/v1/namespaces/{namespace}/memories/{ids[0]}")
    assert inspected.json()["status"] == "forgotten"


@pytest.mark.parametrize(
    ("path", "payload", "field"),
    [
        ("/v1/namespaces/{ns}/turns", {"speaker": "a", "session_id": "s"}, "text"),
        ("/v1/namespaces/{ns}/turns", {"text": " ", "speaker": "a", "session_id": "s"}, "text"),
        (
            "/v1/namespaces/{ns}/turns",
            {"text": "hi", "speaker": "a", "session_id": "s", "event_time": "yesterday"},
            "event_time",
        ),
        (
            "/v1/namespaces/{ns}/turns",
            {"text": "hi", "speaker": "a", "session_id": "s", "event_time": "2024-05-01T10:00"},
            "event_time",
        ),
        ("/v1/namespaces/bad!ns/turns", {"text": "hi", "speaker": "a", "session_id": "s"}, None),
        ("/v1/namespaces/bad!ns/recall", {"query": "x"}, None),
        ("/v1/namespaces/{ns}/recall", {"query": "x", "regions": ["nowhere"]}, "regions.0"),
        ("/v1/namespaces/{ns}/forget", {}, "ids"),
    ],
)
async def test_invalid_input_is_422_naming_the_field(
    http: httpx.AsyncClient,
    namespace: str,
    path: str,
    payload: dict[str, object],
    field: str | None,
) -> None:
    response = await http.post(path.format(ns=namespace), json=payload)
    assert response.status_code == 422, response.text
    body = response.json()
    expected = field or "namespace"
    assert body["field"] == expected, body
    assert body["error"].startswith(f"{expected}:"), body


async def test_unknown_memory_is_404(http: httpx.AsyncClient, namespace: str) -> None:
    response = await http.get(f"/v1/namespaces/{namespace}/memories/nope123")
    assert response.status_code == 404
    body = response.json()
    assert body["field"] == "memory_id" and "nope123" in body["error"]


async def test_waiting_for_an_offset_the_log_does_not_hold_is_a_422(
    http: httpx.AsyncClient, namespace: str
) -> None:
    """Not a server timeout: the caller named an offset past the end of the input partition."""
    response = await http.post(
        f"/v1/namespaces/{namespace}/recall",
        json={"query": "anything", "wait_for_offset": 10**12, "wait_timeout": 30},
    )
    assert response.status_code == 422
    assert response.json()["field"] == "wait_for_offset"
    assert "past the end" in response.json()["error"]


async def test_openapi_and_health(http: httpx.AsyncClient) -> None:
    schema = (await http.get("/openapi.json")).json()
    paths = schema["paths"]
    assert "/v1/namespaces/{namespace}/turns" in paths
    assert "/v1/namespaces/{namespace}/memories/{memory_id}" in paths
    retain_422 = paths["/v1/namespaces/{namespace}/turns"]["post"]["responses"]["422"]
    assert retain_422["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")
    assert (await http.get("/docs")).status_code == 200
    health = await http.get("/healthz")
    assert health.status_code == 200 and health.json()["status"] == "ok"
