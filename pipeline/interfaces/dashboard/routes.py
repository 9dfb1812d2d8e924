"""Dashboard routes: fetch (hot index, bounded log reads), decide (``views``), render.

Every log read here is bounded by a window of offsets and a count (``LogReader``); a page never
scans a topic. Windows are paged with ``skip`` (messages back from the end).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlencode

import orjson
from fastapi import APIRouter, Depends, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates
from sse_starlette import EventSourceResponse

from pipeline.interfaces.dashboard import UI_PATH, Dashboard
from pipeline.interfaces.dashboard.access import COOKIE, check_key, dashboard_operator
from pipeline.interfaces.dashboard.views import (
    STATUS_FILTERS,
    DeadLetterView,
    FeedEntry,
    MemoryFilter,
    Row,
    activation_plot,
    activation_points,
    corrected_bytes,
    counts,
    dead_letter_view,
    feed_entries,
    live_action,
    memory_page,
    newest_first,
    recall_summary,
    short_number,
    source_view,
    supersede_links,
    timeline,
)
from pipeline.recall.fusion import PATHS
from pipeline.runtime.health import check_readiness, stage_lags, stage_of
from pipeline.runtime.metrics import metrics
from pipeline.runtime.progress import progress_path, read_progress
from pipeline.views.log_reader import LogMessage
from pipeline.views.state_topic import partition_for
from schemas.codec import decode_event
from schemas.errors import HindsightError, InvalidEvent
from schemas.events import check_namespace
from schemas.memory import KINDS, REGIONS, MemoryChanged
from topics.catalogue import topic_names

log = logging.getLogger("hindsight.dashboard")

HERE = Path(__file__).parent
STATIC_DIR = HERE / "static"
TABLE_PAGE = 50
NAMESPACE_PAGE = 100
TIMELINE_WINDOW = 300  # input-log messages a page
FEED_WINDOW = 2_000  # change-feed messages scanned for one memory's events
DEAD_LETTER_PAGE = 20  # per partition
MAX_SOURCES = 20

templates = Jinja2Templates(directory=HERE / "templates")
templates.env.filters["num"] = short_number
templates.env.globals.update(ui=UI_PATH, kinds=KINDS, regions=REGIONS, paths=PATHS)


def _when(moment: datetime | None) -> str:
    return "" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _when_ms(ms: int) -> str:
    return _when(datetime.fromtimestamp(ms / 1000, UTC)) if ms >= 0 else ""


templates.env.filters["when"] = _when
templates.env.filters["when_ms"] = _when_ms

# Every page needs an operator (an admin key, or auth off); the login form is the exception.
router = APIRouter(include_in_schema=False, dependencies=[Depends(dashboard_operator)])
login_router = APIRouter(include_in_schema=False)


def _dashboard(request: Request) -> Dashboard:
    dashboard: Dashboard = request.app.state.dashboard
    return dashboard


Board = Annotated[Dashboard, Depends(_dashboard)]


def _page(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    response = templates.TemplateResponse(request, name, context, status_code=status)
    # Scripts and styles only from this server: a memory's text can never run as code.
    response.headers["Content-Security-Policy"] = (
        "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    )
    return response


def _error(request: Request, status: int, message: str, namespace: str | None = None) -> Response:
    return _page(request, "error.html", status, message=message, namespace=namespace)


def _namespace_or_none(namespace: str) -> str | None:
    try:
        return check_namespace(namespace)
    except InvalidEvent:
        return None


def _query(**params: object) -> str:
    return urlencode({k: v for k, v in params.items() if v not in (None, "", 0, False)})


templates.env.globals["query"] = _query


# -- namespaces --------------------------------------------------------------------------------
@router.get("", response_class=HTMLResponse)
@router.get("/", response_class=HTMLResponse)
async def namespaces(
    request: Request, board: Board, q: str = "", offset: Annotated[int, Query(ge=0)] = 0
) -> Response:
    sizes = board.client.namespace_sizes()
    names = sorted(n for n in sizes if q.casefold() in n.casefold())
    shown = names[offset : offset + NAMESPACE_PAGE]
    rows = [(name, counts(board.client.records(name))) for name in shown]
    return _page(
        request,
        "namespaces.html",
        rows=rows,
        total=len(names),
        offset=offset,
        limit=NAMESPACE_PAGE,
        q=q,
        recent=list(board.hub.recent),
    )


@router.get("/live")
async def live_all(request: Request, board: Board) -> EventSourceResponse:
    async def events() -> AsyncIterator[dict[str, str]]:
        async with board.hub.subscribe(None) as subscription:
            yield {"event": "ready", "data": "{}"}
            while True:
                change = await subscription.queue.get()
                if subscription.overflowed:
                    yield {"event": "resync", "data": "{}"}
                    return
                html = templates.env.get_template("_change.html").render(change=change)
                yield {"event": "change", "data": orjson.dumps({"html": html}).decode()}

    return EventSourceResponse(events(), ping=15)


# -- one namespace's memories -------------------------------------------------------------------
@router.get("/ns/{namespace}", response_class=HTMLResponse)
async def memories(
    request: Request,
    namespace: str,
    board: Board,
    status: str = "recallable",
    kind: str = "",
    region: str = "",
    q: str = "",
    offset: Annotated[int, Query(ge=0)] = 0,
) -> Response:
    if _namespace_or_none(namespace) is None:
        return _error(request, 422, f"namespace: {namespace!r} is not a valid namespace")
    where = MemoryFilter.parse(status, kind, region, q)
    records = board.client.records(namespace)
    page = memory_page(records, where, offset, TABLE_PAGE)
    return _page(
        request,
        "memories.html",
        namespace=namespace,
        page=page,
        where=where,
        status_filters=STATUS_FILTERS,
        counts=counts(records),
        live_url=f"{UI_PATH}/ns/{namespace}/live?{urlencode(where.query())}",
    )


@router.get("/ns/{namespace}/live")
async def live_rows(
    namespace: str,
    board: Board,
    status: str = "recallable",
    kind: str = "",
    region: str = "",
    q: str = "",
) -> EventSourceResponse:
    check_namespace(namespace)
    where = MemoryFilter.parse(status, kind, region, q)
    row_template = templates.env.get_template("_row.html")

    def row_event(change: MemoryChanged) -> dict[str, str]:
        action = live_action(change, where)
        html = ""
        if action == "upsert":
            row = Row.of_change(change, board.client.record(change.memory_id))
            html = row_template.render(row=row, namespace=namespace, fresh=True)
        payload = {"action": action, "id": change.memory_id, "change": change.change, "html": html}
        return {"event": "row", "data": orjson.dumps(payload).decode()}

    async def events() -> AsyncIterator[dict[str, str]]:
        async with board.hub.subscribe(namespace) as subscription:
            yield {"event": "ready", "data": "{}"}
            while True:
                change = await subscription.queue.get()
                if subscription.overflowed:
                    yield {"event": "resync", "data": "{}"}
                    return
                yield row_event(change)

    return EventSourceResponse(events(), ping=15)


# -- one memory -------------------------------------------------------------------------------
@router.get("/ns/{namespace}/memories/{memory_id}", response_class=HTMLResponse)
async def memory(
    request: Request,
    namespace: str,
    memory_id: str,
    board: Board,
    feed_skip: Annotated[int, Query(ge=0)] = 0,
) -> Response:
    if _namespace_or_none(namespace) is None:
        return _error(request, 422, f"namespace: {namespace!r} is not a valid namespace")
    try:
        record = await board.client.inspect(namespace, memory_id)
    except HindsightError:
        return _error(
            request,
            404,
            f"No memory {memory_id} in {namespace} (never formed, or erased).",
            namespace,
        )
    reader = board.reader
    sources = []
    for source in record.provenance[:MAX_SOURCES]:
        message = None
        if source.topic is not None and source.partition is not None and source.offset is not None:
            message = await reader.read_at(source.topic, source.partition, source.offset)
        sources.append(source_view(source, message))

    names = topic_names(board.settings.topic_prefix)
    updates = names["memory_updates"]
    partitions = await reader.partitions(updates)
    feed: list[FeedEntry] = []
    window: dict[str, int] = {}
    if partitions:
        partition = partition_for(namespace, len(partitions))
        messages, first, begin = await reader.read_tail(updates, partition, FEED_WINDOW, feed_skip)
        feed = feed_entries(messages, record.id)
        window = {
            "partition": partition,
            "first": first,
            "older": first > begin,
            "next_skip": feed_skip + FEED_WINDOW,
        }
    own = [entry.change for entry in feed if entry.change.memory_id == record.id]
    plot = activation_plot(record.base_importance, activation_points(record, own))
    predecessors, successors = supersede_links(
        record, board.client.record, board.client.records(namespace)
    )
    return _page(
        request,
        "memory.html",
        namespace=namespace,
        record=record,
        sources=sources,
        feed=list(reversed(feed)),
        window=window,
        topic=updates,
        plot=plot,
        predecessors=[(i, board.client.record(i)) for i in predecessors],
        successors=[(i, board.client.record(i)) for i in successors],
        links=[(a, board.client.record(a.memory_id)) for a in record.associations],
    )


# -- a namespace's timeline ---------------------------------------------------------------------
@router.get("/ns/{namespace}/timeline", response_class=HTMLResponse)
async def namespace_timeline(
    request: Request, namespace: str, board: Board, skip: Annotated[int, Query(ge=0)] = 0
) -> Response:
    if _namespace_or_none(namespace) is None:
        return _error(request, 422, f"namespace: {namespace!r} is not a valid namespace")
    topic = topic_names(board.settings.topic_prefix)["events"]
    messages: list[LogMessage] = []
    older = False
    scanned = f"{topic} (no partitions)"
    partitions = await board.reader.partitions(topic)
    if partitions:
        partition = partition_for(namespace, len(partitions))
        messages, first, begin = await board.reader.read_tail(
            topic, partition, TIMELINE_WINDOW, skip
        )
        older = first > begin
        scanned = f"{topic}[{partition}] from offset {first}"
    items = timeline(messages, namespace, board.client.records(namespace))
    return _page(
        request,
        "timeline.html",
        namespace=namespace,
        items=list(reversed(items)),
        scanned=scanned,
        older=older,
        skip=skip,
        window=TIMELINE_WINDOW,
        recall_summary=recall_summary,
    )


# -- recall playground ------------------------------------------------------------------------
@router.get("/ns/{namespace}/recall", response_class=HTMLResponse)
async def playground(
    request: Request,
    namespace: str,
    board: Board,
    q: str = "",
    at: str = "",
    limit: str = "",
    history: bool = False,
    reinforce: bool = False,
    region: Annotated[list[str] | None, Query()] = None,
) -> Response:
    if _namespace_or_none(namespace) is None:
        return _error(request, 422, f"namespace: {namespace!r} is not a valid namespace")
    form = {
        "q": q,
        "at": at,
        "limit": limit,
        "history": history,
        "reinforce": reinforce,
        "regions": [r for r in region or [] if r in REGIONS],
    }
    result = None
    error = None
    if q.strip():
        try:
            moment = _parse_at(at)
            wanted = int(limit) if limit.strip() else None
            if wanted is not None and not 1 <= wanted <= 100:
                raise InvalidEvent("must be between 1 and 100", "limit", "recall")
            result = await board.client.recall(
                namespace,
                q,
                at=moment,
                limit=wanted,
                regions=form["regions"] or None,  # type: ignore[arg-type]
                include_history=history,
                reinforce=reinforce,
            )
        except ValueError:
            error = "limit: expected a whole number"
        except HindsightError as failure:
            error = str(failure)
    records = board.client.records(namespace)
    newest = max((r.updated_at for r in records), default=None)
    return _page(
        request,
        "recall.html",
        namespace=namespace,
        latest=newest.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S") if newest else "",
        form=form,
        result=result,
        error=error,
        policy=board.settings.recall,
    )


def _parse_at(value: str) -> datetime | None:
    """``datetime-local`` input (no offset) is read as UTC; an explicit offset is kept."""
    if not value.strip():
        return None
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError as error:
        raise InvalidEvent("expected a date and time, e.g. 2024-05-01T10:00", "at") from error
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# -- operations -------------------------------------------------------------------------------
@router.get("/ops", response_class=HTMLResponse)
async def operations(
    request: Request,
    board: Board,
    skip: Annotated[int, Query(ge=0)] = 0,
    republished: str = "",
) -> Response:
    settings = board.settings
    reader = board.reader
    problems: list[str] = []
    readiness = await check_readiness(
        board.client.follower, reader, settings.topic_prefix, settings.ready_max_lag
    )
    try:
        lags = await stage_lags(reader, settings.app_id)
        metrics().set_consumer_lag((r.group, r.topic, r.partition, r.lag) for r in lags)
    except HindsightError as error:
        lags = []
        problems.append(str(error))
    try:
        letters, older = await _dead_letters(board, skip)
    except HindsightError as error:
        letters, older = [], False
        problems.append(str(error))
    return _page(
        request,
        "ops.html",
        readiness=readiness,
        lags=[(stage_of(row.group, settings.app_id), row) for row in lags],
        letters=letters,
        older=older,
        skip=skip,
        page=DEAD_LETTER_PAGE,
        progress=read_progress(progress_path(settings.data_dir)),
        progress_file=progress_path(settings.data_dir),
        problems=problems,
        feed_failure=board.hub.failure,
        subscribers=board.hub.subscribers,
        republished=republished,
        now=datetime.now(UTC),
    )


async def _dead_letters(board: Dashboard, skip: int) -> tuple[list[DeadLetterView], bool]:
    topic = topic_names(board.settings.topic_prefix)["dead_letters"]
    views: list[DeadLetterView] = []
    older = False
    for partition in await board.reader.partitions(topic):
        tail, first, begin = await board.reader.read_tail(topic, partition, DEAD_LETTER_PAGE, skip)
        older = older or first > begin
        views += [v for v in (dead_letter_view(m) for m in tail) if v is not None]
    return newest_first(views), older


@router.post("/ops/dead-letters/republish", response_class=HTMLResponse)
async def republish(
    request: Request,
    board: Board,
    partition: Annotated[int, Form(ge=0)],
    offset: Annotated[int, Form(ge=0)],
    value: Annotated[str, Form(max_length=512 * 1024)],
    encoding: Annotated[str, Form()] = "utf-8",
) -> Response:
    topic = topic_names(board.settings.topic_prefix)["dead_letters"]
    message = await board.reader.read_at(topic, partition, offset)
    letter = dead_letter_view(message) if message is not None else None
    if letter is None:
        return _error(request, 404, f"No dead letter at {topic}[{partition}]@{offset}.")
    try:
        raw = corrected_bytes(value, encoding)
        event = decode_event(raw)
    except InvalidEvent as failure:
        return _page(
            request,
            "republish.html",
            422,
            letter=letter,
            value=value,
            encoding=encoding,
            error=str(failure),
        )
    receipt = await board.client.republish(event, raw, origin=f"{topic}:{partition}:{offset}")
    metrics().republished.inc()
    done = f"{receipt.topic}:{receipt.partition}:{receipt.offset}"
    return RedirectResponse(f"{UI_PATH}/ops?{urlencode({'republished': done})}", status_code=303)


# -- login (auth on: a browser sends the key as a cookie) ------------------------------------
def _safe_next(target: str) -> str:
    # Only paths inside the dashboard: never an open redirect to another site.
    return target if target.startswith(f"{UI_PATH}") and "//" not in target else UI_PATH


@login_router.get("/login", response_class=HTMLResponse)
async def login_form(request: Request, next: str = UI_PATH) -> Response:
    return _page(request, "login.html", next=_safe_next(next), error=None)


@login_router.post("/login", response_class=HTMLResponse)
async def login(
    request: Request,
    key: Annotated[str, Form(max_length=512)],
    next: Annotated[str, Form(max_length=2048)] = UI_PATH,
) -> Response:
    try:
        await check_key(request, key)
    except HindsightError as failure:
        return _page(
            request, "login.html", 401, next=_safe_next(next), error=str(failure) or "refused"
        )
    response = RedirectResponse(_safe_next(next), status_code=303)
    response.set_cookie(
        COOKIE,
        key.strip(),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path=UI_PATH,
    )
    return response


@login_router.post("/logout")
async def logout() -> Response:
    response = RedirectResponse(f"{UI_PATH}/login", status_code=303)
    response.delete_cookie(COOKIE, path=UI_PATH)
    return response
