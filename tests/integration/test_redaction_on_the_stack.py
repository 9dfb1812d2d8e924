"""Opt-in redaction on the real stack: a namespace's policy set over HTTP holds from its offset
on; recall shows typed placeholders, the views never hold the values, and ``inspect`` with an
admin key (only) puts them back from the original turn in the log."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from pipeline.interfaces.http import create_api
from pipeline.runtime.settings import Settings

pytestmark = pytest.mark.integration

EMAIL = "dana.lee@example.org"
PHONE = "+44 20 7946 0958"


@pytest.fixture(scope="module")
async def app_client(stack_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    app = create_api(stack_settings)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://hindsight.test", timeout=90
        ) as client,
    ):
        yield client


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def _retain(client: httpx.AsyncClient, namespace: str, key: str, text: str) -> int:
    response = await client.post(
        f"/v1/namespaces/{namespace}/turns",
        json={"text": text, "speaker": "dana", "session_id": "s1"},
        headers=_bearer(key),
    )
    assert response.status_code == 201, response.text
    offset: int = response.json()["offset"]
    return offset


async def test_a_policy_redacts_what_follows_it_and_an_admin_can_reveal(
    app_client: httpx.AsyncClient, admin_key: str, make_key: Callable[..., str], namespace: str
) -> None:
    before = await _retain(
        app_client, namespace, admin_key, "My old office phone was +44 20 7946 0000"
    )
    policy = await app_client.put(
        f"/v1/namespaces/{namespace}/policy",
        json={"redaction": {"enabled": True, "kinds": ["EMAIL", "PHONE"]}},
        headers=_bearer(admin_key),
    )
    assert policy.status_code == 200, policy.text
    assert policy.json()["offset"] > before
    last = await _retain(
        app_client, namespace, admin_key, f"Email me at {EMAIL} or call {PHONE} about the lease"
    )

    recalled = await app_client.post(
        f"/v1/namespaces/{namespace}/recall",
        json={"query": "how do I contact dana about the lease", "wait_for_offset": last},
        headers=_bearer(admin_key),
    )
    assert recalled.status_code == 200, recalled.text
    body = recalled.json()
    assert "[EMAIL_1]" in body["context"] and "[PHONE_1]" in body["context"]
    assert EMAIL not in recalled.text and "7946 0958" not in recalled.text
    earlier = await app_client.post(
        f"/v1/namespaces/{namespace}/recall",
        json={"query": "old office phone", "include_history": True, "wait_for_offset": last},
        headers=_bearer(admin_key),
    )
    assert "7946 0000" in earlier.text  # retained before the policy: left as it was

    stored = await app_client.get(f"/v1/namespaces/{namespace}/policy", headers=_bearer(admin_key))
    assert stored.status_code == 200
    assert stored.json()["redaction"]["kinds"] == ["EMAIL", "PHONE"]

    [redacted] = [m for m in body["memories"] if "[EMAIL_1]" in m["content"]]
    path = f"/v1/namespaces/{namespace}/memories/{redacted['id']}"
    plain = await app_client.get(path, headers=_bearer(admin_key))
    assert plain.status_code == 200 and EMAIL not in plain.text
    revealed = await app_client.get(path, params={"reveal": "true"}, headers=_bearer(admin_key))
    assert revealed.status_code == 200, revealed.text
    assert EMAIL in revealed.json()["content"] and PHONE in revealed.json()["content"]

    # Reveal and policies are admin actions: a recall key is refused without a hint.
    reader = make_key(f"{namespace}:recall")
    refused = await app_client.get(path, params={"reveal": "true"}, headers=_bearer(reader))
    assert refused.status_code == 403 and refused.json()["field"] == "authorization"
    assert EMAIL not in refused.text
    assert (await app_client.get(path, headers=_bearer(reader))).status_code == 200
    not_allowed = await app_client.put(
        f"/v1/namespaces/{namespace}/policy",
        json={"redaction": {"enabled": False}},
        headers=_bearer(reader),
    )
    assert not_allowed.status_code == 403


async def test_a_bad_policy_is_a_422_naming_the_field(
    app_client: httpx.AsyncClient, admin_key: str, namespace: str
) -> None:
    response = await app_client.put(
        f"/v1/namespaces/{namespace}/policy",
        json={"redaction": {"enabled": True, "kinds": ["NAME"]}},
        headers=_bearer(admin_key),
    )
    assert response.status_code == 422
    assert response.json()["field"].startswith("redaction.kinds")
