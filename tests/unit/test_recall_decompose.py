"""Questions that join two facts are split into their parts; other questions are left alone."""

from __future__ import annotations

import pytest

from pipeline.recall.decompose import decompose


@pytest.mark.parametrize(
    ("question", "parts"),
    [
        (
            "What subject have Caroline and Melanie both painted?",
            ["What subject have Caroline painted?", "What subject have Melanie painted?"],
        ),
        (
            "When did Melanie go on a hike after the roadtrip?",
            ["When did Melanie go on a hike?", "the roadtrip"],
        ),
        ("What do my cat and dog both eat?", ["What do my cat eat?", "What do my dog eat?"]),
        ("小明和小红都喜欢什么？", ["小明喜欢什么？", "小红喜欢什么？"]),
        ("搬家之后我买了什么？", ["我买了什么？", "搬家"]),
    ],
)
def test_joined_questions_split_into_parts(question: str, parts: list[str]) -> None:
    assert decompose(question) == parts


@pytest.mark.parametrize(
    "question",
    [
        "What activities does Melanie partake in?",
        "Where did Caroline move from 4 years ago?",
        "What did Maria do last weekend before April 10, 2023?",  # a time, not an event
        "What happened after 10 May 2023?",
        "What do I like to eat and drink?",  # plain coordination, no joint reading
        "上周之后我买了什么？",
        "我住在哪里？",
    ],
)
def test_other_questions_are_left_alone(question: str) -> None:
    assert decompose(question) == []
