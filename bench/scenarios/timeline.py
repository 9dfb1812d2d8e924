"""When each step happens: event times of every step, computed once before a run and validated.

Pure: the timeline is a function of the scenario's text alone (never the wall clock), so the same
file always produces the same event times.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from bench.scenarios.steps import (
    DEFAULT_NAMESPACE_ALIAS,
    DEFAULT_SESSION,
    AdvanceStep,
    ForgetStep,
    RecallStep,
    RetainStep,
    Turn,
)


class Script(Protocol):
    """What the timeline reads from a scenario (``format.Scenario`` is one)."""

    @property
    def start(self) -> datetime: ...

    @property
    def turn_gap(self) -> timedelta: ...

    @property
    def steps(self) -> Sequence[RetainStep | RecallStep | ForgetStep | AdvanceStep]: ...


@dataclass(frozen=True)
class TimedTurn:
    turn: Turn
    at: datetime
    session: str


@dataclass(frozen=True)
class TimedStep:
    index: int  # 1-based, as shown in messages
    step: RetainStep | RecallStep | ForgetStep | AdvanceStep
    at: datetime  # recall/forget time, or the advance target; retain: the last turn's time
    turns: tuple[TimedTurn, ...] = ()
    tick_times: tuple[datetime, ...] = ()
    tick_aliases: tuple[str, ...] = ()


def timeline(scenario: Script) -> Iterable[TimedStep]:
    """Event times for each step; raises ``ValueError`` naming the step if time runs backwards.

    Rules: the clock starts at ``start``; a turn without ``at``/``after`` happens ``turn_gap``
    after the clock; a turn's session defaults to the previous turn's session in the same
    namespace (initially ``s1``); ``forget`` happens ``turn_gap`` after the clock unless ``at``
    is given; ``recall`` asks at the clock (or ``at``) without moving it; ``advance`` moves it.
    """
    clock = scenario.start
    sessions: dict[str, str] = {}
    used: list[str] = []

    def note(alias: str) -> None:
        if alias not in used:
            used.append(alias)

    def forward(index: int, kind: str, moment: datetime) -> datetime:
        if moment < clock:
            raise ValueError(
                f"step {index} ({kind}): event time {moment.isoformat()} is before the scenario "
                f"clock {clock.isoformat()}; time only moves forward"
            )
        return moment

    for index, step in enumerate(scenario.steps, start=1):
        if isinstance(step, RetainStep):
            note(step.namespace)
            timed: list[TimedTurn] = []
            for turn in step.turns:
                if turn.at is not None:
                    clock = forward(index, "retain", turn.at)
                elif turn.after is not None:
                    clock = clock + turn.after
                else:
                    clock = clock + scenario.turn_gap
                session = turn.session or sessions.get(step.namespace, DEFAULT_SESSION)
                sessions[step.namespace] = session
                timed.append(TimedTurn(turn, clock, session))
            yield TimedStep(index, step, clock, turns=tuple(timed))
        elif isinstance(step, RecallStep):
            moment = forward(index, "recall", step.at) if step.at is not None else clock
            yield TimedStep(index, step, moment)
        elif isinstance(step, ForgetStep):
            note(step.namespace)
            clock = (
                forward(index, "forget", step.at)
                if step.at is not None
                else clock + scenario.turn_gap
            )
            yield TimedStep(index, step, clock)
        else:
            target = step.to if step.to is not None else clock + (step.by or timedelta(0))
            if target <= clock:
                raise ValueError(
                    f"step {index} (advance): target {target.isoformat()} is not after the "
                    f"scenario clock {clock.isoformat()}"
                )
            span = (target - clock) / step.ticks
            ticks = tuple(clock + span * (number + 1) for number in range(step.ticks))
            aliases = (
                (step.namespace,) if step.namespace else tuple(used or [DEFAULT_NAMESPACE_ALIAS])
            )
            if step.namespace:
                note(step.namespace)
            clock = target
            yield TimedStep(index, step, target, tick_times=ticks, tick_aliases=aliases)
