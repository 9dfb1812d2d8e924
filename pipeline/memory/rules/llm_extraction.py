"""LLM extraction, the pure half: the prompt, the response parser, and applying a recorded result.

No I/O here. ``pipeline/ingest/extractions.py`` calls the model and records what it answered as
an ``ExtractionRecorded`` event before use (I2); ``prepare`` then applies the *record* with
``apply_extraction``, so a live run and a reindex build the same memory from the same record.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import orjson

from pipeline.memory.rules.classify import importance_said_by, region_for
from pipeline.memory.rules.text import normalise, strip_edges
from schemas.errors import HindsightError
from schemas.events import (
    MAX_TURN_CHARS,
    Extraction,
    ExtractionRecorded,
    ExtractorInfo,
    TurnRecorded,
)
from schemas.memory import KINDS, Triplet
from schemas.prepared import TurnAnalysis

# Bump when the prompt's wording or the answer's shape changes: it is recorded with every answer.
PROMPT_VERSION = "hindsight-extract-v1"
MAX_ENTITIES = 24
MAX_TRIPLET_PART = 200
MAX_CONTEXT_TURNS = 3
CONTEXT_CHARS = 500

Message = dict[str, str]

_SYSTEM_PROMPT = """\
You extract long-term memories for an AI assistant from one conversation turn.
Answer with one JSON object and nothing else, with exactly these keys:
{
  "remember": true or false,  // false for greetings, thanks, filler and requests to forget
  "kind": one of "preference", "task_state", "decision", "fact", "procedure", "emotion",
          "chit_chat",
  "importance": a number from 0 to 1,
  "triplet": {"subject": ..., "attribute": ..., "value": ...} or null,
  "entities": a list of strings,
  "content": a string or null
}
Kinds: preference = likes, dislikes, how the user wants things done; task_state = what someone is
working on, deadlines, progress; decision = a choice or rule from now on (a stack change, a
policy); fact = anything else worth keeping; procedure = how to do or fix something, steps;
emotion = how someone feels; chit_chat = small talk.
Importance guide: preference 0.9, task_state 0.85, decision 0.85, fact 0.7, procedure 0.65,
emotion 0.5, chit_chat 0.2; health, safety and hard constraints (allergies, "must never") at
least 0.9.
triplet: only when the turn states one clear attribute value, e.g. "We moved to PostgreSQL" ->
{"subject": "<speaker>", "attribute": "database", "value": "PostgreSQL"}. Use the speaker's name
as the subject when they talk about themselves or their team; keep attributes short and generic
("database", "home city", "employer") so a later change of value can be detected.
entities: names, products, technologies, identifiers and titles the turn mentions, as written.
content: null, unless the turn only makes sense with the earlier turns; then one sentence that
states the memory on its own (resolve "it", "that", "there"). Never add facts the turns lack."""


class ExtractionResponseError(HindsightError):
    """An LLM answer that is not a valid extraction; ``field`` names the offending key."""

    def __init__(self, reason: str, field: str | None = None) -> None:
        self.reason = reason
        self.field = field
        super().__init__(f"{field}: {reason}" if field else reason)


def extractor_info(model: str) -> ExtractorInfo:
    return ExtractorInfo(model=model, prompt_version=PROMPT_VERSION)


def _line(turn: TurnRecorded) -> str:
    text = turn.text if len(turn.text) <= CONTEXT_CHARS else turn.text[:CONTEXT_CHARS] + "…"
    return f"{turn.speaker} ({turn.role}): {text}"


def build_messages(turn: TurnRecorded, context: Sequence[TurnRecorded] = ()) -> list[Message]:
    """The chat messages for one turn: a pure function of the turn and its session context.

    ``context`` holds earlier turns of the same session (oldest first); only the last few are
    shown, so the model can resolve references without the prompt growing with the session.
    """
    earlier = [_line(t) for t in list(context)[-MAX_CONTEXT_TURNS:]]
    parts = []
    if earlier:
        parts.append("Earlier in this session:\n" + "\n".join(earlier))
    parts.append(f"Speaker: {turn.speaker} (role: {turn.role})")
    parts.append(f"Turn to extract from:\n{turn.text}")
    return [
        {"role": "system", "content": _SYSTEM_PROMPT},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


def _strip_fence(text: str) -> str:
    # Some servers wrap the object in a markdown fence even in JSON mode; nothing else is forgiven.
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```") and len(stripped) >= 6:
        body = stripped[3:-3]
        newline = body.find("\n")
        first = body[:newline].strip() if newline >= 0 else ""
        if newline >= 0 and (not first or first.isalpha()):
            body = body[newline + 1 :]
        return body.strip()
    return stripped


def _require(payload: Mapping[str, Any], key: str, prefix: str = "") -> Any:
    if key not in payload:
        raise ExtractionResponseError("missing", f"{prefix}{key}")
    return payload[key]


def _text(value: Any, field: str, limit: int) -> str:
    if not isinstance(value, str):
        raise ExtractionResponseError(f"expected a string, got {type(value).__name__}", field)
    cleaned = value.strip()
    if not cleaned:
        raise ExtractionResponseError("must not be empty", field)
    if len(cleaned) > limit:
        raise ExtractionResponseError(f"longer than {limit} characters", field)
    return cleaned


def _parse_triplet(value: Any) -> Triplet | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ExtractionResponseError("expected an object or null", "triplet")
    parts = {
        key: _text(_require(value, key, "triplet."), f"triplet.{key}", MAX_TRIPLET_PART)
        for key in ("subject", "attribute", "value")
    }
    return Triplet(**parts)


def parse_response(text: str) -> Extraction:
    """Strict parse of the model's answer; every failure names the field that was wrong."""
    try:
        payload: Any = orjson.loads(_strip_fence(text))
    except orjson.JSONDecodeError as error:
        raise ExtractionResponseError(f"malformed JSON: {error}") from error
    if not isinstance(payload, dict):
        raise ExtractionResponseError("the answer must be a JSON object")

    remember = _require(payload, "remember")
    if not isinstance(remember, bool):
        raise ExtractionResponseError("expected true or false", "remember")

    kind = _require(payload, "kind")
    if kind not in KINDS:
        raise ExtractionResponseError(f"expected one of {', '.join(KINDS)}, got {kind!r}", "kind")

    importance = _require(payload, "importance")
    if (
        isinstance(importance, bool)
        or not isinstance(importance, int | float)
        or not math.isfinite(importance)
        or not 0.0 <= importance <= 1.0
    ):
        raise ExtractionResponseError(
            f"expected a number from 0 to 1, got {importance!r}", "importance"
        )

    triplet = _parse_triplet(_require(payload, "triplet"))

    raw_entities = _require(payload, "entities")
    if not isinstance(raw_entities, list):
        raise ExtractionResponseError("expected a list of strings", "entities")
    entities = [
        _text(entity, f"entities[{index}]", MAX_TRIPLET_PART)
        for index, entity in enumerate(raw_entities)
    ]

    content = payload.get("content")
    if content is not None:
        content = _text(content, "content", MAX_TURN_CHARS) if str(content).strip() else None

    return Extraction(
        remember=remember,
        kind=kind,
        importance=float(importance),
        triplet=triplet,
        entities=_dedupe(entities),
        content=content,
    )


def _dedupe(entities: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    kept: list[str] = []
    for entity in entities:
        key = normalise(entity)
        if key and key not in seen:
            seen.add(key)
            kept.append(entity.strip())
    return kept[:MAX_ENTITIES]


def rules_extraction(analysis: TurnAnalysis) -> Extraction:
    """The rules' result in the recorded shape: it stands in when the LLM answer is unusable."""
    return Extraction(
        remember=analysis.remember,
        kind=analysis.kind,
        importance=min(1.0, max(0.0, analysis.base_importance)),
        triplet=analysis.triplet,
        entities=list(analysis.entities)[:MAX_ENTITIES],
    )


def extraction_event_id(
    namespace: str, turn_event_id: str, revision: int, info: ExtractorInfo
) -> str:
    digest = hashlib.sha256(
        "\x00".join(
            [namespace, turn_event_id, str(revision), info.model, info.prompt_version]
        ).encode()
    )
    return "x_" + digest.hexdigest()[:24]


def record_extraction(
    turn: TurnRecorded,
    info: ExtractorInfo,
    extraction: Extraction,
    *,
    source: Literal["llm", "rules_fallback"] = "llm",
    error: str | None = None,
    revision: int = 0,
) -> ExtractionRecorded:
    """The event to publish for a turn; its time is the turn's, never the wall clock (I2)."""
    return ExtractionRecorded(
        event_id=extraction_event_id(turn.namespace, turn.event_id, revision, info),
        namespace=turn.namespace,
        event_time=turn.event_time,
        turn_event_id=turn.event_id,
        extractor=info,
        extraction=extraction,
        source=source,
        error=error[:2_000] if error else None,
        revision=revision,
    )


def supersedes(new: ExtractionRecorded, current: ExtractionRecorded | None) -> bool:
    """The lookup rule: a turn's extraction is the first record, in log order, of its highest
    revision. Live workers and replay fold records with this same rule, so they agree."""
    return current is None or new.revision > current.revision


_FIRST_PERSON = frozenset(
    {"i", "me", "my", "myself", "we", "us", "our", "user", "the user", "speaker", "我", "我们"}
)


def _normalise_triplet(triplet: Triplet, speaker: str) -> Triplet | None:
    subject = normalise(triplet.subject)
    if subject in _FIRST_PERSON:
        subject = normalise(speaker)
    attribute = normalise(triplet.attribute)
    value = strip_edges(triplet.value)
    if not subject or not attribute or not value:
        return None
    # Contradiction checks compare normalised subject/attribute, as for the rules' triplets.
    return Triplet(subject=subject, attribute=attribute, value=value)


def apply_extraction(
    turn: TurnRecorded, analysis: TurnAnalysis, extraction: Extraction | ExtractionRecorded
) -> TurnAnalysis:
    """Override the rules' classification, kind, importance, region, triplet and entities.

    A ``content`` override replaces the text the memory keeps (and is embedded and addressed by);
    the turn's event id, session and time stay, so provenance still points at the turn.
    """
    record = extraction if isinstance(extraction, ExtractionRecorded) else None
    result = record.extraction if record is not None else extraction
    assert isinstance(result, Extraction)
    content = analysis.content
    search_text = analysis.search_text
    rewritten = result.content.strip() if result.content else ""
    if rewritten and rewritten != content:
        # Keep whatever framing the rules gave the search text; only the words change.
        search_text = (
            search_text.replace(content, rewritten)
            if content in search_text
            else f"{turn.speaker}: {rewritten}"
        )
        content = rewritten
    if record is None:
        reason = "extraction"
    elif record.source == "llm":
        reason = f"llm {record.extractor.model} ({record.extractor.prompt_version})"
    else:
        reason = f"rules (llm fallback: {record.error or 'unknown'})"[:200]
    if result.remember and turn.role != "user":
        reason = f"{reason}; said by {turn.role}"
    triplet = (
        _normalise_triplet(result.triplet, turn.speaker)
        if result.remember and result.triplet is not None
        else None
    )
    return analysis.model_copy(
        update={
            "remember": result.remember,
            "kind": result.kind,
            "region": region_for(result.kind, content),
            "base_importance": importance_said_by(result.importance, turn.role),
            "reason": reason,
            "content": content,
            "search_text": search_text,
            "triplet": triplet,
            "entities": _dedupe(result.entities) if result.remember else [],
        }
    )
