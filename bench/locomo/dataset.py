"""Read a file in the LoCoMo format into turns (as Hindsight would receive them) and questions.

The file is read by path at run time; nothing from it is copied into the project.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from schemas.errors import HindsightError

CATEGORY_NAMES: dict[int, str] = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}
ADVERSARIAL = 5

# "D" optionally followed by a stray colon ("D:11:26"), then session and turn numbers.
_EVIDENCE = re.compile(r"D:?(\d+):(\d+)")
_SESSION_KEY = re.compile(r"session_(\d+)")
_SESSION_TIME_FORMAT = "%I:%M %p on %d %B, %Y"


class DatasetError(HindsightError):
    pass


@dataclass(frozen=True)
class LocomoTurn:
    sample_id: str
    session: int
    dia_id: str
    speaker: str
    text: str
    event_time: datetime

    @property
    def event_id(self) -> str:
        # Deterministic, so a re-run publishes the same events (idempotent on replay).
        return f"{self.sample_id}:{self.dia_id}"

    @property
    def session_id(self) -> str:
        return f"session_{self.session}"


@dataclass(frozen=True)
class Question:
    sample_id: str
    index: int
    question: str
    category: int
    evidence: tuple[str, ...]
    answer: str | None = None
    adversarial_answer: str | None = None

    @property
    def adversarial(self) -> bool:
        return self.category == ADVERSARIAL


@dataclass(frozen=True)
class Conversation:
    sample_id: str
    speakers: tuple[str, ...]
    turns: tuple[LocomoTurn, ...]
    questions: tuple[Question, ...]
    skipped_questions: int = 0

    @property
    def namespace(self) -> str:
        return namespace_for(self.sample_id)

    @property
    def recall_at(self) -> datetime:
        """A moment just after the last session, so every turn is in the past."""
        return max(turn.event_time for turn in self.turns) + timedelta(minutes=1)

    def unknown_evidence(self) -> list[str]:
        """Gold ids that name no turn of the conversation (such questions can never score 1)."""
        known = {turn.dia_id for turn in self.turns}
        return [d for q in self.questions for d in q.evidence if d not in known]


def namespace_for(sample_id: str) -> str:
    cleaned = re.sub(r"[^A-Za-z0-9._:@-]", "-", sample_id)
    return f"locomo-{cleaned}"[:128]


def normalise_dia_id(token: str) -> str | None:
    """'D:11:26' -> 'D11:26', 'D30:05' -> 'D30:5'; None when the token names no turn."""
    match = _EVIDENCE.fullmatch(token.strip())
    if match is None:
        return None
    return f"D{int(match.group(1))}:{int(match.group(2))}"


def normalise_evidence(raw: Iterable[object]) -> tuple[str, ...]:
    """Split joined strings ("D8:6; D9:17"), fix each id, drop unparseable ones and repeats."""
    seen: dict[str, None] = {}
    for item in raw:
        for token in re.split(r"[;,\s]+", str(item)):
            dia_id = normalise_dia_id(token) if token else None
            if dia_id is not None:
                seen.setdefault(dia_id, None)
    return tuple(seen)


def parse_session_time(raw: str) -> datetime:
    """'1:56 pm on 8 May, 2023' -> 2023-05-08 13:56 UTC (the dataset gives no zone)."""
    text = " ".join(raw.split())
    try:
        parsed = datetime.strptime(text, _SESSION_TIME_FORMAT)
    except ValueError as error:
        raise DatasetError(f"session date_time: cannot parse {raw!r}") from error
    return parsed.replace(tzinfo=UTC)


def turn_text(turn: Mapping[str, Any]) -> str:
    text = str(turn.get("text") or "").strip()
    caption = str(turn.get("blip_caption") or "").strip()
    if caption:
        text = f"{text} [image: {caption}]".strip()
    return text


def _session_numbers(conversation: Mapping[str, Any]) -> list[int]:
    numbers = []
    for key, value in conversation.items():
        match = _SESSION_KEY.fullmatch(key)
        if match and isinstance(value, list):
            numbers.append(int(match.group(1)))
    return sorted(numbers)


def parse_sample(sample: Mapping[str, Any]) -> Conversation:
    sample_id = str(sample.get("sample_id") or "")
    if not sample_id:
        raise DatasetError("sample_id: missing")
    conversation = sample.get("conversation")
    if not isinstance(conversation, Mapping):
        raise DatasetError(f"{sample_id}: conversation missing")
    turns: list[LocomoTurn] = []
    for number in _session_numbers(conversation):
        raw_turns = [t for t in conversation[f"session_{number}"] if turn_text(t)]
        if not raw_turns:
            continue
        raw_time = conversation.get(f"session_{number}_date_time")
        if not raw_time:
            raise DatasetError(f"{sample_id}: session_{number}_date_time missing")
        start = parse_session_time(str(raw_time))
        for position, raw in enumerate(raw_turns):
            raw_id = str(raw.get("dia_id") or "")
            turns.append(
                LocomoTurn(
                    sample_id=sample_id,
                    session=number,
                    dia_id=normalise_dia_id(raw_id) or raw_id,
                    speaker=str(raw.get("speaker") or "unknown"),
                    text=turn_text(raw),
                    # One second apart keeps the order inside a session without touching the next.
                    event_time=start + timedelta(seconds=position),
                )
            )
    if not turns:
        raise DatasetError(f"{sample_id}: no turns")
    questions: list[Question] = []
    skipped = 0
    for index, raw_qa in enumerate(sample.get("qa") or []):
        evidence = normalise_evidence(raw_qa.get("evidence") or [])
        category = raw_qa.get("category")
        if not evidence or not isinstance(category, int):
            skipped += 1
            continue
        answer = raw_qa.get("answer")
        adversarial = raw_qa.get("adversarial_answer")
        questions.append(
            Question(
                sample_id=sample_id,
                index=index,
                question=str(raw_qa.get("question") or ""),
                category=category,
                evidence=evidence,
                answer=None if answer is None else str(answer),
                adversarial_answer=None if adversarial is None else str(adversarial),
            )
        )
    speakers = tuple(
        str(conversation[key]) for key in ("speaker_a", "speaker_b") if conversation.get(key)
    )
    return Conversation(sample_id, speakers, tuple(turns), tuple(questions), skipped)


def load_locomo(path: str | Path, limit: int | None = None) -> list[Conversation]:
    with Path(path).open("rb") as handle:
        data = json.load(handle)
    if not isinstance(data, list):
        raise DatasetError(f"{path}: expected a list of samples")
    samples: Sequence[Mapping[str, Any]] = data if limit is None else data[:limit]
    return [parse_sample(sample) for sample in samples]
