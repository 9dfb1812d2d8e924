"""``hindsight up``: the long-lived local service.

Starts the broker (embedded unless ``settings.bootstrap`` names one), the topics and the worker
process (``running_stack``), one ``Hindsight`` client shared by the HTTP API, MCP over HTTP and
the ticker, then writes ``<data_dir>/stack.json`` so the CLI's client commands find the stack.
SIGINT/SIGTERM stop everything in reverse order and remove ``stack.json``.

The ticker: idle consolidation and cooling are decided on event time, so something has to move a
quiet namespace's time forward. Once a minute of wall-clock, ``up`` publishes a ``tick`` command
(an event in the log, so replay reproduces it) for each namespace that had turns and has not yet
been ticked past its idle threshold. Turns are observed on the input log itself, so turns
published by any producer (API, MCP, CLI, another app) count.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition

from pipeline.crypto.envelope import open_input_event
from pipeline.interfaces.auth import (
    NO_AUTH_WARNING,
    Authenticator,
    NoAuth,
    RingAuth,
    check_exposure,
    mcp_http_caller,
)
from pipeline.interfaces.client import Hindsight
from pipeline.interfaces.http import create_api
from pipeline.interfaces.serving import serving
from pipeline.models.encoders import load_encoder
from pipeline.runtime.kafka import client_kwargs, stop_consumer
from pipeline.runtime.settings import Settings
from pipeline.runtime.stack import running_stack
from pipeline.security.management import ensure_admin_key, write_private
from pipeline.security.ring import following_keys
from pipeline.views.state_topic import partition_ids
from schemas.errors import DataKeyDestroyed, HindsightError, InvalidEvent, UnknownDataKey
from schemas.events import TurnRecorded
from topics.catalogue import topic_names

log = logging.getLogger("hindsight.up")

STACK_FILE = "stack.json"
TICK_SECONDS = 60.0


def tick_seconds_from_env() -> float:
    raw = os.environ.get("HINDSIGHT_TICK_SECONDS")
    if raw is None:
        return TICK_SECONDS
    try:
        value = float(raw)
    except ValueError as error:
        raise HindsightError(f"HINDSIGHT_TICK_SECONDS: expected seconds, got {raw!r}") from error
    if value <= 0:
        raise HindsightError(f"HINDSIGHT_TICK_SECONDS: must be positive, got {raw!r}")
    return value


@dataclass
class TickSchedule:
    """Which namespaces need a tick now (pure: the caller supplies the times).

    A namespace is due after it had a turn, and stays due at every interval until a tick lands
    ``idle_seconds`` after its latest turn (the one that lets idle consolidation fire); a tick is
    never sent at or before the namespace's latest turn time.
    """

    idle_seconds: float
    last_turn: dict[str, datetime] = field(default_factory=dict)

    def observe(self, namespace: str, event_time: datetime) -> None:
        known = self.last_turn.get(namespace)
        self.last_turn[namespace] = event_time if known is None else max(known, event_time)

    def due(self, now: datetime) -> list[str]:
        due = sorted(ns for ns, last in self.last_turn.items() if now > last)
        for namespace in due:
            if now - self.last_turn[namespace] >= timedelta(seconds=self.idle_seconds):
                del self.last_turn[namespace]  # the idle tick: quiet until the next turn
        return due


class Ticker:
    """Follows the input log from its end and publishes due ticks through the client."""

    def __init__(self, client: Hindsight, interval: float) -> None:
        self._client = client
        self._interval = interval
        self.schedule = TickSchedule(client.settings.memory.idle_consolidation_seconds)
        self.ticks_sent = 0

    async def run(self) -> None:
        settings = self._client.settings
        topic = topic_names(settings.topic_prefix)["events"]
        consumer = AIOKafkaConsumer(
            **client_kwargs(settings.kafka),
            bootstrap_servers=settings.bootstrap,
            group_id=None,
            enable_auto_commit=False,
        )
        await consumer.start()
        try:
            ids = await partition_ids(settings.bootstrap or "", topic, settings.kafka)
            partitions = [TopicPartition(topic, p) for p in ids]
            consumer.assign(partitions)
            # Turns from before `up` started were ticked (or not) by the previous run.
            await consumer.seek_to_end(*partitions)
            loop = asyncio.get_running_loop()
            next_tick = loop.time() + self._interval
            while True:
                timeout_ms = max(0, int((next_tick - loop.time()) * 1000))
                batches = await consumer.getmany(timeout_ms=min(timeout_ms, 1000))
                for messages in batches.values():
                    for message in messages:
                        self._observe(message.value)
                if loop.time() >= next_tick:
                    next_tick = loop.time() + self._interval
                    await self._tick(datetime.now(UTC))
        finally:
            await stop_consumer(consumer)

    def _observe(self, value: bytes | None) -> None:
        try:
            event = open_input_event(value, self._client.keys)
        except (InvalidEvent, UnknownDataKey, DataKeyDestroyed):
            return  # the worker dead-letters or shreds it; nothing to tick for
        if isinstance(event, TurnRecorded):
            self.schedule.observe(event.namespace, event.event_time)

    async def _tick(self, now: datetime) -> None:
        # `now` becomes event time here, at the boundary, as the client does for turns.
        for namespace in self.schedule.due(now):
            try:
                await self._client.advance(namespace, now)
                self.ticks_sent += 1
            except HindsightError:
                log.exception("tick for %s failed", namespace)


async def _cancel(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task


def write_stack_file(path: Path, payload: dict[str, Any]) -> None:
    # Owner-only (it holds the local admin key), written then renamed: never read half-written.
    write_private(path, orjson.dumps(payload, option=orjson.OPT_INDENT_2))


async def run_up(
    settings: Settings,
    api: bool = True,
    mcp_http: bool = False,
    *,
    tick_seconds: float | None = None,
) -> int:
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    interval = tick_seconds or tick_seconds_from_env()
    stack_file: Path | None = None
    # Before anything starts: never serve a non-loopback address without keys.
    check_exposure(settings.api_host, settings.auth)
    try:
        async with contextlib.AsyncExitStack() as stack:
            print("starting Kafka, the pipeline stages and the API…", flush=True)
            live = await stack.enter_async_context(running_stack(settings))
            stack_file = Path(live.data_dir) / STACK_FILE
            info: dict[str, Any] = {
                "bootstrap": live.bootstrap,
                "topic_prefix": live.topic_prefix,
                "partitions": live.partitions,
                "data_dir": str(live.data_dir),
                "pid": os.getpid(),
                "auth": live.auth,
            }
            auth: Authenticator
            if live.auth:
                keys = await stack.enter_async_context(following_keys(live))
                auth = RingAuth(keys.ring)
                info["api_key"] = await ensure_admin_key(live, keys)
            else:
                auth = NoAuth()
                print(NO_AUTH_WARNING.format(where=live.api_host), file=sys.stderr, flush=True)
            encoder = await loop.run_in_executor(
                None, load_encoder, live.encoder, live.encoder_threads
            )
            client = await stack.enter_async_context(Hindsight.connect(live, encoder=encoder))
            if api:
                api_server = await stack.enter_async_context(
                    serving(
                        create_api(live, client=client, auth=auth), live.api_host, live.api_port
                    )
                )
                info["api"] = api_server.url
                info["dashboard"] = f"{api_server.url}/ui"
            if mcp_http:
                from pipeline.interfaces.mcp import MCP_PATH, create_mcp_server

                mcp_app = create_mcp_server(
                    lambda: client,
                    caller=mcp_http_caller(auth),
                    verifier=auth if live.auth else None,
                    url=f"http://{live.api_host}",
                ).streamable_http_app(streamable_http_path=MCP_PATH, host=live.api_host)
                # Next to the API's port, or any free port when the API's is chosen freely.
                mcp_port = live.api_port + 1 if live.api_port else 0
                mcp_server = await stack.enter_async_context(
                    serving(mcp_app, live.api_host, mcp_port, MCP_PATH)
                )
                info["mcp"] = mcp_server.url
            ticker = Ticker(client, interval)
            ticker_task = asyncio.create_task(ticker.run(), name="hindsight-ticker")
            stack.push_async_callback(_cancel, ticker_task)
            write_stack_file(stack_file, info)
            print(f"Hindsight is up (data in {live.data_dir})", flush=True)
            print(f"  Kafka      {live.bootstrap}  topic prefix {live.topic_prefix!r}")
            print(f"  Milvus     {live.milvus_path}")
            if "api" in info:
                print(f"  HTTP API   {info['api']}  (docs {info['api']}/docs)")
                print(f"  dashboard  {info['dashboard']}   metrics {info['api']}/metrics")
            if "mcp" in info:
                print(f"  MCP        {info['mcp']}  (streamable HTTP)")
            print(f"  ticks      every {interval:g}s for namespaces with new turns")
            if live.auth:
                print("  auth       API keys required; local admin key in the stack file")
            else:
                print("  auth       OFF (--no-auth, loopback only)")
            print(f"  stack file {stack_file}  — stop with Ctrl-C", flush=True)
            stopped = asyncio.create_task(stop.wait())
            await asyncio.wait({stopped, ticker_task}, return_when=asyncio.FIRST_COMPLETED)
            if ticker_task.done() and not ticker_task.cancelled() and ticker_task.exception():
                raise HindsightError(f"ticker failed: {ticker_task.exception()!r}")
            stopped.cancel()
            print("stopping…", flush=True)
    finally:
        if stack_file is not None:
            stack_file.unlink(missing_ok=True)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    print("stopped cleanly.", flush=True)
    return 0
