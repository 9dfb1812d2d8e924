"""Expectation checks: does a recall's result list meet a ``recall`` step's expectations?

Pure functions over ``Hit`` values (what the runner keeps of each recalled memory), so every
check is unit-tested without a broker.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from bench.scenarios.steps import Match, RecallStep

CURRENT_STATUSES = frozenset({"active", "cold"})


@dataclass(frozen=True)
class Hit:
    """What the runner needs from one recalled memory."""

    id: str
    content: str
    kind: str
    region: str
    status: str = "active"
    score: float = 0.0

    @property
    def current(self) -> bool:
        return self.status in CURRENT_STATUSES

    def show(self) -> str:
        return f"[{self.kind}/{self.region} {self.status} {self.score:.3f}] {self.content}"


def fold(text: str) -> str:
    """Case- and width-insensitive form used by every ``contains`` check."""
    return unicodedata.normalize("NFKC", text).casefold()


def contains_text(hit: Hit, needle: str) -> bool:
    """Whether the hit's content contains ``needle``, compared in ``fold``ed form."""
    return fold(needle) in fold(hit.content)


def _matches(hit: Hit, wanted: Match) -> bool:
    return (
        contains_text(hit, wanted.text)
        and (wanted.kind is None or hit.kind == wanted.kind)
        and (wanted.region is None or hit.region == wanted.region)
    )


def check_recall(step: RecallStep, hits: Sequence[Hit]) -> list[str]:
    """Every way ``hits`` falls short of the step's expectations (empty: it passes).

    ``contains``/``contains_any``/``top_*`` look at the first ``top_k`` current results;
    ``not_contains`` looks at the first ``top_k`` results of any status; ``history_contains``
    looks at every returned non-current result. Two invariants hold for every recall: a
    forgotten memory is never returned, and without ``include_history`` only current memories are.
    """
    failures: list[str] = []
    forgotten = [hit for hit in hits if hit.status == "forgotten"]
    if forgotten:
        failures.append(f"a forgotten memory was returned: {forgotten[0].content!r}")
    if not step.include_history:
        stale = [hit for hit in hits if not hit.current and hit.status != "forgotten"]
        if stale:
            failures.append(
                f"a {stale[0].status} memory was returned as current: {stale[0].content!r}"
            )
    current = [hit for hit in hits if hit.current][: step.top_k]
    window = list(hits[: step.top_k])
    if step.empty and hits:
        failures.append(f"expected no result, got {len(hits)}")
    for wanted in step.contains:
        if not any(_matches(hit, wanted) for hit in current):
            failures.append(f"expected some top-{step.top_k} result to contain {wanted.describe()}")
    if step.contains_any and not any(
        _matches(hit, wanted) for hit in current for wanted in step.contains_any
    ):
        options = ", ".join(wanted.describe() for wanted in step.contains_any)
        failures.append(f"expected some top-{step.top_k} result to contain one of {options}")
    for unwanted in step.not_contains:
        offender = next((hit for hit in window if contains_text(hit, unwanted)), None)
        if offender is not None:
            failures.append(f"expected no top-{step.top_k} result to contain {unwanted!r}")
    top = current[0] if current else None
    if step.top_contains is not None and (top is None or not contains_text(top, step.top_contains)):
        failures.append(f"expected the top result to contain {step.top_contains!r}")
    if step.top_kind is not None and (top is None or top.kind != step.top_kind):
        failures.append(
            f"expected the top result to be kind {step.top_kind!r}, "
            f"got {top.kind if top else 'nothing'!r}"
        )
    if step.top_region is not None and (top is None or top.region != step.top_region):
        failures.append(
            f"expected the top result in region {step.top_region!r}, got "
            f"{top.region if top else 'nothing'!r}"
        )
    history = [hit for hit in hits if not hit.current]
    for wanted_text in step.history_contains:
        if not any(contains_text(hit, wanted_text) for hit in history):
            failures.append(f"expected a superseded (history) result containing {wanted_text!r}")
    return failures
