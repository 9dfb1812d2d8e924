import math
import random
from collections import Counter

import pytest

from pipeline.recall.lexical import BM25Index, cjk_share, search_terms, tokenize


def test_english_tokens_are_lowercased_stemmed_and_stopword_free() -> None:
    tokens = tokenize("How did we fix the Deployments of order SF123456?")
    assert "the" not in tokens and "how" not in tokens
    assert "sf123456" in tokens  # identifiers stay whole
    assert tokenize("deploys") == tokenize("deploy")
    assert tokenize("user's") == ["user"]


def test_chinese_tokens_use_search_mode() -> None:
    tokens = tokenize("我们用什么数据库")
    assert "数据库" in tokens and "数据" in tokens
    assert "我们" not in tokens and "什么" not in tokens


def test_search_terms_add_chinese_characters_beside_the_words() -> None:
    terms = search_terms("每个月工资的10%存进养老金账户")
    assert {"工资", "存进", "养老金", "存", "养", "老", "金", "10"} <= set(terms)
    assert "的" not in terms  # a function character stays out, as a function word does
    # Function words give no characters either (什么 → no 什); English is tokenize's alone.
    assert "什" not in search_terms("这是什么问题")
    assert search_terms("How did we fix the deploy?") == tokenize("How did we fix the deploy?")


def test_chinese_words_sharing_a_morpheme_meet_part_way() -> None:
    index = BM25Index()
    memories = {"mango": "我对芒果过敏", "hotpot": "我最爱吃的是火锅", "hike": "周末约了朋友去爬山"}
    for memory_id, text in memories.items():
        index.add(memory_id, search_terms(text))
    # 水果 and 芒果 are different words to jieba; they share 果.
    assert [hit.memory_id for hit in index.search(search_terms("哪种水果我碰不得"), 3)] == ["mango"]
    # The whole word scores above a word that only shares a character with it.
    index.add("aunt-big", search_terms("大姨住在苏州"))
    index.add("aunt-small", search_terms("小姨住在无锡"))
    hits = index.search(search_terms("小姨住哪"), 5)
    assert hits[0].memory_id == "aunt-small"
    assert hits[0].score > hits[1].score and hits[1].memory_id == "aunt-big"


def test_mixed_text() -> None:
    tokens = tokenize("订单SF123456的PostgreSQL配置")
    assert {"订单", "sf123456", "postgresql", "配置"} <= set(tokens)


def test_cjk_share() -> None:
    assert cjk_share("我喜欢深色模式") == 1.0
    assert cjk_share("dark mode") == 0.0


def reference_scores(
    docs: dict[str, list[str]], query: list[str], k1: float = 1.2, b: float = 0.75
) -> dict[str, float]:
    """Textbook BM25 (Lucene idf), written out naively."""
    n = len(docs)
    avgdl = sum(len(tokens) for tokens in docs.values()) / n
    scores: dict[str, float] = {}
    for memory_id, tokens in docs.items():
        counts = Counter(tokens)
        total = 0.0
        for term in set(query):
            df = sum(1 for other in docs.values() if term in other)
            if df == 0 or term not in counts:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            tf = counts[term]
            total += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(tokens) / avgdl))
        if total > 0:
            scores[memory_id] = total
    return scores


def test_scores_match_reference_after_adds_updates_and_removes() -> None:
    rng = random.Random(7)
    vocab = [f"w{i}" for i in range(40)]
    index = BM25Index()
    docs: dict[str, list[str]] = {}
    for step in range(400):
        memory_id = f"m{rng.randrange(120)}"
        if rng.random() < 0.25 and memory_id in docs:
            index.remove(memory_id)
            del docs[memory_id]
        else:
            tokens = rng.choices(vocab, k=rng.randrange(1, 15))
            index.add(memory_id, tokens)  # insert or replace
            docs[memory_id] = tokens
        if step % 50 == 0 and docs:
            query = rng.sample(vocab, 3)
            expected = reference_scores(docs, query)
            hits = index.search(query, k=1000)
            assert {h.memory_id: h.score for h in hits} == pytest.approx(expected, rel=1e-4)
            ranked = [h.memory_id for h in hits]
            assert [expected[i] for i in ranked] == sorted(expected.values(), reverse=True)
    assert len(index) == len(docs)


def test_coverage_and_filter() -> None:
    index = BM25Index()
    index.add("a", tokenize("postgres database for billing"))
    index.add("b", tokenize("redis cache for sessions"))
    index.add("c", tokenize("postgres replica lag"))
    hits = index.search(tokenize("postgres billing"), k=5)
    assert hits[0].memory_id == "a"
    assert hits[0].coverage == pytest.approx(1.0)
    assert 0 < hits[1].coverage < 1
    filtered = index.search(tokenize("postgres billing"), k=5, accept=lambda i: i != "a")
    assert [h.memory_id for h in filtered] == ["c"]
    assert index.search(tokenize("kubernetes"), k=5) == []
    assert index.search([], k=5) == []


def test_characters_of_a_missing_word_do_not_count_it_missing_again() -> None:
    index = BM25Index()
    index.add("home", search_terms("我住在杭州，离西湖不远"))
    index.add("car", search_terms("我开一辆灰色的本田思域"))
    # 城市 and 现在 are in no memory: their characters must not dilute the one word that is.
    [home] = index.search(search_terms("我现在住在哪个城市"), k=5)
    [home_by_words] = index.search(tokenize("我现在住在哪个城市"), k=5)
    assert home.coverage == pytest.approx(home_by_words.coverage)
    # A word met only through a character counts for less than the word itself.
    index.add("mango", search_terms("我对芒果过敏"))
    index.add("fruit", search_terms("水果店在打折"))
    hits = {hit.memory_id: hit.coverage for hit in index.search(search_terms("水果"), k=5)}
    assert hits["fruit"] == pytest.approx(1.0)
    assert 0.0 < hits["mango"] <= 0.5 * hits["fruit"]


def test_a_name_one_character_off_does_not_outweigh_the_name() -> None:
    index = BM25Index()
    index.add("yang-ocean", search_terms("我表哥刘洋在深圳做外贸"))
    index.add("yang-sun", search_terms("我堂哥刘阳在成都当老师"))
    hits = index.search(search_terms("刘阳是做什么的"), k=5)
    assert hits[0].memory_id == "yang-sun"
    assert hits[0].coverage > hits[1].coverage


def test_remove_frees_and_reuses_slots() -> None:
    index = BM25Index()
    index.add("a", ["x", "y"])
    index.add("b", ["x"])
    assert index.remove("a") and not index.remove("a")
    index.add("c", ["y"])
    assert [h.memory_id for h in index.search(["y"], k=5)] == ["c"]
    assert "a" not in index and len(index) == 2
