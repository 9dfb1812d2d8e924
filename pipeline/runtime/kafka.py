"""The one place Kafka security settings become client arguments.

Every producer, consumer and admin client takes ``**client_kwargs(settings.kafka)``, so a cluster
with SASL/SCRAM (and TLS) needs nothing but the ``HINDSIGHT_KAFKA_*`` settings.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaError
from aiokafka.helpers import create_ssl_context

from pipeline.runtime.settings import KafkaSecurity

if TYPE_CHECKING:
    import faust

PLAINTEXT = KafkaSecurity()


def client_kwargs(security: KafkaSecurity | None) -> dict[str, Any]:
    """aiokafka keyword arguments for ``security`` (none for plaintext)."""
    if security is None or security.protocol == "PLAINTEXT":
        return {}
    kwargs: dict[str, Any] = {"security_protocol": security.protocol}
    if security.uses_sasl:
        kwargs["sasl_mechanism"] = security.sasl_mechanism
        kwargs["sasl_plain_username"] = security.sasl_username
        kwargs["sasl_plain_password"] = security.sasl_password
    if security.uses_tls:
        kwargs["ssl_context"] = create_ssl_context(cafile=security.ssl_cafile)
    return kwargs


def faust_credentials(
    security: KafkaSecurity | None,
) -> faust.SASLCredentials | faust.SSLCredentials | None:
    """The same settings for a Faust app: ``faust.App(..., broker_credentials=...)``."""
    import faust  # only the prepare stage runs Faust; clients need not load it

    if security is None or security.protocol == "PLAINTEXT":
        return None
    context = create_ssl_context(cafile=security.ssl_cafile) if security.uses_tls else None
    if security.uses_sasl:
        return faust.SASLCredentials(
            username=security.sasl_username,
            password=security.sasl_password,
            mechanism=security.sasl_mechanism,
            ssl_context=context,
        )
    return faust.SSLCredentials(context)


async def stop_consumer(consumer: AIOKafkaConsumer, timeout_s: float = 60.0) -> None:
    """Stop an aiokafka consumer even when its fetcher swallowed the cancellation.

    When the assignment changes, aiokafka's fetch routine cancels its fetch tasks and awaits them
    under ``suppress(CancelledError)``; a ``stop()`` that lands in that moment is swallowed with
    them, the routine carries on and ``stop()`` waits for it forever (aio-libs/aiokafka#983).
    Seen here as ``hindsight replay`` hanging after its last, empty partition. The cancellation is
    delivered again until the routine ends; bounded by ``timeout_s``.
    """
    loop = asyncio.get_running_loop()
    stopping = asyncio.ensure_future(consumer.stop())
    deadline = loop.time() + timeout_s
    while not stopping.done():
        await asyncio.wait({stopping}, timeout=0.5)
        fetcher = getattr(consumer, "_fetcher", None)
        fetch_task = getattr(fetcher, "_fetch_task", None)
        if not stopping.done() and fetch_task is not None and not fetch_task.done():
            fetch_task.cancel()
        if not stopping.done() and loop.time() > deadline:
            stopping.cancel()
            raise KafkaError(f"consumer did not stop within {timeout_s:.0f}s")
    stopping.result()
