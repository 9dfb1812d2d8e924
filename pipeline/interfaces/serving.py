"""Serving ASGI apps (the HTTP API, MCP over HTTP, the dashboard) inside our own event loop.

uvicorn normally owns the process's signals; ``hindsight up`` runs several servers at once, so
signals stay with the owner and each server is started on a socket bound up front (port 0 works
and the real port is known before anything is announced).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import uvicorn

from schemas.errors import HindsightError


class EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves signal handling to its owner (who may run several)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind before serving, so port 0 works and the real port is known up front."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.set_inheritable(True)
    return sock


def bound_url(sock: socket.socket, path: str = "") -> str:
    host, port = sock.getsockname()[:2]
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}{path}"


# Open streams (the dashboard's server-sent events) never end by themselves: on stop, uvicorn
# waits this long for them, then cancels them.
GRACEFUL_SHUTDOWN_S = 3


def embedded_server(app: Any) -> EmbeddedServer:
    config = uvicorn.Config(
        app,
        lifespan="on",
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
    )
    return EmbeddedServer(config)


async def wait_started(server: uvicorn.Server, task: asyncio.Task[None]) -> None:
    """Return once ``server`` accepts connections; raise if it stopped during start-up."""
    while not server.started:
        if task.done():
            task.result()  # re-raises the start-up failure
            raise HindsightError("HTTP server stopped during start-up")
        await asyncio.sleep(0.05)


@dataclass(frozen=True)
class Served:
    """A running server: its URL and the task that ends when it stops (or fails)."""

    url: str
    task: asyncio.Task[None]


@contextlib.asynccontextmanager
async def serving(app: Any, host: str, port: int, path: str = "") -> AsyncIterator[Served]:
    """Serve ``app`` on ``host:port`` (0 = any free port) for the block."""
    sock = bind_socket(host, port)
    server = embedded_server(app)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await wait_started(server, task)
        yield Served(bound_url(sock, path), task)
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 15)
        sock.close()


async def serve_until_signal(
    app: Any, host: str, port: int, announce: Callable[[str], str], path: str = ""
) -> None:
    """Serve an ASGI app until SIGINT/SIGTERM, printing ``announce(url)`` once it is up.

    A server that fails while running ends this too, with its error.
    """
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        async with serving(app, host, port, path) as served:
            print(announce(served.url), flush=True)
            stopped = asyncio.create_task(stop.wait())
            await asyncio.wait({stopped, served.task}, return_when=asyncio.FIRST_COMPLETED)
            stopped.cancel()
            if served.task.done():
                served.task.result()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
