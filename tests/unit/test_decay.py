"""Importance, decay and activation: the seeds' formulas, computed in event time."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from pipeline.memory.rules import decay

T0 = datetime(2024, 5, 1, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("confirmations", "factor"),
    [(0, 1.0), (1, 1.1), (2, 1.2), (3, 1.3), (4, 1.4), (5, 1.5), (6, 1.5), (100, 1.5), (-2, 1.0)],
)
def test_confirmation_factor_is_one_plus_a_tenth_capped_at_one_and_a_half(
    confirmations: int, factor: float
) -> None:
    assert decay.confirmation_factor(confirmations) == pytest.approx(factor)


def test_importance_is_base_times_confirmation_factor_within_one() -> None:
    assert decay.importance(0.7, 0) == pytest.approx(0.7)
    assert decay.importance(0.7, 1) == pytest.approx(0.77)
    assert decay.importance(0.65, 3) == pytest.approx(0.845)
    assert decay.importance(0.5, 10) == pytest.approx(0.75)
    assert decay.importance(0.9, 2) == 1.0  # 1.08 clipped


def test_importance_grows_with_each_confirmation_until_the_cap() -> None:
    values = [decay.importance(0.5, n) for n in range(8)]

    assert values == sorted(values)
    assert values[5] == values[6] == values[7]


@pytest.mark.parametrize(
    ("base", "rate"),
    [(0.9, 0.01), (0.85, 0.01), (0.81, 0.01), (0.8, 0.05), (0.7, 0.05), (0.5, 0.05), (0.2, 0.05)],
)
def test_decay_rate_is_slow_only_above_point_eight(base: float, rate: float) -> None:
    assert decay.decay_rate(base) == rate


def test_days_between_is_fractional_and_never_negative() -> None:
    assert decay.days_between(T0, T0 + timedelta(hours=36)) == pytest.approx(1.5)
    assert decay.days_between(T0, T0) == 0.0
    assert decay.days_between(T0 + timedelta(days=3), T0) == 0.0


def test_time_factor_follows_exp_minus_lambda_t() -> None:
    later = T0 + timedelta(days=30)

    assert decay.time_factor(0.9, T0, later) == pytest.approx(math.exp(-0.01 * 30))
    assert decay.time_factor(0.7, T0, later) == pytest.approx(math.exp(-0.05 * 30))
    assert decay.time_factor(0.7, T0, T0) == 1.0


def test_activation_decays_in_event_time() -> None:
    assert decay.activation_at(0.7, T0, 0.7, T0) == pytest.approx(0.7)
    assert decay.activation_at(0.7, T0, 0.7, T0 + timedelta(days=10)) == pytest.approx(
        0.7 * math.exp(-0.5)
    )
    assert decay.activation_at(0.9, T0, 0.9, T0 + timedelta(days=10)) == pytest.approx(
        0.9 * math.exp(-0.1)
    )


def test_important_memories_fade_slower() -> None:
    later = T0 + timedelta(days=100)

    preference = decay.activation_at(1.0, T0, 0.9, later)
    fact = decay.activation_at(1.0, T0, 0.7, later)

    assert preference > fact
    assert preference / fact == pytest.approx(math.exp((0.05 - 0.01) * 100))


def test_activation_never_grows_when_time_runs_backwards() -> None:
    # An out-of-order event earlier than the last activation must not inflate it.
    assert decay.activation_at(0.7, T0, 0.7, T0 - timedelta(days=5)) == 0.7


def test_reinforcement_adds_the_weight_on_top_of_the_decayed_activation() -> None:
    later = T0 + timedelta(days=20)
    decayed = decay.activation_at(0.7, T0, 0.7, later)

    assert decay.reinforce(0.7, T0, 0.7, later, 0.2) == pytest.approx(decayed + 0.2)
    assert decay.reinforce(0.7, T0, 0.7, T0, 0.2) == pytest.approx(0.9)


def test_repeated_reinforcement_accumulates() -> None:
    activation, at = 0.5, T0
    for day in range(1, 6):
        now = T0 + timedelta(days=day)
        activation = decay.reinforce(activation, at, 0.5, now, 0.2)
        at = now

    expected = 0.5
    for _ in range(5):
        expected = expected * math.exp(-0.05) + 0.2
    assert activation == pytest.approx(expected)


def test_decay_depends_only_on_event_times_not_the_wall_clock() -> None:
    ancient = datetime(1999, 1, 1, tzinfo=UTC)

    assert decay.activation_at(0.7, ancient, 0.7, ancient + timedelta(days=1)) == pytest.approx(
        decay.activation_at(0.7, T0, 0.7, T0 + timedelta(days=1))
    )


def test_freshness_uses_its_own_rate() -> None:
    assert decay.freshness(T0, T0, 0.02) == 1.0
    assert decay.freshness(T0, T0 + timedelta(days=50), 0.02) == pytest.approx(math.exp(-1.0))
    assert decay.freshness(T0 + timedelta(days=1), T0, 0.02) == 1.0
