"""Extract stage: (subject, attribute, value) triplets, entities and content-addressed ids."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pipeline.memory.rules.extraction import (
    extract_entities,
    extract_triplet,
    memory_id,
    search_text,
    segment_id,
    tech_category,
    time_note,
)
from schemas.memory import Triplet


def triplet(text: str, speaker: str = "Alice") -> tuple[str, str, str] | None:
    found = extract_triplet(text, speaker)
    return None if found is None else (found.subject, found.attribute, found.value)


# -- triplets -----------------------------------------------------------------------------------


def test_use_for_names_the_category_not_the_purpose() -> None:
    assert triplet("We use MySQL for the billing database") == ("alice", "database", "MySQL")


def test_a_switch_keeps_the_attribute_and_takes_the_new_value() -> None:
    assert triplet("we moved from MySQL to PostgreSQL") == ("alice", "database", "PostgreSQL")


def test_use_and_switch_land_on_the_same_attribute_so_they_can_conflict() -> None:
    before = extract_triplet("We use MySQL for the billing database", "alice")
    after = extract_triplet("we moved from MySQL to PostgreSQL", "alice")

    assert before is not None and after is not None
    assert (before.subject, before.attribute) == (after.subject, after.attribute)
    assert before.value != after.value


@pytest.mark.parametrize(
    "text",
    [
        "From now on all code should be written in TypeScript",
        "以后所有代码都用 TypeScript",
        "从现在开始，所有代码都用 TypeScript",
    ],
)
def test_from_now_on_rules_agree_across_languages(text: str) -> None:
    assert triplet(text) == ("alice", "programming language", "TypeScript")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("my favorite color is blue", ("alice", "favorite color", "blue")),
        ("I live in Berlin", ("alice", "home city", "Berlin")),
        ("I now live in Munich", ("alice", "home city", "Munich")),
        ("我住在北京", ("alice", "home city", "北京")),
        ("I work for Globex as an engineer", ("alice", "employer", "Globex")),
        ("我的生日是五月三日", ("alice", "生日", "五月三日")),
        ("We use Kafka as our message broker", ("alice", "message broker", "Kafka")),
        ("我们从 MySQL 迁移到 PostgreSQL", ("alice", "database", "PostgreSQL")),
        (
            "Our team migrated from MongoDB to PostgreSQL last year",
            ("alice", "database", "PostgreSQL"),
        ),
        ("We use PostgreSQL now", ("alice", "database", "PostgreSQL")),
    ],
)
def test_stated_facts_become_triplets(text: str, expected: tuple[str, str, str]) -> None:
    assert triplet(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "hi",
        "thanks!",
        "The weather is nice",
        "Can you help me with this?",
        "I like pizza",
        "Sure, sounds good",
        "哈哈好的，谢谢",
        "the fix was to restart the worker",
    ],
)
def test_plain_chatter_yields_no_triplet(text: str) -> None:
    assert extract_triplet(text, "alice") is None


def test_subject_is_the_normalised_speaker() -> None:
    found = extract_triplet("I live in Berlin", "  Alice  Smith ")

    assert found == Triplet(subject="alice smith", attribute="home city", value="Berlin")


def test_different_speakers_are_different_subjects() -> None:
    alice = extract_triplet("I live in Berlin", "alice")
    bob = extract_triplet("I live in Paris", "bob")

    assert alice is not None and bob is not None
    assert alice.subject != bob.subject
    assert alice.attribute == bob.attribute


def test_tech_category_is_case_insensitive() -> None:
    assert tech_category("PostgreSQL") == "database"
    assert tech_category("postgresql") == "database"
    assert tech_category("TypeScript") == "programming language"
    assert tech_category("Kafka") == "message broker"
    assert tech_category("Berlin") is None


def test_triplet_extraction_is_deterministic() -> None:
    text = "we moved from MySQL to PostgreSQL"

    assert extract_triplet(text, "alice") == extract_triplet(text, "alice")


# -- entities -----------------------------------------------------------------------------------


def test_entities_include_ids_emails_versions_and_names() -> None:
    entities = extract_entities(
        "Contact Maria Garcia at maria.garcia@example.org about order SF123456 and ticket "
        "JIRA-4521; we run Python 3.12 on Kubernetes."
    )

    for expected in [
        "SF123456",
        "JIRA-4521",
        "maria.garcia@example.org",
        "3.12",
        "Python",
        "Maria Garcia",
        "Kubernetes",
    ]:
        assert expected in entities


def test_entities_in_chinese_text() -> None:
    entities = extract_entities("订单 SF123456 已发货，联系 bob@example.com，版本 v2.3.1")

    assert "SF123456" in entities
    assert "bob@example.com" in entities
    assert "v2.3.1" in entities


def test_entities_skip_stop_words_and_sentence_starts() -> None:
    entities = extract_entities("The order shipped. Thanks for asking. We met Alice.")

    assert "The" not in entities
    assert "Thanks" not in entities
    assert "We" not in entities
    assert "Alice" in entities


def test_entities_are_deduplicated_case_insensitively_and_capped() -> None:
    entities = extract_entities("MySQL and mysql and MYSQL")
    assert [e for e in entities if e.lower() == "mysql"] == ["MySQL"]

    many = " ".join(f"ID{n:04d}X" for n in range(40))
    assert len(extract_entities(many)) == 24


def test_quoted_titles_are_entities() -> None:
    assert "Project Phoenix" in extract_entities('we call it "Project Phoenix" internally')


def test_plain_chatter_has_no_entities() -> None:
    assert extract_entities("ok thanks, talk soon") == []


# -- content-addressed ids ----------------------------------------------------------------------


def test_memory_id_is_deterministic_and_well_formed() -> None:
    first = memory_id("acme", ["t1"], "We use MySQL")

    assert first == memory_id("acme", ["t1"], "We use MySQL")
    assert first.startswith("m_")
    assert len(first) == 2 + 24
    int(first[2:], 16)


def test_memory_id_ignores_source_order() -> None:
    assert memory_id("acme", ["t2", "t1"], "x") == memory_id("acme", ["t1", "t2"], "x")
    assert memory_id("acme", iter(["t1", "t2"]), "x") == memory_id("acme", ("t2", "t1"), "x")


def test_memory_id_uses_normalised_content() -> None:
    assert memory_id("acme", ["t1"], "We use  MySQL\n") == memory_id("acme", ["t1"], "we use mysql")
    assert memory_id("acme", ["t1"], "ＡＢＣ") == memory_id("acme", ["t1"], "abc")


@pytest.mark.parametrize(
    ("namespace", "sources", "content"),
    [
        ("globex", ["t1"], "We use MySQL"),
        ("acme", ["t2"], "We use MySQL"),
        ("acme", ["t1", "t2"], "We use MySQL"),
        ("acme", ["t1"], "We use PostgreSQL"),
        ("acme", [], "We use MySQL"),
    ],
)
def test_memory_id_changes_with_namespace_sources_or_content(
    namespace: str, sources: list[str], content: str
) -> None:
    assert memory_id(namespace, sources, content) != memory_id("acme", ["t1"], "We use MySQL")


def test_memory_id_fields_do_not_run_into_each_other() -> None:
    assert memory_id("ab", ["c"], "x") != memory_id("a", ["bc"], "x")
    assert memory_id("acme", ["t1", "t2"], "x") != memory_id("acme", ["t1t2"], "x")


def test_segment_id_is_deterministic_and_scoped() -> None:
    first = segment_id("acme", "s1", "t1")

    assert first == segment_id("acme", "s1", "t1")
    assert first.startswith("g_")
    assert first != segment_id("globex", "s1", "t1")
    assert first != segment_id("acme", "s2", "t1")
    assert first != segment_id("acme", "s1", "t2")


# ---------- dates a turn refers to ----------

SAID = datetime(2022, 5, 2, 11, 54, tzinfo=UTC)  # a Monday


@pytest.mark.parametrize(
    ("text", "note"),
    [
        ("I watched the whole trilogy last night!", "1 May 2022"),
        ("Yesterday I took the kids to the museum", "1 May 2022"),
        ("We went camping two weekends ago", "weekend of 23 April 2022"),
        ("Last week I won my second tournament!", "week of 25 April 2022"),
        ("I painted it last Saturday", "30 April 2022"),
        ("I'll come over tomorrow if that's fine", "3 May 2022"),
        ("We move next month", "June 2022"),
        ("I got them 3 years ago", "2019"),
        ("我上周五去了北京", "2022年4月29日"),
        ("三天前下雨了", "2022年4月29日"),
        ("下个月搬家", "2022年6月"),
        ("上周末去爬山了", "2022年4月30日周末"),
        ("我的护照二零二六年八月到期", "2026年8月"),  # the year it names, not the latest 八月
        ("哈哈我护照明年三月到期", "2023年3月"),  # 明年 is the month's year, not another phrase
        ("We moved in March", "March 2022"),  # a month already past this year: this year's
        ("We moved at the end of March", "21 March 2022 to 31 March 2022"),  # its part, too
        ("late October 2021 I quit", "21 October 2021 to 31 October 2021"),  # a named year
        ("Last Friday I booked it and next week I fly", "29 April 2022; week of 9 May 2022"),
    ],
)
def test_time_note_resolves_relative_phrases(text: str, note: str) -> None:
    assert time_note(text, SAID) == note


@pytest.mark.parametrize(
    "text",
    [
        "I did it today",  # the turn's own day: its time says so already
        "Busy this week and this month",
        "On 8 May 2023 we signed",  # spelled out already
        "一九九八年我出生在杭州",  # spelled out already, in Chinese numerals
        # A month still ahead this year, without its year: last year's or the coming one.
        "my lease ends in October",
        "孩子预计十一月出生",
        "the baby is due at the end of October",  # a part of such a month
        "we fly out in the first week of November",  # a week of one
        "I love hiking on weekends",
        "no time words here",
    ],
)
def test_time_note_is_empty_when_nothing_to_resolve(text: str) -> None:
    assert time_note(text, SAID) == ""


@pytest.mark.parametrize(
    ("text", "seen"),
    [
        ("港大offer到了😭😭 九月入学", "港大offer到了 九月入学"),
        ("12 weeks today and we told our parents 🥹", "12 weeks today and we told our parents"),
        ("1️⃣ flat white 👍🏽, 🇬🇧 trip; 👨‍👩‍👧 all well ❤️", "1 flat white , trip; all well"),
        ("© 2023, no emoji  here", "© 2023, no emoji  here"),  # untouched, spaces and all
    ],
)
def test_the_search_text_leaves_emoji_out(text: str, seen: str) -> None:
    assert search_text("Ann", text, SAID) == f"Ann: {seen}"
