"""LoCoMo file parsing: evidence normalisation, session times, turn text, skipped questions."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bench.locomo.dataset import (
    DatasetError,
    load_locomo,
    normalise_dia_id,
    normalise_evidence,
    parse_sample,
    parse_session_time,
    turn_text,
)

SAMPLE = {
    "sample_id": "conv-x",
    "conversation": {
        "speaker_a": "Ana",
        "speaker_b": "Bo",
        "session_2_date_time": "9:05 am on 2 June, 2023",
        "session_2": [
            {"speaker": "Bo", "dia_id": "D2:1", "text": "Back from the lake."},
            {
                "speaker": "Ana",
                "dia_id": "D2:2",
                "text": "Look!",
                "img_url": ["http://example.invalid/x.jpg"],
                "blip_caption": "a photo of a red kayak",
            },
        ],
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Ana", "dia_id": "D1:1", "text": "I adopted a cat."},
            {"speaker": "Bo", "dia_id": "D1:2", "text": "What is its name?"},
        ],
    },
    "qa": [
        {"question": "What pet?", "answer": "a cat", "evidence": ["D1:1"], "category": 4},
        {"question": "Boat colour?", "answer": 2023, "evidence": ["D2:2; D1:02"], "category": 1},
        {"question": "Opinion?", "answer": "x", "evidence": [], "category": 3},
        {"question": "Dog?", "adversarial_answer": "Rex", "evidence": ["D:1:2"], "category": 5},
    ],
}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("D1:3", "D1:3"),
        ("D:11:26", "D11:26"),
        ("D30:05", "D30:5"),
        ("D05:3", "D5:3"),
        (" D2:4 ", "D2:4"),
        ("D", None),
        ("", None),
        ("S1:2", None),
    ],
)
def test_normalise_dia_id(raw: str, expected: str | None) -> None:
    assert normalise_dia_id(raw) == expected


def test_normalise_evidence_splits_fixes_and_dedupes() -> None:
    raw = ["D8:6; D9:17", "D", "D:11:26", "D30:05 D8:6", "D9:17"]
    assert normalise_evidence(raw) == ("D8:6", "D9:17", "D11:26", "D30:5")


def test_parse_session_time_is_utc() -> None:
    assert parse_session_time("1:56 pm on 8 May, 2023") == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert parse_session_time("12:09 am on 13 September,  2023").hour == 0
    with pytest.raises(DatasetError):
        parse_session_time("yesterday")


def test_turn_text_appends_caption() -> None:
    assert turn_text({"text": "Look!", "blip_caption": "a kayak"}) == "Look! [image: a kayak]"
    assert turn_text({"text": " hi "}) == "hi"
    assert turn_text({"text": "", "blip_caption": "a kayak"}) == "[image: a kayak]"


def test_parse_sample_orders_sessions_and_times() -> None:
    conversation = parse_sample(SAMPLE)
    assert conversation.namespace == "locomo-conv-x"
    assert conversation.speakers == ("Ana", "Bo")
    assert [t.dia_id for t in conversation.turns] == ["D1:1", "D1:2", "D2:1", "D2:2"]
    first, second = conversation.turns[:2]
    assert second.event_time - first.event_time == timedelta(seconds=1)
    assert first.event_id == "conv-x:D1:1"
    assert first.session_id == "session_1"
    assert conversation.turns[3].text == "Look! [image: a photo of a red kayak]"
    assert conversation.recall_at > conversation.turns[-1].event_time


def test_parse_sample_questions() -> None:
    conversation = parse_sample(SAMPLE)
    assert conversation.skipped_questions == 1
    by_text = {q.question: q for q in conversation.questions}
    assert by_text["Boat colour?"].evidence == ("D2:2", "D1:2")
    assert by_text["Boat colour?"].answer == "2023"
    assert by_text["Dog?"].adversarial and by_text["Dog?"].adversarial_answer == "Rex"
    assert by_text["Dog?"].evidence == ("D1:2",)
    assert conversation.unknown_evidence() == []


def test_load_locomo_limit(tmp_path: Path) -> None:
    path = tmp_path / "tiny.json"
    other = {**SAMPLE, "sample_id": "conv-y"}
    path.write_text(json.dumps([SAMPLE, other]))
    assert [c.sample_id for c in load_locomo(path)] == ["conv-x", "conv-y"]
    assert [c.sample_id for c in load_locomo(path, limit=1)] == ["conv-x"]
