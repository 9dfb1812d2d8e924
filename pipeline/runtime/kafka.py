"""The one place Kafka security settings become client arguments.

Every producer, consumer and admin client takes ``**client_kwargs(settings.kafka)``, so a cluster
with SASL/SCRAM (and TLS) needs nothing but the ``HINDSIGHT_KAFKA_*`` settings.
"""

from __future__ import annotations

from typing import Any

import faust
from aiokafka.helpers import create_ssl_context

from pipeline.runtime.settings import KafkaSecurity

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
