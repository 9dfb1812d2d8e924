"""MCP server: Hindsight's memory as tools for any MCP client (Claude Desktop, IDEs, agents).

Built on the official SDK's ``MCPServer`` (mcp 2.x; FastMCP's successor). The tools close over
one connected ``Hindsight`` client, so every session shares the recall view and the encoder.
Transports: stdio (the client launches ``hindsight mcp``) and streamable HTTP (``/mcp``).

Failures the model can act on (bad namespace, unknown memory, nothing matched) come back as tool
errors whose text names the field; validation of the arguments is the SDK's (JSON Schema).

Auth: every tool asks ``caller()`` for the principal and checks the action in the namespace
(the same scopes as HTTP). Over streamable HTTP the bearer token is checked by the SDK's own hook
(``token_verifier``: 401 with ``WWW-Authenticate: Bearer`` without a valid key); over stdio the
server presents the key it was started with (``--api-key`` / ``HINDSIGHT_API_KEY``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

from pipeline.interfaces.auth import (
    NO_AUTH_WARNING,
    Authenticator,
    CallerSource,
    NoAuth,
    RingAuth,
    RingTokenVerifier,
    check_exposure,
    fixed_caller,
    mcp_http_caller,
)
from pipeline.interfaces.client import Hindsight
from pipeline.runtime.settings import Settings
from pipeline.security.keys import Action
from pipeline.security.ring import following_keys
from schemas.errors import HindsightError, InvalidEvent
from schemas.events import Role
from schemas.memory import HistoryEntry, Kind, Region, SourceTurn, Status

log = logging.getLogger("hindsight.mcp")

MCP_PATH = "/mcp"
INSTRUCTIONS = (
    "Long-term memory. Call retain_memory with each user turn worth remembering (facts, "
    "preferences, decisions, how-tos), recall_memories before answering anything that may depend "
    "on earlier conversations, and cite memory ids (mem:xxxxxxxx) you used. A namespace is one "
    "user's or agent's memory bank; use the same one throughout a conversation."
)

NamespaceArg = Annotated[
    str,
    Field(
        description="Memory bank of one user or agent: 1-128 letters, digits and . _ : @ -",
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$",
    ),
]
TimeArg = Annotated[
    str | None,
    Field(description="ISO-8601 time with offset, e.g. 2024-05-01T10:00:00+00:00; default now"),
]


class RetainedTurn(BaseModel):
    event_id: str = Field(description="Id of the turn event (idempotency key).")
    namespace: str
    partition: int
    offset: int = Field(description="Log offset; recall_memories can wait for it.")
    applied: bool = Field(description="True when the memory views already include the turn.")


class RecalledItem(BaseModel):
    id: str
    citation: str = Field(description="Short reference to cite in an answer.")
    content: str
    kind: Kind
    region: Region
    status: Status
    score: float
    created_at: datetime
    valid_from: datetime
    valid_to: datetime | None = None
    superseded_by: str | None = None


class Recalled(BaseModel):
    route: str = Field(description="Region the query was routed to.")
    context: str = Field(description="Dated lines ready to put in a prompt.")
    memories: list[RecalledItem]


class Forgotten(BaseModel):
    event_id: str
    command: Literal["forget", "erase"]
    memory_ids: list[str]
    whole_namespace: bool
    applied: bool


class InspectedMemory(BaseModel):
    id: str
    namespace: str
    content: str
    kind: Kind
    region: Region
    status: Status
    pinned: bool
    importance: float
    activation: float
    confirmations: int
    created_at: datetime
    valid_from: datetime
    valid_to: datetime | None = None
    superseded_by: str | None = None
    entities: list[str]
    provenance: list[SourceTurn] = Field(description="The turns this memory came from.")
    history: list[HistoryEntry] = Field(description="Every change, with its causing event.")


class MemoryStats(BaseModel):
    namespace: str
    memories: int
    by_status: dict[str, int]
    by_kind: dict[str, int]
    by_region: dict[str, int]


def parse_time(value: str | None, field: str) -> datetime | None:
    if value is None or not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError as error:
        raise InvalidEvent(f"not an ISO-8601 time: {value!r}", field, "validate") from error
    if moment.tzinfo is None:
        raise InvalidEvent("needs a timezone offset, e.g. +00:00", field, "validate")
    return moment


def create_mcp_server(
    client: Callable[[], Hindsight],
    *,
    caller: CallerSource,
    verifier: Authenticator | None = None,
    url: str = "http://127.0.0.1",
) -> MCPServer[Any]:
    """The tools, over whatever ``client()`` returns (a connected ``Hindsight``).

    ``caller()`` names who is calling (checked per tool call); ``verifier`` turns on the SDK's
    bearer check for streamable HTTP. The SDK wants an issuer URL with it; our keys are issued
    by this service itself (no OAuth routes are mounted), so it is ``url``.
    """
    bearer: dict[str, Any] = {}
    if verifier is not None:
        bearer = {
            "token_verifier": RingTokenVerifier(verifier),
            "auth": AuthSettings(issuer_url=url, resource_server_url=None),  # type: ignore[arg-type]
        }
    server: MCPServer[Any] = MCPServer(
        "hindsight", instructions=INSTRUCTIONS, version="0.1.0", log_level="WARNING", **bearer
    )

    async def allow(namespace: str, action: Action) -> None:
        (await caller()).require(namespace, action)

    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
    async def retain_memory(
        namespace: NamespaceArg,
        text: Annotated[str, Field(min_length=1, max_length=16_000, description="The turn.")],
        speaker: Annotated[str, Field(description="Who said it, e.g. the user's name")] = "user",
        session_id: Annotated[str, Field(description="Conversation id")] = "default",
        role: Role = "user",
        event_time: TimeArg = None,
        wait: Annotated[
            bool, Field(description="Wait until recall can see it (read-your-writes)")
        ] = True,
    ) -> RetainedTurn:
        """Store one conversation turn. Hindsight decides what is worth remembering (facts,
        preferences, decisions, procedures), merges duplicates and supersedes contradicted
        facts. Returns where the turn landed in the log."""
        try:
            await allow(namespace, "retain")
            hs = client()
            receipt = await hs.retain(
                namespace,
                text,
                speaker=speaker,
                session_id=session_id,
                role=role,
                event_time=parse_time(event_time, "event_time"),
            )
            if wait:
                await hs.wait_applied(receipt)
        except HindsightError as error:
            raise ToolError(str(error)) from error
        return RetainedTurn(
            event_id=receipt.event_id,
            namespace=namespace,
            partition=receipt.partition,
            offset=receipt.offset,
            applied=wait,
        )

    @server.tool(annotations=read_only)
    async def recall_memories(
        namespace: NamespaceArg,
        query: Annotated[str, Field(min_length=1, max_length=4_000, description="Question")],
        limit: Annotated[int | None, Field(ge=1, le=50, description="Max memories")] = None,
        at: TimeArg = None,
        regions: Annotated[
            list[Region] | None,
            Field(description="Only these regions; default: routed from the query"),
        ] = None,
        include_history: Annotated[
            bool, Field(description="Also superseded/forgotten memories, with their chain")
        ] = False,
    ) -> Recalled:
        """Recall what is known that is relevant to a query: the best memories (scored by
        similarity, importance and freshness) and a ready-to-use context block of dated,
        cited lines."""
        try:
            await allow(namespace, "recall")
            result = await client().recall(
                namespace,
                query,
                limit=limit,
                at=parse_time(at, "at"),
                regions=regions,
                include_history=include_history,
            )
        except HindsightError as error:
            raise ToolError(str(error)) from error
        return Recalled(
            route=result.route,
            context=result.context,
            memories=[
                RecalledItem(citation=m.citation, **m.model_dump(include=_RECALLED_FIELDS))
                for m in result.memories
            ],
        )

    @server.tool(annotations=ToolAnnotations(destructive_hint=True, open_world_hint=False))
    async def forget_memories(
        namespace: NamespaceArg,
        memory_ids: Annotated[list[str], Field(description="Ids to forget")] = [],  # noqa: B006
        query: Annotated[
            str | None, Field(description="Forget what this query means (resolved in the log)")
        ] = None,
        whole_namespace: Annotated[bool, Field(description="Forget everything")] = False,
        hard: Annotated[
            bool, Field(description="Erase for good instead of marking forgotten")
        ] = False,
        reason: Annotated[str | None, Field(max_length=1_000)] = None,
    ) -> Forgotten:
        """Forget memories by id, by query, or the whole namespace. Soft by default: the memory
        is never recalled again but stays inspectable for audit; hard=true erases it."""
        try:
            await allow(namespace, "erase" if hard else "forget")
            if not memory_ids and not query and not whole_namespace:
                raise InvalidEvent(
                    "nothing to forget: give memory_ids, a query, or whole_namespace",
                    "memory_ids",
                    "forget",
                )
            outcome = await client().forget_and_report(
                namespace,
                memory_ids=memory_ids,
                query=query,
                whole_namespace=whole_namespace,
                hard=hard,
                reason=reason,
            )
        except HindsightError as error:
            raise ToolError(str(error)) from error
        receipt = outcome.receipt
        return Forgotten(
            event_id=receipt.event_id,
            command="erase" if hard else "forget",
            memory_ids=outcome.memory_ids,
            whole_namespace=whole_namespace,
            applied=outcome.applied,
        )

    @server.tool(annotations=read_only)
    async def inspect_memory(
        namespace: NamespaceArg,
        memory_id: Annotated[str, Field(description="Id from recall_memories")],
    ) -> InspectedMemory:
        """Show one memory with where it came from (source turns) and its full change history
        (created, confirmed, superseded, forgotten ...)."""
        try:
            await allow(namespace, "recall")
            record = await client().inspect(namespace, memory_id)
        except HindsightError as error:
            raise ToolError(str(error)) from error
        return InspectedMemory.model_validate(record.model_dump(exclude={"vector"}))

    @server.tool(annotations=read_only)
    async def memory_stats(namespace: NamespaceArg) -> MemoryStats:
        """Count a namespace's memories by status, kind and region."""
        try:
            await allow(namespace, "recall")
            stats = await client().stats(namespace)
        except HindsightError as error:
            raise ToolError(str(error)) from error
        return MemoryStats.model_validate(stats)

    return server


_RECALLED_FIELDS = set(RecalledItem.model_fields) - {"citation"}


async def serve_mcp_http(server: MCPServer[Any], host: str, port: int) -> None:
    """Serve streamable HTTP at ``/mcp`` until SIGINT/SIGTERM."""
    from pipeline.interfaces.serving import serve_until_signal

    await serve_until_signal(
        server.streamable_http_app(streamable_http_path=MCP_PATH, host=host),
        host,
        port,
        lambda url: f"Hindsight MCP (streamable HTTP) on {url}",
        MCP_PATH,
    )


async def serve_mcp(settings: Settings, transport: str, host: str, port: int) -> None:
    if transport not in {"stdio", "http"}:
        raise HindsightError(f"transport: expected stdio or http, got {transport!r}")
    if transport == "http":
        check_exposure(host, settings.auth, "--host")
    async with contextlib.AsyncExitStack() as stack:
        auth: Authenticator
        if settings.auth:
            auth = RingAuth((await stack.enter_async_context(following_keys(settings))).ring)
        else:
            log.warning(NO_AUTH_WARNING.format(where="this MCP server"))
            auth = NoAuth()
        if transport == "stdio":
            if settings.auth and not settings.api_key:
                raise HindsightError(
                    "api_key: stdio MCP needs a key: --api-key hs_... or HINDSIGHT_API_KEY"
                )
            caller = fixed_caller(auth, settings.api_key)
            await caller()  # fail at start, not at the first tool call, on a bad key
        else:
            caller = mcp_http_caller(auth)
        # The encoder loads on the first recall, so an MCP client's handshake is not kept waiting.
        hs = await stack.enter_async_context(Hindsight.connect(settings))
        verifier = auth if transport == "http" and settings.auth else None
        server = create_mcp_server(
            lambda: hs, caller=caller, verifier=verifier, url=f"http://{host}:{port}"
        )
        if transport == "stdio":
            await server.run_stdio_async()
        else:
            await serve_mcp_http(server, host, port)


def run_mcp(
    settings: Settings, transport: str = "stdio", host: str = "127.0.0.1", port: int = 8766
) -> None:
    """``hindsight mcp``: serve until the client hangs up (stdio) or a signal (HTTP)."""
    asyncio.run(serve_mcp(settings, transport, host, port))
