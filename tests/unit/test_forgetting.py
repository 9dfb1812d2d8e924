"""``pipeline.memory.rules.forgetting``: which memories "forget my …" means — content words in
English and Chinese, relevance = 0.6 × cosine + 0.4 × word share, a floor below which nothing
goes unless the best match stands clear of the rest, the best match and those near it, forgotten
memories only for an erase."""

from __future__ import annotations

import pytest
from recall_support import make_record

from pipeline.memory.rules.forgetting import (
    CLEAR_AMONG,
    CLEAR_LEAD,
    CLEAR_RELEVANCE,
    MIN_RELEVANCE,
    NEAR_BEST,
    content_terms,
    forget_matches,
    lexical_overlap,
)
from schemas.memory import MemoryRecord


def record(memory_id: str, content: str = "unrelated words", **changes: object) -> MemoryRecord:
    return make_record(memory_id, content, vector=[1.0, 0.0], **changes)


def ids(matches: list) -> list[str]:  # type: ignore[type-arg]
    return [match.memory_id for match in matches]


# -- content terms ------------------------------------------------------------------------------


def test_english_terms_drop_the_words_that_say_forget_or_my() -> None:
    assert content_terms("Please forget my home address!") == {"home", "address"}
    assert content_terms("Forget about Alice's phone number") == {"alice's", "phone", "number"}
    assert content_terms("forget all of it") == set()


def test_terms_are_case_and_width_folded() -> None:
    assert content_terms("ＭｙＳＱＬ Password") == {"mysql", "password"}


def test_chinese_runs_become_character_pairs_without_the_stopwords() -> None:
    terms = content_terms("忘掉我的家庭住址")

    assert {"家庭", "住址", "庭住"} <= terms
    assert not terms & {"忘掉", "我的", "的", "我"}


def test_a_single_chinese_character_is_a_term_and_mixed_text_gives_both() -> None:
    assert content_terms("猫") == {"猫"}
    terms = content_terms("请删除我的 MySQL 密码")
    assert {"mysql", "密码"} <= terms
    assert "删除" not in terms


def test_lexical_overlap_is_the_share_of_query_terms_the_text_has() -> None:
    terms = content_terms("forget my home address")

    assert lexical_overlap(terms, "My home address is 12 Elm Street") == 1.0
    assert lexical_overlap(terms, "my home is lovely") == 0.5
    assert lexical_overlap(set(), "anything") == 0.0


# -- selection ----------------------------------------------------------------------------------


def test_below_the_relevance_floor_nothing_is_forgotten() -> None:
    records = [record("a"), record("b")]
    # 0.6 × 0.49 < 0.3, and no query word in either memory.
    assert forget_matches(records, "forget zzz", {"a": 0.49, "b": 0.2}) == []
    [match] = forget_matches(records, "forget zzz", {"a": 0.51, "b": 0.2})
    assert match.memory_id == "a"
    assert match.relevance == pytest.approx(0.6 * 0.51)
    assert match.relevance >= MIN_RELEVANCE


def test_a_best_match_under_the_floor_is_taken_alone_when_it_stands_clear() -> None:
    # "please drop my home address" and "I live at 14 Alder Crescent" share no word.
    records = [record(name) for name in "abcd"]
    similarities = {"a": 0.40, "b": 0.28, "c": 0.27, "d": 0.05}

    [match] = forget_matches(records, "forget zzz", similarities)

    # Relevances 0.24, 0.168, 0.162, 0.03: under the floor, but 0.072 ahead of the runner-up.
    assert match.memory_id == "a"
    assert CLEAR_RELEVANCE <= match.relevance < MIN_RELEVANCE


def test_no_clear_best_under_the_floor_forgets_nothing() -> None:
    records = [record(name) for name in "abcd"]
    close = {"a": 0.40, "b": 0.34, "c": 0.1, "d": 0.0}  # 0.24 leads 0.204 by less than the lead
    weak = {"a": 0.32, "b": 0.1, "c": 0.0, "d": 0.0}  # 0.192 is clear, but under the lower floor

    assert 0.6 * (close["a"] - close["b"]) < CLEAR_LEAD
    assert forget_matches(records, "forget zzz", close) == []
    assert 0.6 * weak["a"] < CLEAR_RELEVANCE
    assert forget_matches(records, "forget zzz", weak) == []


def test_a_clear_best_needs_a_bank_to_stand_clear_of() -> None:
    similarities = {"a": 0.40, "b": 0.0, "c": 0.0}
    few = [record(name) for name in "abc"[: CLEAR_AMONG - 1]]

    assert forget_matches(few, "forget zzz", similarities) == []
    enough = [record(name) for name in "abc"[:CLEAR_AMONG]]
    assert ids(forget_matches(enough, "forget zzz", similarities)) == ["a"]


def test_the_best_match_takes_those_within_near_best_of_it() -> None:
    records = [record(name) for name in "abcd"]
    similarities = {"a": 1.0, "b": 0.8, "c": 0.7, "d": -1.0}

    matches = forget_matches(records, "forget zzz", similarities)

    # Relevances 0.6, 0.48, 0.42, 0: the floor is 0.6 − 0.15 = 0.45.
    assert ids(matches) == ["a", "b"]
    assert matches[0].relevance - matches[1].relevance <= NEAR_BEST


def test_the_near_best_band_never_reaches_below_the_floor() -> None:
    records = [record(name) for name in "abc"]
    # Relevances 0.36, 0.306, 0.294: the band would reach 0.21, the floor stops it at 0.3.
    similarities = {"a": 0.6, "b": 0.51, "c": 0.49}

    assert ids(forget_matches(records, "forget zzz", similarities)) == ["a", "b"]


def test_words_and_meaning_both_count() -> None:
    records = [
        record("words", "My home address is 12 Elm Street"),
        record("meaning", "I live on Elm Street"),
        record("neither", "We use MySQL"),
    ]
    similarities = {"words": 0.1, "meaning": 0.7, "neither": 0.05}

    matches = forget_matches(records, "forget my home address", similarities)

    # words: 0.06 + 0.4; meaning: 0.42 + 0; neither: 0.03.
    assert ids(matches) == ["words", "meaning"]
    assert matches[0].relevance == pytest.approx(0.46)


def test_words_are_matched_in_the_content_not_the_search_text() -> None:
    hidden = record("a", "we use it", search_text="alice: home address")

    assert forget_matches([hidden], "forget my home address", {}) == []


def test_best_first_and_ties_broken_by_id() -> None:
    records = [record(name) for name in ["c", "a", "b"]]

    matches = forget_matches(records, "forget zzz", {"a": 0.9, "b": 0.9, "c": 0.95})

    assert ids(matches) == ["c", "a", "b"]


def test_superseded_and_cold_memories_are_candidates_too() -> None:
    records = [record("old", status="superseded"), record("cold", status="cold"), record("x")]

    matches = forget_matches(records, "forget zzz", {"old": 0.9, "cold": 0.85, "x": 0.1})

    assert ids(matches) == ["old", "cold"]


def test_forgotten_memories_are_candidates_only_for_an_erase() -> None:
    records = [record("gone", status="forgotten"), record("here")]
    similarities = {"gone": 0.95, "here": 0.6}

    # A forget does not see the forgotten one, so the other is the best match (0.36)…
    assert ids(forget_matches(records, "forget zzz", similarities)) == ["here"]
    # …while an erase takes the forgotten one (0.57), and 0.36 is not near it.
    erased = forget_matches(records, "forget zzz", similarities, include_forgotten=True)
    assert ids(erased) == ["gone"]


def test_no_memories_no_matches() -> None:
    assert forget_matches([], "forget my home address", {}) == []


def test_meaning_weighs_what_the_encoder_read_and_the_words_take_the_rest() -> None:
    # An encoder that read a fifth of the query finds every memory alike (MiniLM on Chinese):
    # the one alike with no word in common is not what was asked, the one with its words is.
    alike = record("alike", "周五晚上组里聚餐")
    said = record("said", "我在杭州上班，公司在钱江新城。")
    similarities = {"alike": 0.85, "said": 0.6}
    query = "忘掉我在哪上班"
    assert set(ids(forget_matches([alike, said], query, similarities))) == {"alike", "said"}
    assert ids(forget_matches([alike, said], query, similarities, reading=0.2)) == ["said"]
    assert forget_matches([alike], "忘掉我的车牌号", {"alike": 0.85}, reading=0.2) == []
