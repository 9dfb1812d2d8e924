"""How likely two statements give values of one single-valued attribute, by the attribute
model's distributions recorded in their slots (``Slot.attribute_shares``).

One reading of "the same attribute" for both stages: ``consolidate`` supersedes by it
(``slots.same_attribute``) and recall leaves out a replaced answer by it
(``scoring.replaced_answers``). A module of its own, on the schemas alone, so that recall does
not import the slot rules (which import recall's time phrases).
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.memory import Slot


@dataclass(frozen=True)
class OneAttribute:
    """The attribute two statements both give a value of, and why it is read so."""

    attribute: str
    why: str  # "chance 0.45", or the two argmaxes' probabilities "0.62, 0.71"


def one_attribute(
    first: Slot, second: Slot, chance_floor: float, probability_floor: float
) -> OneAttribute | None:
    """The single-valued attribute both statements give a value of, or None.

    By :func:`same_attribute_chance` at ``chance_floor`` where both slots record distributions;
    in records of older builds, by the argmaxes: the same single-valued attribute, each at least
    ``probability_floor`` sure (hobbies, friends or allergies add up: a new one replaces none).
    ``consolidate`` reads it at the update rule's floors, recall at its own lower ones."""
    chance = same_attribute_chance(first, second)
    if chance is not None:
        total, attribute = chance
        return OneAttribute(attribute, f"chance {total:.2f}") if total >= chance_floor else None
    if first.attribute is None or first.attribute != second.attribute:
        return None
    if not (first.single_valued and second.single_valued):
        return None
    if min(first.attribute_probability, second.attribute_probability) < probability_floor:
        return None
    why = f"{first.attribute_probability:.2f}, {second.attribute_probability:.2f}"
    return OneAttribute(first.attribute, why)


def same_attribute_chance(first: Slot, second: Slot) -> tuple[float, str] | None:
    """How likely the two statements give values of one single-valued attribute, by the model's
    recorded distributions: Σ p₁(a)·p₂(a) over the single-valued attributes both list, with the
    attribute that gives most of it. None when either slot has no list (a record of a build
    before it): the argmax rule decides there, so an old log replays as it decided.

    Two argmaxes at 0.55 and 0.7 of one attribute say less than the distributions: neighbouring
    attributes (the commute / the car) share their mass, and on a wording it never saw the
    model's mass moves between them while its sum over them holds."""
    if first.attribute_shares is None or second.attribute_shares is None:
        return None
    theirs = {s.attribute: s.probability for s in second.attribute_shares if s.single_valued}
    terms = {
        s.attribute: s.probability * theirs[s.attribute]
        for s in first.attribute_shares
        if s.single_valued and s.attribute in theirs
    }
    if not terms:
        return 0.0, ""
    best = max(terms, key=lambda a: (terms[a], a))  # ties by name: the same in every process
    return sum(terms.values()), best
