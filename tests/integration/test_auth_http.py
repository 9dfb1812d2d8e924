"""API keys over HTTP on the real stack: 401, 403 without the namespace, 200, and revocation
seen by a second API process through the keys topic."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import httpx
import pytest

from pipeline.interfaces.http import create_api
from pipeline.runtime.settings import Settings

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CHILD_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


@pytest.fixture(scope="module")
async def app_client(stack_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_api(stack_settings)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://hindsight.test", timeout=60
        ) as client,
    ):
        yield client


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


TURN = {"text": "Our staging database is on port 5433.", "speaker": "a", "session_id": "s"}


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer "},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "Bearer not-a-key"},
        {"Authorization": "Bearer hs_000000000000_" + "a" * 43},  # well-formed, unknown
    ],
)
async def test_no_valid_key_is_401_with_a_bearer_challenge(
    app_client: httpx.AsyncClient, namespace: str, headers: dict[str, str]
) -> None:
    for method, path, body in (
        ("POST", f"/v1/namespaces/{namespace}/turns", TURN),
        ("POST", f"/v1/namespaces/{namespace}/recall", {"query": "database"}),
        ("POST", f"/v1/namespaces/{namespace}/forget", {"all": True}),
        ("GET", f"/v1/namespaces/{namespace}/memories/mem-1", None),
        ("GET", f"/v1/namespaces/{namespace}/stats", None),
    ):
        response = await app_client.request(method, path, json=body, headers=headers)
        assert response.status_code == 401, (path, response.text)
        assert response.headers["www-authenticate"].startswith("Bearer")
        payload = response.json()
        assert payload["field"] == "authorization"
        assert namespace not in response.text


async def test_a_wrong_secret_for_a_real_key_id_is_401(
    app_client: httpx.AsyncClient, make_key: Callable[..., str], namespace: str
) -> None:
    key = make_key(f"{namespace}:recall")
    forged = key[: -len("x" * 43)] + ("B" * 43)
    response = await app_client.post(
        f"/v1/namespaces/{namespace}/recall", json={"query": "x"}, headers=_bearer(forged)
    )
    assert response.status_code == 401


async def test_scopes_decide_per_namespace_and_action(
    app_client: httpx.AsyncClient, make_key: Callable[..., str]
) -> None:
    team = f"team{os.urandom(4).hex()}"
    mine, theirs = f"{team}:alice", f"other{os.urandom(4).hex()}:carol"
    key = make_key(f"{team}:*:retain,recall")

    retained = await app_client.post(
        f"/v1/namespaces/{mine}/turns", json=TURN, headers=_bearer(key)
    )
    assert retained.status_code == 201, retained.text
    recalled = await app_client.post(
        f"/v1/namespaces/{mine}/recall",
        json={"query": "staging database port", "wait_for_offset": retained.json()["offset"]},
        headers=_bearer(key),
    )
    assert recalled.status_code == 200 and "5433" in recalled.json()["context"]

    # Outside its namespaces, or an action it was not given: 403, and the body names neither
    # the namespace asked for nor whether it exists.
    for method, path, body in (
        ("POST", f"/v1/namespaces/{theirs}/recall", {"query": "anything"}),
        ("POST", f"/v1/namespaces/{theirs}/turns", TURN),
        ("GET", f"/v1/namespaces/{theirs}/stats", None),
        ("POST", f"/v1/namespaces/{mine}/forget", {"all": True}),
        ("POST", f"/v1/namespaces/{mine}/forget", {"all": True, "hard": True}),
    ):
        response = await app_client.request(method, path, json=body, headers=_bearer(key))
        assert response.status_code == 403, (path, response.text)
        assert response.json()["field"] == "authorization"
        assert "carol" not in response.text and team not in response.text
        assert "other" not in response.text.replace("not allowed", "")


async def test_validation_still_names_the_field_with_a_valid_key(
    app_client: httpx.AsyncClient, admin_key: str, namespace: str
) -> None:
    response = await app_client.post(
        f"/v1/namespaces/{namespace}/turns",
        json={"speaker": "a", "session_id": "s"},
        headers=_bearer(admin_key),
    )
    assert response.status_code == 422 and response.json()["field"] == "text"
    bad_ns = await app_client.post(
        "/v1/namespaces/bad!ns/recall", json={"query": "x"}, headers=_bearer(admin_key)
    )
    assert bad_ns.status_code == 422 and bad_ns.json()["field"] == "namespace"


async def test_openapi_declares_the_bearer_scheme_and_health_hides_details(
    app_client: httpx.AsyncClient, admin_key: str, make_key: Callable[..., str]
) -> None:
    schema = (await app_client.get("/openapi.json")).json()
    assert schema["components"]["securitySchemes"]["ApiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "bearerFormat": "hs_<key_id>_<secret>",
        "description": schema["components"]["securitySchemes"]["ApiKey"]["description"],
    }
    recall = schema["paths"]["/v1/namespaces/{namespace}/recall"]["post"]
    assert recall["security"] == [{"ApiKey": []}]
    assert {"401", "403", "422"} <= set(recall["responses"])

    open_health = (await app_client.get("/healthz")).json()
    assert open_health["status"] == "ok" and open_health["bootstrap"] is None
    reader = make_key("*:recall")
    assert (await app_client.get("/healthz", headers=_bearer(reader))).json()["bootstrap"] is None
    admin = (await app_client.get("/healthz", headers=_bearer(admin_key))).json()
    assert admin["bootstrap"] and admin["topic_prefix"] is not None


def _cli(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    common = ["--bootstrap", settings.bootstrap or "", "--topic-prefix", settings.topic_prefix]
    return subprocess.run(
        [sys.executable, "-m", "pipeline.interfaces.cli", *args, *common],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, **CHILD_ENV}, timeout=120,
    )  # fmt: skip


async def test_cli_keys_and_revocation_reach_a_second_api_process(
    stack_settings: Settings, app_client: httpx.AsyncClient, namespace: str
) -> None:
    created = _cli(stack_settings, "keys", "create", "--scope", f"{namespace}:recall",
                   "--name", "revocation test")  # fmt: skip
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    key_id = key.split("_")[1]
    assert key.startswith("hs_") and "only time" in created.stderr

    listed = _cli(stack_settings, "keys", "list", "--json")
    rows = {row["key_id"]: row for row in __import__("json").loads(listed.stdout)}
    assert rows[key_id]["status"] == "active" and rows[key_id]["scopes"] == [f"{namespace}:recall"]
    assert key.split("_", 2)[2] not in listed.stdout  # the secret is never listed
    bad = _cli(stack_settings, "keys", "create", "--scope", "team-*-x:recall")
    assert bad.returncode == 2 and "only allowed at the end" in bad.stderr

    # A second API process on its own key ring.
    server = subprocess.Popen(
        [sys.executable, "-m", "pipeline.interfaces.cli", "api", "--port", "0",
         "--bootstrap", stack_settings.bootstrap or "", "--topic-prefix",
         stack_settings.topic_prefix, "--partitions", str(stack_settings.partitions)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
        env={**os.environ, **CHILD_ENV},
    )  # fmt: skip
    try:
        assert server.stdout is not None
        loop = asyncio.get_running_loop()
        url = None
        lines: list[str] = []
        while url is None:
            line = await asyncio.wait_for(loop.run_in_executor(None, server.stdout.readline), 180)
            assert line, "API exited:\n" + "".join(lines)
            lines.append(line)
            if line.startswith("Hindsight API on "):
                url = line.split(" on ", 1)[1].split(" ", 1)[0]
        async with httpx.AsyncClient(base_url=url, timeout=60, headers=_bearer(key)) as second:
            path = f"/v1/namespaces/{namespace}/recall"
            body = {"query": "anything", "reinforce": False}
            assert (await second.post(path, json=body)).status_code == 200
            assert (await app_client.post(path, json=body, headers=_bearer(key))).status_code == 200

            revoked = _cli(stack_settings, "keys", "revoke", key_id, "--reason", "test")
            assert revoked.returncode == 0, revoked.stderr
            deadline = time.monotonic() + 30
            statuses: list[int] = []
            while time.monotonic() < deadline:
                statuses = [
                    (await second.post(path, json=body)).status_code,
                    (await app_client.post(path, json=body, headers=_bearer(key))).status_code,
                ]
                if statuses == [401, 401]:
                    break
                await asyncio.sleep(0.2)
            assert statuses == [401, 401]
    finally:
        server.terminate()
        server.wait(30)
    relisted = _cli(stack_settings, "keys", "list", "--json")
    rows = {row["key_id"]: row for row in __import__("json").loads(relisted.stdout)}
    assert rows[key_id]["status"] == "revoked"
