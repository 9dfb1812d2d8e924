"""Importance, decay and activation, following the seeds' formulas, in event time."""

from __future__ import annotations

import math
from datetime import datetime

SECONDS_PER_DAY = 86_400.0
HIGH_IMPORTANCE = 0.8


def confirmation_factor(confirmations: int) -> float:
    """1 + 0.1 per confirmation, capped at 1.5 (three mentions of PostgreSQL -> 1.3)."""
    return min(1.5, 1.0 + 0.1 * max(0, confirmations))


def importance(base: float, confirmations: int) -> float:
    """Base x confirmation factor, kept within [0, 1] so it weighs like a probability."""
    return min(1.0, base * confirmation_factor(confirmations))


def decay_rate(base: float) -> float:
    """λ per day: important memories (base > 0.8) fade five times slower."""
    return 0.01 if base > HIGH_IMPORTANCE else 0.05


def days_between(earlier: datetime, later: datetime) -> float:
    return max(0.0, (later - earlier).total_seconds() / SECONDS_PER_DAY)


def time_factor(base: float, since: datetime, now: datetime) -> float:
    return math.exp(-decay_rate(base) * days_between(since, now))


def activation_at(
    activation: float, activation_at_time: datetime, base: float, now: datetime
) -> float:
    """A(t) = A0 · e^(−λ·t), with t the days since the activation was last set."""
    return activation * time_factor(base, activation_at_time, now)


def reinforce(
    activation: float, activation_at_time: datetime, base: float, now: datetime, weight: float
) -> float:
    """A recall hit or a confirmation adds w·r on top of the decayed activation."""
    return activation_at(activation, activation_at_time, base, now) + weight


def freshness(created: datetime, now: datetime, rate_per_day: float) -> float:
    return math.exp(-rate_per_day * days_between(created, now))
