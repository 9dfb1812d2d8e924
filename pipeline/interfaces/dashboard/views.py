"""What the dashboard pages show, as pure functions of records, change-feed entries and log
messages (no I/O: the routes fetch, these decide; unit-tested with plain values).
"""

from __future__ import annotations

import base64
import binascii
import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import orjson

from pipeline.memory.rules.decay import activation_at
from pipeline.views.log_reader import LogMessage
from schemas.codec import decode_event
from schemas.errors import InvalidEvent
from schemas.events import CommandIssued, InputEvent, MemoriesRecalled, TurnRecorded
from schemas.memory import (
    KINDS,
    REGIONS,
    DeadLetter,
    MemoryChanged,
    MemoryRecord,
    SourceTurn,
    Status,
)

STATUSES: tuple[Status, ...] = ("active", "cold", "superseded", "forgotten")
# The table's default: what recall can return. A forgotten memory leaves it.
RECALLABLE: frozenset[str] = frozenset({"active", "cold"})
STATUS_FILTERS = ("recallable", "all", *STATUSES)


# -- the memory table ------------------------------------------------------------------------
@dataclass(frozen=True)
class MemoryFilter:
    """The table's filters; ``q`` matches content and entities, case-insensitive."""

    status: str = "recallable"
    kind: str = ""
    region: str = ""
    q: str = ""

    @classmethod
    def parse(cls, status: str, kind: str, region: str, q: str) -> MemoryFilter:
        return cls(
            status=status if status in STATUS_FILTERS else "recallable",
            kind=kind if kind in KINDS else "",
            region=region if region in REGIONS else "",
            q=q.strip()[:200],
        )

    def statuses(self) -> frozenset[str]:
        if self.status == "recallable":
            return RECALLABLE
        if self.status == "all":
            return frozenset(STATUSES)
        return frozenset({self.status})

    def matches(
        self, status: str, kind: str, region: str, content: str, entities: Iterable[str] = ()
    ) -> bool:
        if status not in self.statuses():
            return False
        if self.kind and kind != self.kind:
            return False
        if self.region and region != self.region:
            return False
        if self.q:
            needle = self.q.casefold()
            haystack = [content, *entities]
            return any(needle in text.casefold() for text in haystack)
        return True

    def query(self) -> dict[str, str]:
        return {"status": self.status, "kind": self.kind, "region": self.region, "q": self.q}


@dataclass(frozen=True)
class Row:
    """One table row: from a record, or from a change-feed entry before the record arrives."""

    id: str
    namespace: str
    created: datetime
    kind: str
    region: str
    status: str
    importance: float
    activation: float
    content: str
    sources: int

    @classmethod
    def of_record(cls, record: MemoryRecord) -> Row:
        return cls(
            record.id,
            record.namespace,
            record.created_at,
            record.kind,
            record.region,
            record.status,
            record.importance,
            record.activation,
            record.content,
            len(record.provenance),
        )

    @classmethod
    def of_change(cls, change: MemoryChanged, record: MemoryRecord | None) -> Row:
        # The change carries the newest status and scores; the record (when the view has it) the
        # creation time and provenance.
        return cls(
            change.memory_id,
            change.namespace,
            record.created_at if record is not None else change.event_time,
            change.kind,
            change.region,
            change.status,
            change.importance,
            change.activation,
            change.content,
            len(record.provenance) if record is not None else 0,
        )


@dataclass(frozen=True)
class Page:
    rows: list[Row]
    total: int
    offset: int
    limit: int

    @property
    def next_offset(self) -> int | None:
        return self.offset + self.limit if self.offset + self.limit < self.total else None

    @property
    def previous_offset(self) -> int | None:
        return max(0, self.offset - self.limit) if self.offset > 0 else None


def memory_page(
    records: Iterable[MemoryRecord], where: MemoryFilter, offset: int, limit: int
) -> Page:
    """Newest first, filtered, one page."""
    kept = [r for r in records if where.matches(r.status, r.kind, r.region, r.content, r.entities)]
    kept.sort(key=lambda r: (r.created_at, r.id), reverse=True)
    offset = max(0, offset)
    return Page([Row.of_record(r) for r in kept[offset : offset + limit]], len(kept), offset, limit)


@dataclass(frozen=True)
class Counts:
    total: int
    by_status: dict[str, int]
    by_kind: dict[str, int]
    by_region: dict[str, int]


def counts(records: Iterable[MemoryRecord]) -> Counts:
    status: Counter[str] = Counter()
    kind: Counter[str] = Counter()
    region: Counter[str] = Counter()
    total = 0
    for record in records:
        total += 1
        status[record.status] += 1
        kind[record.kind] += 1
        region[record.region] += 1
    return Counts(
        total,
        {s: status[s] for s in STATUSES if status[s]},
        {k: kind[k] for k in KINDS if kind[k]},
        {r: region[r] for r in REGIONS if region[r]},
    )


def live_action(change: MemoryChanged, where: MemoryFilter) -> str:
    """What an open table does with a change: ``upsert`` its row or ``remove`` it."""
    if change.change == "erased":
        return "remove"
    return (
        "upsert"
        if where.matches(change.status, change.kind, change.region, change.content)
        else "remove"
    )


# -- a memory's page -------------------------------------------------------------------------
@dataclass(frozen=True)
class ActivationPoint:
    at: datetime
    activation: float
    label: str


@dataclass(frozen=True)
class Plot:
    """An SVG polyline (activation over time, decaying between changes) with its points."""

    width: int
    height: int
    path: str
    dots: list[tuple[float, float, str]]
    start: datetime
    end: datetime
    peak: float


# Changes that set a memory's activation at their event time (the memory rules re-base it);
# the others (links, cooling, forgetting) leave the curve as it was.
ACTIVATION_CHANGES = frozenset(
    {"created", "merged", "confirmed", "superseded", "reinforced", "reactivated"}
)


def activation_points(
    record: MemoryRecord, changes: Sequence[MemoryChanged]
) -> list[ActivationPoint]:
    """The activation each re-basing change set, plus the record's latest, in time order."""
    points: dict[tuple[datetime, str], ActivationPoint] = {
        (c.event_time, c.change): ActivationPoint(c.event_time, c.activation, c.change)
        for c in changes
        if c.memory_id == record.id and c.change in ACTIVATION_CHANGES
    }
    points.setdefault(
        (record.activation_at, "now"),
        ActivationPoint(record.activation_at, record.activation, "latest"),
    )
    return sorted(points.values(), key=lambda p: (p.at, p.label))


def activation_plot(
    base_importance: float,
    points: Sequence[ActivationPoint],
    width: int = 560,
    height: int = 140,
    samples: int = 24,
) -> Plot | None:
    """Between two changes the activation decays as the memory rules say (A·e^(−λ·days))."""
    if not points:
        return None
    start, last = points[0].at, points[-1].at
    span = max((last - start).total_seconds(), 0.0)
    # Show some decay after the last change: a quarter of the span, at least a day.
    end = last + timedelta(seconds=max(span * 0.25, 86_400.0))
    curve: list[tuple[datetime, float]] = []
    for index, point in enumerate(points):
        upto = points[index + 1].at if index + 1 < len(points) else end
        steps = samples if upto > point.at else 1
        for step in range(steps):
            moment = point.at + (upto - point.at) * (step / steps)
            curve.append(
                (moment, activation_at(point.activation, point.at, base_importance, moment))
            )
    curve.append((end, activation_at(points[-1].activation, last, base_importance, end)))
    peak = max(max(value for _, value in curve), 1e-9)
    total = max((end - start).total_seconds(), 1.0)
    pad = 6.0

    def x(moment: datetime) -> float:
        return round(pad + (width - 2 * pad) * (moment - start).total_seconds() / total, 2)

    def y(value: float) -> float:
        return round(height - pad - (height - 2 * pad) * value / peak, 2)

    path = " ".join(f"{'M' if i == 0 else 'L'}{x(m)},{y(v)}" for i, (m, v) in enumerate(curve))
    dots = [
        (x(p.at), y(p.activation), f"{p.label} {p.at:%Y-%m-%d %H:%M} A={p.activation:.3f}")
        for p in points
    ]
    return Plot(width, height, path, dots, start, end, peak)


def supersede_links(
    record: MemoryRecord,
    lookup: Callable[[str], MemoryRecord | None],
    namespace_records: Iterable[MemoryRecord],
    limit: int = 32,
) -> tuple[list[str], list[str]]:
    """(what this memory replaced, oldest first; what replaced it, oldest first)."""
    successors: list[str] = []
    seen = {record.id}
    current: MemoryRecord | None = record
    while current is not None and len(successors) < limit:
        successor = current.superseded_by or next(
            (a.memory_id for a in current.associations if a.relation == "superseded_by"), None
        )
        if successor is None or successor in seen:
            break
        successors.append(successor)
        seen.add(successor)
        current = lookup(successor)
    replaced_by: dict[str, str] = {
        other.id: other.superseded_by
        for other in namespace_records
        if other.superseded_by is not None
    }
    for association in record.associations:
        if association.relation == "supersedes":
            replaced_by.setdefault(association.memory_id, record.id)
    predecessors: list[str] = []
    target = record.id
    while len(predecessors) < limit:
        older = sorted(i for i, newer in replaced_by.items() if newer == target and i not in seen)
        if not older:
            break
        predecessors.insert(0, older[0])
        seen.add(older[0])
        target = older[0]
    return predecessors, successors


@dataclass(frozen=True)
class FeedEntry:
    change: MemoryChanged
    partition: int
    offset: int


def feed_entries(messages: Iterable[LogMessage], memory_id: str) -> list[FeedEntry]:
    """Change-feed entries that touched ``memory_id`` (as the subject or as a related id)."""
    found: list[FeedEntry] = []
    for message in messages:
        change = decode_change(message.value)
        if change is not None and (
            memory_id == change.memory_id or memory_id in change.related_ids
        ):
            found.append(FeedEntry(change, message.partition, message.offset))
    return found


def decode_change(value: bytes | None) -> MemoryChanged | None:
    if value is None:
        return None
    try:
        return MemoryChanged.model_validate(orjson.loads(value))
    except (orjson.JSONDecodeError, ValueError):
        return None


@dataclass(frozen=True)
class SourceView:
    """A provenance turn with what the log holds at its position."""

    source: SourceTurn
    text: str | None
    note: str


def source_view(source: SourceTurn, message: LogMessage | None) -> SourceView:
    if source.offset is None:
        return SourceView(source, None, "log position not recorded (a record from before v0.2)")
    if message is None:
        return SourceView(source, None, "no longer in the log (retention, compaction or erase)")
    try:
        event = decode_event(message.value)
    except InvalidEvent as error:
        return SourceView(source, None, f"unreadable at that position: {error}")
    if not isinstance(event, TurnRecorded) or event.event_id != source.event_id:
        return SourceView(source, None, "a different event sits at that position")
    return SourceView(source, event.text, "")


# -- a namespace's timeline ------------------------------------------------------------------
@dataclass
class TimelineItem:
    at: datetime
    event: InputEvent
    message: LogMessage
    formed: list[MemoryRecord] = field(default_factory=list)

    @property
    def what(self) -> str:
        if isinstance(self.event, TurnRecorded):
            return "turn"
        if isinstance(self.event, CommandIssued):
            return self.event.command
        return "recall"


def timeline(
    messages: Iterable[LogMessage], namespace: str, records: Iterable[MemoryRecord]
) -> list[TimelineItem]:
    """The namespace's input events in event time, each turn with the memories it formed."""
    formed: dict[str, list[MemoryRecord]] = {}
    for record in records:
        for source in record.provenance:
            formed.setdefault(source.event_id, []).append(record)
    items: list[TimelineItem] = []
    for message in messages:
        try:
            event = decode_event(message.value)
        except InvalidEvent:
            continue  # the dead letters show it
        if event.namespace != namespace:
            continue  # another namespace on the same partition
        item = TimelineItem(event.event_time, event, message)
        if isinstance(event, TurnRecorded):
            item.formed = sorted(formed.get(event.event_id, []), key=lambda r: r.id)
        items.append(item)
    items.sort(key=lambda i: (i.at, i.message.topic, i.message.offset))
    return items


def recall_summary(event: MemoriesRecalled) -> str:
    return f"{len(event.hits)} memories for “{event.query[:80]}”"


# -- dead letters ----------------------------------------------------------------------------
@dataclass(frozen=True)
class DeadLetterView:
    letter: DeadLetter
    partition: int
    offset: int
    timestamp_ms: int
    original: bytes
    text: str | None  # the original bytes as UTF-8, when they are

    @property
    def encoding(self) -> str:
        return "utf-8" if self.text is not None else "base64"

    @property
    def editable(self) -> str:
        return self.text if self.text is not None else self.letter.original_value_b64


def dead_letter_view(message: LogMessage) -> DeadLetterView | None:
    try:
        letter = DeadLetter.model_validate(orjson.loads(message.value or b""))
        original = base64.b64decode(letter.original_value_b64, validate=True)
    except (orjson.JSONDecodeError, ValueError, binascii.Error):
        return None
    try:
        text: str | None = original.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    return DeadLetterView(
        letter, message.partition, message.offset, message.timestamp_ms, original, text
    )


def corrected_bytes(value: str, encoding: str) -> bytes:
    """The operator's corrected event as bytes; ``InvalidEvent`` names what is wrong."""
    if encoding == "base64":
        try:
            return base64.b64decode(value.strip(), validate=True)
        except (binascii.Error, ValueError) as error:
            raise InvalidEvent(f"not base64: {error}", "value", "republish") from error
    return value.strip().encode("utf-8")


def newest_first(views: Iterable[DeadLetterView]) -> list[DeadLetterView]:
    return sorted(views, key=lambda v: (v.timestamp_ms, v.partition, v.offset), reverse=True)


# -- formatting ------------------------------------------------------------------------------
def short_number(value: float) -> str:
    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    return f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
