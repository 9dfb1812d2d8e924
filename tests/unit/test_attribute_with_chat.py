"""Statements with chat around them (training/attributes/with_chat.py): what the attribute model
is scored on besides the plain held-back quarter."""

from __future__ import annotations

from training.attributes.corpus import Example
from training.attributes.with_chat import with_chat
from training.turn_classifier.corpus_stats import Turn


def _statement(n: int, attribute: str, lang: str, text: str) -> Example:
    return Example(f"hb-{n:012d}", "hb", attribute, lang, "statement", text)


def _turn(n: int, label: str, lang: str, text: str) -> Turn:
    return Turn(f"{lang}-{n:04d}", text, label, lang, "casual", "friends_chat", n)


STATEMENTS = [
    _statement(1, "hb_gp", "en", "My GP is Dr Hollis."),
    _statement(2, "hb_gp", "zh", "我的家庭医生是王医生。"),
    _statement(3, "none", "en", "Went for a long walk by the river."),
    _statement(4, "none", "zh", "昨天去江边散步了。"),
    Example("hb-q", "hb", "hb_gp", "en", "question", "Who is my GP?"),
    *[_statement(10 + n, "hb_dentist", "en", f"My dentist is Dr Tooth{n}.") for n in range(30)],
]
TURNS = [
    _turn(1, "small_talk", "en", "haha same"),
    _turn(2, "thanks", "zh", "谢谢啦"),
    _turn(3, "question", "en", "what time is it?"),
    _turn(4, "fact", "en", "I live in Leeds."),
    _turn(5, "greeting", "mixed", "hi 大家好"),
]


def test_each_value_statement_is_said_once_with_a_line_that_gives_no_value() -> None:
    said = with_chat(STATEMENTS, TURNS)
    values = [s for s in STATEMENTS if s.kind == "statement" and s.attribute != "none"]
    assert [s.id for s in said] == [f"{s.id}+chat" for s in values]
    chat = {"en": {"haha same", "hi 大家好", "Went for a long walk by the river."},
            "zh": {"谢谢啦", "hi 大家好", "昨天去江边散步了。"}}  # fmt: skip
    for original, chatty in zip(values, said, strict=True):
        assert chatty.attribute == original.attribute and chatty.lang == original.lang
        assert original.text in chatty.text
        rest = chatty.text.replace(original.text, "", 1)
        assert any(line in rest for line in chat[original.lang])
        # Never a question, another kind of turn, or a line of the other language.
        assert "what time" not in rest and "Leeds" not in rest


def test_the_lines_sides_and_joints_are_drawn_the_same_on_every_run() -> None:
    first, second = with_chat(STATEMENTS, TURNS), with_chat(list(STATEMENTS), list(TURNS))
    assert first == second
    # Over thirty statements both sides occur: the value comes first in some turns, last in others.
    dentist = [s for s in first if s.attribute == "hb_dentist"]
    assert any(s.text.startswith("My dentist") for s in dentist)
    assert any(not s.text.startswith("My dentist") for s in dentist)


def test_a_language_without_chat_lines_is_left_out() -> None:
    english_only = [t for t in TURNS if t.lang == "en"]
    no_none = [s for s in STATEMENTS if s.attribute != "none"]
    said = with_chat(no_none, english_only)
    assert {s.lang for s in said} == {"en"}
