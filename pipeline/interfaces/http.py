"""HTTP API: the Python client behind FastAPI, one connected ``Hindsight`` per process.

The app is built by ``create_api(settings)`` (no module-level singleton). Its lifespan connects
one client and loads the encoder once, so the first recall does not pay for model loading.
``hindsight up`` passes its own client instead, sharing it with MCP and the ticker.

Errors name what was wrong: every 4xx/5xx body is ``{"error", "field", "errors"}`` where
``field`` is the dotted path of the bad input (``text``, ``event_time``, ``namespace``,
``memory_id``) and ``error`` the message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from pipeline.interfaces.client import Hindsight, RecallResult
from pipeline.interfaces.serving import serve_until_signal
from pipeline.models.encoders import load_encoder
from pipeline.runtime.settings import Settings
from schemas.errors import HindsightError, InvalidEvent, WatermarkTimeout
from schemas.events import MAX_TURN_CHARS, NAMESPACE_PATTERN, check_namespace
from schemas.memory import Kind, MemoryRecord, Region, Status

log = logging.getLogger("hindsight.api")

API_VERSION = "1"


# -- request and response bodies ------------------------------------------------------------
class TurnIn(BaseModel):
    """One conversation turn to retain."""

    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=MAX_TURN_CHARS, description="What was said.")
    speaker: str = Field(min_length=1, max_length=128, examples=["alice"])
    session_id: str = Field(min_length=1, max_length=128, examples=["s1"])
    event_time: AwareDatetime | None = Field(
        default=None, description="When it was said (ISO-8601 with offset); default: now."
    )
    role: Literal["user", "assistant", "system", "tool"] = "user"
    metadata: dict[str, Any] = Field(default_factory=dict)
    event_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=128,
        description="Idempotency key: retrying with the same id never creates a second memory.",
    )


class TurnReceipt(BaseModel):
    """Where the turn landed in the log; pass ``offset`` as ``wait_for_offset`` to recall."""

    event_id: str
    namespace: str
    topic: str
    partition: int
    offset: int


class RecallIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=4_000)
    at: AwareDatetime | None = Field(
        default=None, description="Recall as of this time (ISO-8601 with offset); default: now."
    )
    limit: int | None = Field(default=None, ge=1, le=100)
    regions: list[Region] | None = Field(
        default=None, description="Restrict to regions; default: routed from the query."
    )
    wait_for_offset: int | None = Field(
        default=None,
        ge=0,
        description="Turn offset (from a retain receipt) the views must have applied first.",
    )
    wait_timeout: float = Field(default=30.0, gt=0, le=300)
    include_history: bool = Field(
        default=False, description="Also return superseded/forgotten memories with their chain."
    )
    budget_chars: int | None = Field(default=None, ge=50, le=100_000)
    reinforce: bool = Field(
        default=True, description="Publish the hits as a reinforcement signal (an event)."
    )


class ForgetIn(BaseModel):
    """Give ``ids``, a ``query`` (resolved to ids now and recorded with them), or ``all``."""

    model_config = ConfigDict(extra="forbid")

    ids: list[str] = Field(default_factory=list, max_length=10_000)
    query: str | None = Field(default=None, min_length=1, max_length=4_000)
    all: bool = Field(default=False, description="Forget the whole namespace.")
    hard: bool = Field(default=False, description="Erase: nothing readable is left behind.")
    reason: str | None = Field(default=None, max_length=1_000)
    wait: bool = Field(default=True, description="Return once the views applied the command.")
    wait_timeout: float = Field(default=30.0, gt=0, le=300)


class ForgetOut(BaseModel):
    event_id: str
    command: Literal["forget", "erase"]
    memory_ids: list[str]
    whole_namespace: bool
    topic: str
    partition: int
    offset: int
    applied: bool


class MemoryOut(MemoryRecord):
    """A memory with provenance and history (the embedding is left out)."""

    vector: list[float] = Field(default_factory=list, exclude=True)


class StatsOut(BaseModel):
    namespace: str
    memories: int
    by_status: dict[Status, int]
    by_kind: dict[Kind, int]
    by_region: dict[Region, int]
    watermarks: dict[str, int] = Field(description="Applied input offset per topic:partition.")


class Health(BaseModel):
    status: Literal["ok"]
    bootstrap: str
    topic_prefix: str
    watermarks: int = Field(description="How many input partitions the views report.")


class FieldError(BaseModel):
    field: str | None
    location: str | None = None
    message: str
    type: str | None = None


class ErrorBody(BaseModel):
    error: str = Field(description="What went wrong, starting with the bad field when known.")
    field: str | None = None
    errors: list[FieldError] = Field(default_factory=list)


ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    422: {"model": ErrorBody, "description": "Invalid input; `field` names it."},
}


# -- app -----------------------------------------------------------------------------------
class UnknownMemory(HindsightError):
    """No such memory in the namespace (404)."""


def _error(status: int, message: str, field: str | None, errors: list[FieldError]) -> JSONResponse:
    text = f"{field}: {message}" if field and not message.startswith(f"{field}:") else message
    body = ErrorBody(error=text, field=field, errors=errors)
    return JSONResponse(status_code=status, content=body.model_dump(mode="json"))


def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = []
    for item in exc.errors():
        loc = [str(part) for part in item.get("loc", ())]
        # FastAPI prefixes the source ("body", "path", "query"); the field is what follows.
        location = loc[0] if loc and loc[0] in {"body", "path", "query", "header"} else None
        path = loc[1:] if location else loc
        errors.append(
            FieldError(
                field=".".join(path) or None,
                location=location,
                message=str(item.get("msg", "invalid")),
                type=item.get("type"),
            )
        )
    first = errors[0] if errors else FieldError(field=None, message="invalid request")
    return _error(422, first.message, first.field, errors)


def _hindsight_error(_: Request, exc: Exception) -> JSONResponse:
    if isinstance(exc, WatermarkTimeout):
        # Read-your-writes wait ran out: the gateway (us) timed out waiting for the worker.
        return _error(504, str(exc), None, [])
    if isinstance(exc, UnknownMemory):
        return _error(404, str(exc), "memory_id", [])
    if isinstance(exc, InvalidEvent):
        return _error(422, exc.reason, exc.field, [FieldError(field=exc.field, message=exc.reason)])
    return _error(400, str(exc), None, [])


def _namespace(
    namespace: Annotated[
        str,
        Path(
            description="Memory bank: 1-128 of letters, digits and . _ : @ -",
            examples=["alice"],
            json_schema_extra={"pattern": NAMESPACE_PATTERN.pattern},
        ),
    ],
) -> str:
    # Checked here (not by a Path pattern) so the message says what a namespace may contain.
    return check_namespace(namespace)


Namespace = Annotated[str, Depends(_namespace)]


def _client(request: Request) -> Hindsight:
    client: Hindsight = request.app.state.hindsight
    return client


Client = Annotated[Hindsight, Depends(_client)]


def create_api(settings: Settings, *, client: Hindsight | None = None) -> FastAPI:
    """Build the app; with ``client`` the caller owns the connection, else the lifespan does."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if client is not None:
            app.state.hindsight = client
            yield
            return
        loop = asyncio.get_running_loop()
        encoder = await loop.run_in_executor(
            None, load_encoder, settings.encoder, settings.encoder_threads
        )
        async with Hindsight.connect(settings, encoder=encoder) as connected:
            app.state.hindsight = connected
            yield

    app = FastAPI(
        title="Hindsight",
        version=API_VERSION,
        summary="Long-term memory for LLM agents: retain turns, recall memories.",
        lifespan=lifespan,
        responses=ERROR_RESPONSES,
    )
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HindsightError, _hindsight_error)

    @app.get("/healthz", response_model=Health, tags=["ops"])
    async def healthz(hs: Client) -> Health:
        stats = await hs.stats("healthz")
        return Health(
            status="ok",
            bootstrap=hs.settings.bootstrap or "",
            topic_prefix=hs.settings.topic_prefix,
            watermarks=len(stats["watermarks"]),
        )

    @app.post(
        "/v1/namespaces/{namespace}/turns",
        response_model=TurnReceipt,
        status_code=201,
        tags=["memory"],
        summary="Retain one turn",
    )
    async def retain(namespace: Namespace, turn: TurnIn, hs: Client) -> TurnReceipt:
        receipt = await hs.retain(
            namespace,
            turn.text,
            speaker=turn.speaker,
            session_id=turn.session_id,
            event_time=turn.event_time,
            role=turn.role,
            metadata=turn.metadata,
            event_id=turn.event_id,
        )
        return TurnReceipt(**receipt.__dict__)

    @app.post(
        "/v1/namespaces/{namespace}/recall",
        response_model=RecallResult,
        tags=["memory"],
        summary="Recall memories for a query",
        responses={504: {"model": ErrorBody, "description": "wait_for_offset not reached"}},
    )
    async def recall(namespace: Namespace, body: RecallIn, hs: Client) -> RecallResult:
        return await hs.recall(
            namespace,
            body.query,
            at=body.at,
            limit=body.limit,
            budget_chars=body.budget_chars,
            regions=body.regions,
            wait_for=body.wait_for_offset,
            wait_timeout=body.wait_timeout,
            include_history=body.include_history,
            reinforce=body.reinforce,
        )

    @app.post(
        "/v1/namespaces/{namespace}/forget",
        response_model=ForgetOut,
        tags=["memory"],
        summary="Forget (soft) or erase (hard) memories",
        responses={504: {"model": ErrorBody, "description": "command not applied in time"}},
    )
    async def forget(namespace: Namespace, body: ForgetIn, hs: Client) -> ForgetOut:
        ids = list(dict.fromkeys(body.ids))
        if body.query is not None:
            resolved = await hs.resolve_forget_query(namespace, body.query)
            ids += [memory_id for memory_id in resolved if memory_id not in ids]
        if not ids and not body.all:
            field = "query" if body.query is not None else "ids"
            message = (
                "no memory matches the query"
                if body.query is not None
                else "give ids, a query or all=true"
            )
            raise InvalidEvent(message, field, "forget")
        command: Literal["forget", "erase"] = "erase" if body.hard else "forget"
        # The query is recorded with the ids it resolved to, so replay never re-runs a recall.
        receipt = await hs.command(
            namespace,
            command,
            memory_ids=ids,
            whole_namespace=body.all,
            query=body.query,
            reason=body.reason,
        )
        if body.wait:
            await hs.wait_applied(receipt, timeout=body.wait_timeout)
        return ForgetOut(
            event_id=receipt.event_id,
            command=command,
            memory_ids=ids,
            whole_namespace=body.all,
            topic=receipt.topic,
            partition=receipt.partition,
            offset=receipt.offset,
            applied=body.wait,
        )

    @app.get(
        "/v1/namespaces/{namespace}/memories/{memory_id}",
        response_model=MemoryOut,
        tags=["memory"],
        summary="Inspect one memory: content, provenance, history",
        responses={404: {"model": ErrorBody, "description": "no such memory"}},
    )
    async def inspect(namespace: Namespace, memory_id: str, hs: Client) -> MemoryOut:
        try:
            record = await hs.inspect(namespace, memory_id)
        except HindsightError as error:
            raise UnknownMemory(str(error).removeprefix("memory_id: ")) from error
        return MemoryOut.model_validate(record.model_dump())

    @app.get(
        "/v1/namespaces/{namespace}/stats",
        response_model=StatsOut,
        tags=["memory"],
        summary="Counts by status, kind and region",
    )
    async def stats(namespace: Namespace, hs: Client) -> StatsOut:
        return StatsOut.model_validate(await hs.stats(namespace))

    return app


async def serve_api(settings: Settings, host: str, port: int) -> None:
    """Serve the API until SIGINT/SIGTERM (``hindsight api``)."""
    await serve_until_signal(
        create_api(settings),
        host,
        port,
        lambda url: f"Hindsight API on {url} (docs {url}/docs)",
    )
