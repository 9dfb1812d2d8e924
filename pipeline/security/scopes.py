"""Scopes: which actions a key may take in which namespaces (pure, no I/O).

A scope is written ``PATTERN:ACTIONS``, e.g. ``team-a:*:recall,retain``. The pattern is split off
at the *last* colon, because namespaces may contain colons themselves (``team-a:alice``).

Patterns, deliberately small so a reader can tell at a glance what a key reaches:
- ``*``            every namespace;
- ``team-a:*``     every namespace starting with ``team-a:`` (a trailing ``*`` is a prefix match;
                   the prefix itself, ``team-a:``, is not a valid namespace and so never matches);
- ``team-a:alice`` exactly that namespace.
A ``*`` anywhere but at the end is refused, as are ``?`` and ``[...]``: no glob surprises.

Actions: ``retain``, ``recall``, ``forget`` (soft), ``erase`` (hard), ``admin``. ``admin`` implies
every other action in the namespaces it covers (and, over ``*``, key management).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import get_args

from schemas.errors import HindsightError
from schemas.keys import Action, ScopeGrant

ACTIONS: tuple[Action, ...] = get_args(Action)

# The namespace alphabet (schemas.events.NAMESPACE_PATTERN) for the literal part of a pattern.
_LITERAL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$")
_PREFIX = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,126}$")


class ScopeError(HindsightError):
    """A scope that cannot be parsed; the message names the part that is wrong."""


@dataclass(frozen=True, order=True)
class Scope:
    """One grant: ``actions`` in every namespace ``pattern`` matches."""

    pattern: str
    actions: frozenset[Action]

    def matches(self, namespace: str) -> bool:
        if self.pattern == "*":
            return True
        if self.pattern.endswith("*"):
            return namespace.startswith(self.pattern[:-1])
        return namespace == self.pattern

    def permits(self, action: Action) -> bool:
        return action in self.actions or "admin" in self.actions

    def __str__(self) -> str:
        return f"{self.pattern}:{','.join(self.ordered_actions())}"

    def ordered_actions(self) -> list[Action]:
        return [a for a in ACTIONS if a in self.actions]

    def grant(self) -> ScopeGrant:
        """The wire form stored in key events."""
        return ScopeGrant(pattern=self.pattern, actions=self.ordered_actions())

    @classmethod
    def from_grant(cls, grant: ScopeGrant) -> Scope:
        """Re-check a stored grant: an event written by other code must obey the grammar too."""
        return cls(check_pattern(grant.pattern), check_actions(grant.actions))


def check_pattern(pattern: str) -> str:
    """Validate a namespace pattern, naming what is wrong."""
    if pattern == "*":
        return pattern
    literal = pattern[:-1] if pattern.endswith("*") else pattern
    if "*" in literal:
        raise ScopeError(f"scope pattern {pattern!r}: '*' is only allowed at the end")
    if pattern.endswith("*"):
        if not _PREFIX.match(literal):
            raise ScopeError(
                f"scope pattern {pattern!r}: the prefix before '*' must be letters, digits and "
                ". _ : @ -, starting with a letter or digit"
            )
    elif not _LITERAL.match(literal):
        raise ScopeError(
            f"scope pattern {pattern!r}: a namespace is 1-128 letters, digits and . _ : @ -, "
            "starting with a letter or digit (or use '*' or a prefix ending in '*')"
        )
    return pattern


def check_actions(names: Iterable[str]) -> frozenset[Action]:
    chosen: set[Action] = set()
    for raw in names:
        name = raw.strip()
        if name not in ACTIONS:
            raise ScopeError(f"scope action {name!r}: expected one of {', '.join(ACTIONS)}")
        chosen.add(name)  # type: ignore[arg-type]
    if not chosen:
        raise ScopeError(f"scope: needs at least one action ({', '.join(ACTIONS)})")
    return frozenset(chosen)


def parse_scope(text: str) -> Scope:
    """``team-a:*:recall,retain`` -> ``Scope("team-a:*", {recall, retain})``."""
    pattern, sep, actions = text.strip().rpartition(":")
    if not sep or not pattern:
        raise ScopeError(
            f"scope {text!r}: expected PATTERN:ACTIONS, e.g. 'team-a:*:recall,retain' or '*:admin'"
        )
    return Scope(check_pattern(pattern), check_actions(actions.split(",")))


def permits(scopes: Iterable[Scope], namespace: str, action: Action) -> bool:
    """Whether any scope grants ``action`` in ``namespace`` (``admin`` implies every action)."""
    return any(scope.matches(namespace) and scope.permits(action) for scope in scopes)


def is_global_admin(scopes: Iterable[Scope]) -> bool:
    """Admin over every namespace: may manage keys and see service details."""
    return any(scope.pattern == "*" and "admin" in scope.actions for scope in scopes)
