"""Per-namespace policy as a command event on the input log (a proposal, ready to register).

Redaction is opt-in per namespace. Making the policy an event *in the namespace's own order*
(keyed by namespace on the input log, like turns) means: every turn after the policy event is
redacted, every turn before it is not, and replay reproduces exactly that (I2) with no config
file to keep in step. ``prepare`` folds these events into a per-namespace policy table and
calls ``pipeline.memory.rules.redaction.redact`` with it before extraction and embedding.

Not yet in ``schemas.events.EVENT_TYPES``: the one-log rewrite registers it with the input log's
other event types.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.events import EventId, EventTime, Namespace

NAMESPACE_POLICY_VERSION: Final = 1

PiiKind = Literal["SECRET", "EMAIL", "CN_ID", "CARD", "IBAN", "PHONE"]
ALL_KINDS: list[PiiKind] = ["SECRET", "EMAIL", "CN_ID", "CARD", "IBAN", "PHONE"]


class RedactionSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = False
    kinds: list[PiiKind] = Field(
        default_factory=lambda: list(ALL_KINDS),
        min_length=1,
    )
    phone_region: str | None = Field(
        default=None,
        pattern=r"^[A-Z]{2}$",
        description="ISO 3166 region for national phone formats; default: international only",
    )


class NamespacePolicySet(BaseModel):
    """From this event on, the namespace's turns follow this policy (replaces the previous)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    schema_version: Literal[1] = NAMESPACE_POLICY_VERSION
    event_type: Literal["NamespacePolicySet"] = "NamespacePolicySet"
    event_id: EventId
    namespace: Namespace
    event_time: EventTime
    redaction: RedactionSettings = Field(default_factory=RedactionSettings)
    set_by: str | None = Field(default=None, max_length=200, description="key id that set it")
