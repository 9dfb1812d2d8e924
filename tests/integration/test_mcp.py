"""MCP server via the SDK's own client: stdio (spawned ``hindsight mcp``) and streamable HTTP."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from pipeline.runtime.settings import Settings

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
TOOLS = {"retain_memory", "recall_memories", "forget_memories", "inspect_memory", "memory_stats"}
CHILD_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def _mcp_args(settings: Settings, *extra: str) -> list[str]:
    return [
        "-m",
        "pipeline.interfaces.cli",
        "mcp",
        "--bootstrap",
        settings.bootstrap or "",
        "--topic-prefix",
        settings.topic_prefix,
        "--partitions",
        str(settings.partitions),
        *extra,
    ]


async def _call(client: Client, tool: str, arguments: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, arguments, read_timeout_seconds=120)
    assert not result.is_error, result.content
    return result.structured_content


async def _store_retrieve_forget(client: Client, namespace: str) -> None:
    listed = await client.list_tools()
    assert {tool.name for tool in listed.tools} >= TOOLS
    retain = next(tool for tool in listed.tools if tool.name == "retain_memory")
    assert retain.description and "namespace" in retain.input_schema["required"]

    stored = await _call(
        client,
        "retain_memory",
        {"namespace": namespace, "text": "I prefer dark roast coffee, no sugar.", "speaker": "bo"},
    )
    assert stored["applied"] is True and stored["offset"] >= 0

    found = await _call(
        client, "recall_memories", {"namespace": namespace, "query": "How do I like my coffee?"}
    )
    hits = [m for m in found["memories"] if "dark roast" in m["content"]]
    assert hits, found
    memory_id = hits[0]["id"]
    assert memory_id[:8] in found["context"]

    inspected = await _call(
        client, "inspect_memory", {"namespace": namespace, "memory_id": memory_id}
    )
    assert inspected["provenance"][0]["event_id"] == stored["event_id"]
    stats = await _call(client, "memory_stats", {"namespace": namespace})
    assert stats["memories"] >= 1

    forgotten = await _call(
        client, "forget_memories", {"namespace": namespace, "memory_ids": [memory_id]}
    )
    assert forgotten["memory_ids"] == [memory_id] and forgotten["applied"] is True
    again = await _call(
        client, "recall_memories", {"namespace": namespace, "query": "How do I like my coffee?"}
    )
    assert memory_id not in {m["id"] for m in again["memories"]}

    # A mistake comes back as a tool error naming the field, not a crash.
    bad = await client.call_tool(
        "inspect_memory", {"namespace": namespace, "memory_id": "nope"}, read_timeout_seconds=60
    )
    assert bad.is_error and "memory_id" in str(bad.content)


async def test_mcp_over_stdio(stack_settings: Settings, namespace: str, make_key: Any) -> None:
    # stdio runs with the key it is started with; its scopes decide every tool call.
    key = make_key(f"{namespace}:retain,recall,forget")
    params = StdioServerParameters(
        command=sys.executable,
        args=_mcp_args(stack_settings, "--api-key", key),
        env=CHILD_ENV,
        cwd=ROOT,
    )
    async with Client(params, read_timeout_seconds=120) as client:
        await _store_retrieve_forget(client, namespace)
        other = f"{namespace}-other"
        refused = await client.call_tool(
            "recall_memories", {"namespace": other, "query": "x"}, read_timeout_seconds=60
        )
        assert refused.is_error and "not allowed to recall" in str(refused.content)
        assert other not in str(refused.content)


def test_stdio_mcp_refuses_to_start_without_a_key(stack_settings: Settings) -> None:
    result = subprocess.run(
        [sys.executable, *_mcp_args(stack_settings)],
        capture_output=True, text=True, cwd=ROOT, env={**os.environ, **CHILD_ENV},
        stdin=subprocess.DEVNULL, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2 and "api_key" in result.stderr


@contextlib.asynccontextmanager
async def _http_server(settings: Settings) -> AsyncIterator[str]:
    """``hindsight mcp --transport http --port 0``; yields the URL it prints once listening."""
    process = subprocess.Popen(
        [sys.executable, *_mcp_args(settings, "--transport", "http", "--port", "0")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=ROOT,
        env={**os.environ, **CHILD_ENV},
        text=True,
    )
    try:
        assert process.stdout is not None
        loop = asyncio.get_running_loop()
        lines: list[str] = []
        url = None
        while url is None:
            line = await asyncio.wait_for(loop.run_in_executor(None, process.stdout.readline), 120)
            if not line:
                raise AssertionError("MCP server exited:\n" + "".join(lines))
            lines.append(line)
            if "streamable HTTP) on " in line:
                url = line.rsplit(" on ", 1)[1].strip()
        assert url.startswith("http://127.0.0.1:")
        yield url
    finally:
        process.terminate()
        assert process.wait(30) == 0


def _with_bearer(url: str, key: str | None) -> Any:
    headers = {"Authorization": f"Bearer {key}"} if key else None
    return streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))


async def test_mcp_over_streamable_http(
    stack_settings: Settings, namespace: str, make_key: Any
) -> None:
    async with _http_server(stack_settings) as url:
        # Without a bearer (or with a bad one) the SDK's auth hook answers 401 + a challenge.
        for key in (None, "hs_000000000000_" + "a" * 43):
            with pytest.raises(BaseException):  # noqa: B017 - the SDK wraps it in a group
                async with Client(_with_bearer(url, key), read_timeout_seconds=30) as client:
                    await client.list_tools()
        async with httpx2.AsyncClient() as raw:
            response = await raw.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
            assert response.status_code == 401
            assert response.headers["www-authenticate"].startswith("Bearer")

        key = make_key(f"{namespace}:retain,recall,forget")
        async with Client(_with_bearer(url, key), read_timeout_seconds=120) as client:
            await _store_retrieve_forget(client, namespace)
            refused = await client.call_tool(
                "memory_stats", {"namespace": "someone-else"}, read_timeout_seconds=60
            )
            assert refused.is_error and "someone-else" not in str(refused.content)
            erase = await client.call_tool(
                "forget_memories",
                {"namespace": namespace, "whole_namespace": True, "hard": True},
                read_timeout_seconds=60,
            )
            assert erase.is_error and "not allowed to erase" in str(erase.content)
