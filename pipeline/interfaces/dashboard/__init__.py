"""The memory dashboard at ``/ui``: server-rendered pages served by the API process.

Stack: Jinja2 templates rendered by FastAPI, one small plain-JavaScript file for live updates
(server-sent events from the change feed) and a stylesheet. Nothing to build or download on a
fresh machine; the pages work without JavaScript except the live updates. See
docs/OPERATIONS.md ("The dashboard") for why.

``open_dashboard`` starts what the pages read besides the client: the change-feed hub.
``mount_dashboard`` adds the routes and the static files to the API app.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI

from pipeline.interfaces.client import Hindsight
from pipeline.interfaces.dashboard.feed import ChangeFeedHub
from pipeline.runtime.settings import Settings
from pipeline.views.log_reader import LogReader
from topics.catalogue import topic_names

UI_PATH = "/ui"


@dataclass(frozen=True)
class Dashboard:
    settings: Settings
    client: Hindsight
    reader: LogReader
    hub: ChangeFeedHub


@asynccontextmanager
async def open_dashboard(
    settings: Settings, client: Hindsight, reader: LogReader
) -> AsyncIterator[Dashboard]:
    names = topic_names(settings.topic_prefix)
    hub = ChangeFeedHub(settings.bootstrap or "", names["memory_updates"], reader, settings.kafka)
    await hub.start()
    try:
        yield Dashboard(settings, client, reader, hub)
    finally:
        await hub.stop()


def mount_dashboard(app: FastAPI) -> None:
    from fastapi.staticfiles import StaticFiles

    from pipeline.interfaces.dashboard.routes import STATIC_DIR, login_router, router

    app.include_router(login_router, prefix=UI_PATH)
    app.include_router(router, prefix=UI_PATH)
    app.mount(f"{UI_PATH}/static", StaticFiles(directory=STATIC_DIR), name="ui-static")
