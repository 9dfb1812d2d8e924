"""The labelled turn corpus: schema, label set, uniqueness, balance, and the checker itself."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest

from training.turn_classifier.corpus_stats import (
    CONTEXTS,
    CORPUS_PATH,
    LABELS,
    LANG_REGISTERS,
    MIN_PER_LABEL,
    MIN_SHARE_PER_LANGUAGE,
    MIN_TURNS,
    CorpusError,
    Turn,
    balance_problems,
    check_unique,
    count_table,
    coverage_gaps,
    load_corpus,
    parse_lines,
)


@pytest.fixture(scope="module")
def corpus() -> list[Turn]:
    return load_corpus()


def test_corpus_is_valid_and_large_enough(corpus: list[Turn]) -> None:
    assert len(corpus) >= MIN_TURNS
    assert {turn.label for turn in corpus} == set(LABELS)


def test_every_label_has_enough_turns(corpus: list[Turn]) -> None:
    counts = Counter(turn.label for turn in corpus)
    assert min(counts[label] for label in LABELS) >= MIN_PER_LABEL


def test_english_and_chinese_are_balanced(corpus: list[Turn]) -> None:
    counts = Counter(turn.lang for turn in corpus)
    for lang in ("en", "zh"):
        assert counts[lang] / len(corpus) >= MIN_SHARE_PER_LANGUAGE, lang
    assert counts["mixed"] > 0


def test_the_corpus_has_no_balance_problem(corpus: list[Turn]) -> None:
    # size, per-label minimum, language shares, non-memory share, every label in every
    # register, language and context
    assert balance_problems(corpus) == []


def test_count_table_adds_up(corpus: list[Turn]) -> None:
    header, rows = count_table(corpus)
    total_row = rows[-1]
    assert total_row[0] == "TOTAL"
    assert int(total_row[header.index("total")]) == len(corpus)


# --- the checker rejects what it should ------------------------------------------------------


def _line(**overrides: Any) -> str:
    record = {
        "id": "en-0001",
        "text": "we're going with Postgres",
        "label": "decision",
        "lang": "en",
        "register": "casual",
        "context": "work_team",
    }
    record.update(overrides)
    return json.dumps({k: v for k, v in record.items() if v is not None}, ensure_ascii=False)


def test_a_good_line_parses() -> None:
    (turn,) = parse_lines([_line()])
    assert turn.label == "decision"
    assert turn.line == 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"label": "chit_chat"}, "field 'label' has unknown value 'chit_chat'"),
        ({"register": "shouty"}, "field 'register' has unknown value"),
        ({"context": "gaming"}, "field 'context' has unknown value"),
        ({"lang": "fr"}, "field 'lang' has unknown value"),
        ({"context": None}, "missing field 'context'"),
        ({"speaker": "user"}, "unknown field 'speaker'"),
        ({"text": ""}, "field 'text' must be a non-empty string"),
        ({"label": 3}, "field 'label' must be a non-empty string"),
        ({"id": "en-1"}, "field 'id' must look like"),
        ({"id": "zh-0001"}, "does not match lang 'en'"),
        ({"register": "mixed"}, "field 'register' is 'mixed' exactly when lang is 'mixed'"),
        ({"text": "我们用 Postgres"}, "field 'lang' is 'en' but the text has Chinese"),
        ({"lang": "zh", "id": "zh-0001"}, "field 'lang' is 'zh' but the text has no Chinese"),
        (
            {"lang": "mixed", "id": "mx-0001", "register": "mixed", "text": "我们用它"},
            "field 'lang' is 'mixed' but the text is not code-switched",
        ),
        ({"text": " padded "}, "field 'text' has surrounding whitespace"),
    ],
)
def test_a_bad_field_is_named(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(CorpusError, match="line 1") as caught:
        parse_lines([_line(**overrides)])
    assert message in str(caught.value)


def test_malformed_json_names_the_line() -> None:
    with pytest.raises(CorpusError, match="line 2: not valid JSON"):
        parse_lines([_line(), "{not json"])


def test_a_repeated_id_is_rejected() -> None:
    with pytest.raises(CorpusError, match="field 'id' 'en-0001' repeats line 1"):
        parse_lines([_line(), _line(text="the API listens on 8080", label="fact")])


def test_a_repeated_text_is_rejected_even_with_other_case_and_punctuation() -> None:
    with pytest.raises(CorpusError, match="duplicate text, same as line 1"):
        parse_lines([_line(), _line(id="en-0002", text="We're going with   POSTGRES!")])


def test_a_near_duplicate_text_is_rejected() -> None:
    first = _line(text="my sister just moved to Denver for a nursing job", label="fact")
    second = _line(
        id="en-0002", text="my sister just moved to Dover for a nursing job", label="fact"
    )
    with pytest.raises(CorpusError, match="near-duplicate text"):
        parse_lines([first, second])


def test_different_short_texts_are_both_kept() -> None:
    turns = parse_lines(
        [_line(text="ok", label="filler"), _line(id="en-0002", text="okay", label="filler")]
    )
    assert [turn.text for turn in turns] == ["ok", "okay"]


def test_coverage_gaps_name_the_missing_cell() -> None:
    (turn,) = parse_lines([_line()])
    gaps = coverage_gaps([turn])
    assert "decision has no turn with lang=en register=typo" in gaps
    assert "decision has no turn with lang=zh register=casual" in gaps
    assert "decision has no turn with lang=mixed register=mixed" in gaps
    assert "fact has no turn with context=study" in gaps
    assert "decision has no turn with lang=en register=casual" not in gaps
    assert "decision has no turn with context=work_team" not in gaps
    assert len(gaps) == len(LABELS) * (len(LANG_REGISTERS) + len(CONTEXTS)) - 2


def test_balance_problems_are_reported_for_a_small_lopsided_corpus() -> None:
    turns = parse_lines(
        [
            _line(),
            _line(id="en-0002", text="ok", label="filler"),
            _line(id="zh-0001", text="好的", label="filler", lang="zh"),
        ]
    )
    problems = balance_problems(turns)
    assert f"3 turns, fewer than {MIN_TURNS}" in problems
    assert f"fact has 0 turns, fewer than {MIN_PER_LABEL}" in problems
    assert "non-memory labels are 67% of the turns, not 35%-45%" in problems
    assert "zh is 33% of the turns, less than 35%" in problems
    assert not any(problem.startswith("en is") for problem in problems)


def test_the_untrained_release_appends_to_the_corpus_as_it_is(corpus: list[Turn]) -> None:
    # news_in_reactions.jsonl (CORPUS.md) is valid on its own and, appended, repeats no id and
    # no text of the corpus (check_unique raises on either).
    path = CORPUS_PATH.with_name("news_in_reactions.jsonl")
    release = parse_lines(path.read_text(encoding="utf-8").splitlines())
    assert len(release) == 676
    check_unique([*corpus, *release])
