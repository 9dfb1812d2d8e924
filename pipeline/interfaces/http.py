"""HTTP API: the Python client behind FastAPI, one connected ``Hindsight`` per process.

The app is built by ``create_api(settings)`` (no module-level singleton). Its lifespan connects
one client and loads the encoder once, so the first recall does not pay for model loading.
``hindsight up`` passes its own client instead, sharing it with MCP and the ticker.

Errors name what was wrong: every 4xx/5xx body is ``{"error", "field", "errors"}`` where
``field`` is the dotted path of the bad input (``text``, ``event_time``, ``namespace``,
``memory_id``) and ``error`` the message.

Every memory route needs an API key (``Authorization: Bearer hs_...``): 401 without a valid one,
403 when its scopes do not cover the action in that namespace (the body never names the
namespace), 503 while the key ring is unavailable. ``settings.auth = False`` turns the checks off
(``hindsight up --no-auth``, loopback only).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from pipeline.interfaces.auth import (
    NO_AUTH_WARNING,
    Authenticated,
    Authenticator,
    Caller,
    MaybeCaller,
    NoAuth,
    RingAuth,
    check_exposure,
)
from pipeline.interfaces.client import Hindsight, RecallResult
from pipeline.interfaces.dashboard import mount_dashboard, open_dashboard
from pipeline.interfaces.dashboard.access import require_operator
from pipeline.interfaces.serving import serve_until_signal
from pipeline.models.encoders import load_encoder
from pipeline.runtime.health import check_readiness, sample_forever
from pipeline.runtime.metrics import metrics, render
from pipeline.runtime.settings import Settings
from pipeline.security.keys import AuthenticationFailed, Forbidden
from pipeline.security.ring import KeyRingUnavailable, following_keys
from pipeline.views.log_reader import LogReader, LogUnavailable
from pipeline.views.state_topic import FollowerFailed
from schemas.errors import HindsightError, InvalidEvent, WatermarkTimeout
from schemas.events import MAX_TURN_CHARS, NAMESPACE_PATTERN, Metadata, Role, check_namespace
from schemas.memory import Kind, MemoryRecord, Region, Status
from schemas.policy import RedactionSettings

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
    role: Role = "user"
    metadata: Metadata = Field(default_factory=dict)
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
    """Give ``ids``, a ``query`` (resolved by the pipeline where the command sits in the log), or
    ``all``. With ``wait`` the answer lists the memories it took."""

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


class PolicyIn(BaseModel):
    """A namespace's policy: opt-in redaction of personal data and secrets (docs/SECURITY.md)."""

    model_config = ConfigDict(extra="forbid")

    redaction: RedactionSettings


class StatsOut(BaseModel):
    namespace: str
    memories: int
    by_status: dict[Status, int]
    by_kind: dict[Kind, int]
    by_region: dict[Region, int]
    watermarks: dict[str, int] = Field(description="Applied input offset per topic:partition.")


class Health(BaseModel):
    status: Literal["ok", "unavailable"]
    watermarks: int = Field(description="How many input partitions the views report.")
    bootstrap: str | None = Field(default=None, description="Shown to an admin key only.")
    topic_prefix: str | None = Field(default=None, description="Shown to an admin key only.")
    brokers: int = Field(default=0, description="Brokers the cluster metadata lists.")
    error: str | None = Field(default=None, description="Why the broker is unavailable.")


class Ready(BaseModel):
    ready: bool
    reasons: list[str] = Field(
        default_factory=list, description="Why not ready (shown to an admin key only)."
    )
    view_lag: dict[str, int] = Field(
        default_factory=dict,
        description="Input messages not yet in the recall view, per topic:partition (admin only).",
    )
    max_lag: int


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
AUTH_RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "No valid API key (`Authorization: Bearer hs_...`)."},
    403: {"model": ErrorBody, "description": "The key's scopes do not allow this action here."},
    503: {"model": ErrorBody, "description": "The key ring is unavailable."},
}


# -- app -----------------------------------------------------------------------------------
class UnknownMemory(HindsightError):
    """No such memory in the namespace (404)."""


def _error(
    status: int,
    message: str,
    field: str | None,
    errors: list[FieldError],
    headers: dict[str, str] | None = None,
) -> JSONResponse:
    text = f"{field}: {message}" if field and not message.startswith(f"{field}:") else message
    body = ErrorBody(error=text, field=field, errors=errors)
    return JSONResponse(status_code=status, content=body.model_dump(mode="json"), headers=headers)


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
    if isinstance(exc, AuthenticationFailed):
        # The public message only; why the key was refused is in the server log.
        return _error(
            401, str(exc), "authorization", [], {"WWW-Authenticate": 'Bearer realm="hindsight"'}
        )
    if isinstance(exc, Forbidden):
        # The field is the key (what lacks the scope), never the namespace that was asked for.
        return _error(403, str(exc), "authorization", [])
    if isinstance(exc, KeyRingUnavailable | FollowerFailed | LogUnavailable):
        return _error(503, str(exc), None, [])
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


def create_api(
    settings: Settings, *, client: Hindsight | None = None, auth: Authenticator | None = None
) -> FastAPI:
    """Build the app; with ``client`` (and ``auth``) the caller owns the connection (and the key
    ring), else the lifespan connects them."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with contextlib.AsyncExitStack() as stack:
            if auth is not None:
                app.state.auth = auth
            elif not settings.auth:
                log.warning(NO_AUTH_WARNING.format(where="this API"))
                app.state.auth = NoAuth()
            else:
                keys = await stack.enter_async_context(following_keys(settings))
                app.state.auth = RingAuth(keys.ring)
            connected = client
            if connected is None:
                loop = asyncio.get_running_loop()
                encoder = await loop.run_in_executor(
                    None, load_encoder, settings.encoder, settings.encoder_threads
                )
                connected = await stack.enter_async_context(
                    Hindsight.connect(settings, encoder=encoder)
                )
            app.state.hindsight = connected
            reader = LogReader(settings.bootstrap or "", "hindsight-api-reader", settings.kafka)
            await reader.start()
            stack.push_async_callback(reader.stop)
            app.state.reader = reader
            app.state.dashboard = await stack.enter_async_context(
                open_dashboard(settings, connected, reader)
            )
            sampler = asyncio.create_task(
                sample_forever(reader, metrics(), connected.follower, settings),
                name="hindsight-metrics-sampler",
            )
            stack.push_async_callback(_cancel, sampler)
            yield

    app = FastAPI(
        title="Hindsight",
        version=API_VERSION,
        summary="Long-term memory for LLM agents: retain turns, recall memories.",
        lifespan=lifespan,
        responses=ERROR_RESPONSES,
    )
    guarded: dict[str, Any] = {"dependencies": [Authenticated], "responses": AUTH_RESPONSES}
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(HindsightError, _hindsight_error)

    mount_dashboard(app)

    @app.get(
        "/healthz",
        response_model=Health,
        tags=["ops"],
        summary="Alive: the process runs and the broker answers",
        responses={503: {"model": Health, "description": "broker unreachable"}},
    )
    async def healthz(hs: Client, caller: MaybeCaller, request: Request) -> JSONResponse:
        # Open, for load balancers; where Kafka is and the topic prefix only for an admin.
        admin = caller is not None and caller.is_admin
        health = Health(
            status="ok",
            watermarks=len(hs.watermarks),
            bootstrap=(hs.settings.bootstrap or "") if admin else None,
            topic_prefix=hs.settings.topic_prefix if admin else None,
        )
        reader: LogReader = request.app.state.reader
        try:
            health = health.model_copy(update={"brokers": await reader.ping()})
        except LogUnavailable as error:
            health = health.model_copy(
                update={"status": "unavailable", "error": f"broker unreachable: {error}"}
            )
        code = 200 if health.status == "ok" else 503
        return JSONResponse(health.model_dump(mode="json"), status_code=code)

    @app.get(
        "/readyz",
        response_model=Ready,
        tags=["ops"],
        summary="Ready: the recall view follows the state topic and is caught up",
        responses={503: {"model": Ready, "description": "not ready; reasons say why"}},
    )
    async def readyz(hs: Client, caller: MaybeCaller, request: Request) -> JSONResponse:
        # Open, for probes; the reasons (topic names, lags) only for an admin key.
        settings = hs.settings
        readiness = await check_readiness(
            hs.follower, request.app.state.reader, settings.topic_prefix, settings.ready_max_lag
        )
        metrics().ready.set(1 if readiness.ready else 0)
        # With auth off every caller is the local admin (loopback only).
        no_auth = isinstance(request.app.state.auth, NoAuth)
        admin = caller.is_admin if caller is not None else no_auth
        body = Ready(
            ready=readiness.ready,
            reasons=readiness.reasons if admin else [],
            view_lag=readiness.view_lag if admin else {},
            max_lag=settings.ready_max_lag,
        )
        return JSONResponse(body.model_dump(mode="json"), status_code=200 if body.ready else 503)

    @app.get(
        "/metrics",
        tags=["ops"],
        summary="Prometheus metrics of this process (an admin key when auth is on)",
        responses=AUTH_RESPONSES,
    )
    async def prometheus_metrics(caller: Caller) -> Response:
        # Metrics name namespaces and topics: operators only.
        require_operator(caller)
        payload, content_type = render()
        return Response(payload, media_type=content_type)

    @app.post(
        "/v1/namespaces/{namespace}/turns",
        response_model=TurnReceipt,
        status_code=201,
        tags=["memory"],
        summary="Retain one turn",
        **guarded,
    )
    async def retain(namespace: Namespace, turn: TurnIn, hs: Client, caller: Caller) -> TurnReceipt:
        caller.require(namespace, "retain")
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
        dependencies=[Authenticated],
        responses={
            **AUTH_RESPONSES,
            504: {"model": ErrorBody, "description": "wait_for_offset not reached"},
        },
    )
    async def recall(
        namespace: Namespace, body: RecallIn, hs: Client, caller: Caller
    ) -> RecallResult:
        caller.require(namespace, "recall")
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
        dependencies=[Authenticated],
        responses={**AUTH_RESPONSES},
    )
    async def forget(namespace: Namespace, body: ForgetIn, hs: Client, caller: Caller) -> ForgetOut:
        caller.require(namespace, "erase" if body.hard else "forget")
        if not body.ids and body.query is None and not body.all:
            raise InvalidEvent("give ids, a query or all=true", "ids", "forget")
        # The pipeline resolves a query at the command's place in the log (and so in replay).
        outcome = await hs.forget_and_report(
            namespace,
            memory_ids=body.ids,
            query=body.query,
            whole_namespace=body.all,
            hard=body.hard,
            reason=body.reason,
            wait=body.wait,
            timeout=body.wait_timeout,
        )
        receipt = outcome.receipt
        return ForgetOut(
            event_id=receipt.event_id,
            command="erase" if body.hard else "forget",
            memory_ids=outcome.memory_ids,
            whole_namespace=body.all,
            topic=receipt.topic,
            partition=receipt.partition,
            offset=receipt.offset,
            applied=outcome.applied,
        )

    @app.get(
        "/v1/namespaces/{namespace}/memories/{memory_id}",
        response_model=MemoryOut,
        tags=["memory"],
        summary="Inspect one memory: content, provenance, history",
        dependencies=[Authenticated],
        responses={**AUTH_RESPONSES, 404: {"model": ErrorBody, "description": "no such memory"}},
    )
    async def inspect(
        namespace: Namespace,
        memory_id: str,
        hs: Client,
        caller: Caller,
        reveal: Annotated[
            bool,
            Query(description="put redacted values back, from the original turns (admin)"),
        ] = False,
    ) -> MemoryOut:
        caller.require(namespace, "admin" if reveal else "recall")
        try:
            record = await hs.inspect(namespace, memory_id, reveal=reveal)
        except HindsightError as error:
            raise UnknownMemory(str(error).removeprefix("memory_id: ")) from error
        return MemoryOut.model_validate(record.model_dump())

    @app.put(
        "/v1/namespaces/{namespace}/policy",
        response_model=TurnReceipt,
        tags=["memory"],
        summary="Set the namespace's redaction from this point of its log on",
        **guarded,
    )
    async def set_policy(
        namespace: Namespace, body: PolicyIn, hs: Client, caller: Caller
    ) -> TurnReceipt:
        caller.require(namespace, "admin")
        receipt = await hs.set_policy(namespace, body.redaction)
        return TurnReceipt(**receipt.__dict__)

    @app.get(
        "/v1/namespaces/{namespace}/policy",
        response_model=PolicyIn,
        tags=["memory"],
        summary="The namespace's redaction as prepare last recorded it",
        **guarded,
    )
    async def get_policy(namespace: Namespace, hs: Client, caller: Caller) -> PolicyIn:
        caller.require(namespace, "admin")
        return PolicyIn(redaction=await hs.policy(namespace))

    @app.get(
        "/v1/namespaces/{namespace}/stats",
        response_model=StatsOut,
        tags=["memory"],
        summary="Counts by status, kind and region",
        **guarded,
    )
    async def stats(namespace: Namespace, hs: Client, caller: Caller) -> StatsOut:
        caller.require(namespace, "recall")
        return StatsOut.model_validate(await hs.stats(namespace))

    return app


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def serve_api(settings: Settings, host: str, port: int) -> None:
    """Serve the API until SIGINT/SIGTERM (``hindsight api``)."""
    check_exposure(host, settings.auth, "--host")
    await serve_until_signal(
        create_api(settings),
        host,
        port,
        lambda url: f"Hindsight API on {url} (docs {url}/docs, dashboard {url}/ui)",
    )
