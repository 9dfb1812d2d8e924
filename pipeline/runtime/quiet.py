"""Known-transient library messages, lowered to DEBUG so a normal start prints no ERROR line.

Each entry names the logger, the message template and why it is harmless. Anything else from
those loggers keeps its level. Installed once per process by the CLI (``hindsight ...``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Transient:
    logger: str
    template: str  # the record's unformatted message (``record.msg``)
    applies: Callable[[logging.LogRecord], bool]
    why: str


def _leader_topic(record: logging.LogRecord) -> bool:
    return any(str(arg).endswith("-__assignor-__leader") for arg in record.args or ())


KNOWN_TRANSIENT: tuple[Transient, ...] = (
    Transient(
        "aiokafka.cluster",
        "Topic %s not found in cluster metadata",
        _leader_topic,
        "Faust creates its assignor's leader topic (<app id>-__assignor-__leader) right after the "
        "consumer subscribes to it, so the first metadata refresh of a fresh stage misses it; the "
        "next refresh finds it.",
    ),
    Transient(
        "faust.assignor.partition_assignor",
        "Ignoring missing topic: %r",
        _leader_topic,
        "The same race, seen by the partition assignor of the first rebalance.",
    ),
)


class _Demote(logging.Filter):
    def __init__(self, entries: tuple[Transient, ...], logger: logging.Logger) -> None:
        super().__init__()
        self._entries = entries
        self._logger = logger

    def filter(self, record: logging.LogRecord) -> bool:
        for entry in self._entries:
            if record.msg == entry.template and entry.applies(record):
                record.levelno = logging.DEBUG
                record.levelname = "DEBUG"
                return self._logger.isEnabledFor(logging.DEBUG)
        return True


def quiet_known_transients() -> None:
    """Install the filters (idempotent)."""
    by_logger: dict[str, list[Transient]] = {}
    for entry in KNOWN_TRANSIENT:
        by_logger.setdefault(entry.logger, []).append(entry)
    for name, entries in by_logger.items():
        logger = logging.getLogger(name)
        if not any(isinstance(f, _Demote) for f in logger.filters):
            logger.addFilter(_Demote(tuple(entries), logger))
