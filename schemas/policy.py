"""Per-namespace policy: redaction settings, set by a command on the input log.

Redaction is opt-in per namespace. The policy is a ``CommandIssued`` with ``command:
"set_policy"`` *in the namespace's own order* (keyed by namespace on the input log, like turns):
every turn after it follows it, every turn before it does not, and replay reproduces exactly that
(I2) with no config file to keep in step.

``prepare`` keeps each namespace's policy history (:class:`NamespacePolicies`, every policy with
the input position it took effect at) in the compacted ``hindsight.policies.v1`` topic, written
before the prepared events that used it. A ``prepare`` worker that takes a partition over, or a
batch prepared twice after a crash, reads the policy in force *at each turn's offset* from that
history, so the result does not depend on which worker prepared it or when.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

POLICIES_SCHEMA_VERSION: Final = 1

PiiKind = Literal["SECRET", "EMAIL", "CN_ID", "CARD", "IBAN", "PHONE"]
ALL_KINDS: list[PiiKind] = ["SECRET", "EMAIL", "CN_ID", "CARD", "IBAN", "PHONE"]


class RedactionSettings(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = False
    kinds: list[PiiKind] = Field(default_factory=lambda: list(ALL_KINDS), min_length=1)
    phone_region: str | None = Field(
        default=None,
        pattern=r"^[A-Z]{2}$",
        description="ISO 3166 region for national phone formats; default: international only",
    )


class PolicyEntry(BaseModel):
    """One policy and the input position from which it holds (its own ``set_policy`` command)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    partition: int = Field(ge=0)
    offset: int = Field(ge=0)
    event_id: str
    redaction: RedactionSettings


class NamespacePolicies(BaseModel):
    """A namespace's policy history, oldest first: the value of its key on the policies topic."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    schema_version: Literal[1] = POLICIES_SCHEMA_VERSION
    event_type: Literal["NamespacePolicies"] = "NamespacePolicies"
    namespace: str = Field(min_length=1)
    entries: list[PolicyEntry] = Field(default_factory=list)
