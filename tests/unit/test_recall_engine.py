import dataclasses
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from recall_support import AT, HashingEncoder, history, make_record

from pipeline.recall import HotIndex, RecallEngine
from pipeline.recall.scoring import DEFAULT_TUNING
from pipeline.recall.temporal import NaiveTime
from schemas.memory import MemoryRecord

ENCODER = HashingEncoder()
SUPERSEDED_AT = AT - timedelta(days=10)


def orthogonal_to_everything() -> list[float]:
    # A direction no hashed word lands on strongly: dense recall will not find it.
    vector = np.zeros(ENCODER.dimension, dtype=np.float32)
    vector[::2] = 1.0
    vector[1::2] = -1.0
    return (vector / np.linalg.norm(vector)).tolist()


def bank() -> list[MemoryRecord]:
    def rec(memory_id: str, content: str, **kw: object) -> MemoryRecord:
        return make_record(memory_id, content, encoder=ENCODER, **kw)  # type: ignore[arg-type]

    return [
        rec(
            "pref-db",
            "User prefers PostgreSQL as the main database",
            kind="preference",
            importance=0.9,
            entities=["PostgreSQL"],
        ),
        rec(
            "fact-stack",
            "The backend stack is Python with FastAPI and Kafka",
            entities=["Python", "FastAPI", "Kafka"],
        ),
        rec(
            "epi-demo",
            "User said the demo went badly with the investors",
            region="episodic",
            kind="emotion",
            importance=0.5,
            created_at=AT - timedelta(days=8),
        ),
        rec(
            "epi-ci",
            "User complained the CI pipeline is slow",
            region="episodic",
            kind="emotion",
            importance=0.5,
            created_at=AT - timedelta(days=30),
        ),
        rec(
            "proc-login",
            "Fixed the login bug by clearing the session cache and restarting auth",
            region="procedural",
            kind="procedure",
            importance=0.65,
        ),
        rec(
            "order",
            "Refund approved for the customer complaint",
            entities=["SF123456"],
            vector=orthogonal_to_everything(),
        ),
        rec("zh-db", "我们用PostgreSQL做主数据库", kind="fact", entities=["PostgreSQL"]),
        rec(
            "zh-trip",
            "上周说过要去杭州出差",
            region="episodic",
            kind="task_state",
            created_at=AT - timedelta(days=7),
        ),
        rec(
            "db-old",
            "The team database is MySQL",
            created_at=AT - timedelta(days=60),
            status="superseded",
            superseded_by="db-new",
            history=history((AT - timedelta(days=60), "created"), (SUPERSEDED_AT, "superseded")),
        ),
        rec("db-new", "The team database is PostgreSQL 16", created_at=SUPERSEDED_AT),
        rec(
            "forgot",
            "The team database password hint is blue",
            status="forgotten",
            history=history((AT - timedelta(hours=2), "forgotten")),
        ),
        rec("future", "The team database will be CockroachDB", created_at=AT + timedelta(days=1)),
        rec(
            "argocd",
            "ArgoCD syncs every merge",
            vector=ENCODER.encode(["how do we roll out to production"])[0].tolist(),
        ),
        rec("other-ns", "User prefers PostgreSQL as the main database", namespace="other"),
    ]


@pytest.fixture
def engine() -> RecallEngine:
    index = HotIndex()
    for record in bank():
        index.apply(record)
    return RecallEngine(index, HashingEncoder())


def ids(memories: list) -> list[str]:  # type: ignore[type-arg]
    return [m.id for m in memories]


def test_semantic_query_finds_the_preference(engine: RecallEngine) -> None:
    result = engine.recall("ns", "which database does the user prefer?", at=AT)
    assert result[0].id == "pref-db"
    top = result[0]
    assert {"dense", "bm25"} <= set(top.explanation)
    assert top.explanation["dense"].rank >= 1 and top.provenance[0].event_id == "evt-pref-db"
    assert 0 < top.score <= 1 and 0 < top.freshness <= 1
    assert "other-ns" not in ids(result)


def test_exact_id_is_found_even_when_dense_misses(engine: RecallEngine) -> None:
    result = engine.recall("ns", "what happened with order SF123456", at=AT)
    assert result[0].id == "order"
    assert "entity" in result[0].explanation
    zh = engine.recall("ns", "订单SF123456怎么样了", at=AT)
    assert zh[0].id == "order"


def test_chinese_query(engine: RecallEngine) -> None:
    result = engine.recall("ns", "我们用什么数据库", at=AT)
    assert result[0].id == "zh-db"


class ReadsLittle(HashingEncoder):
    """An encoder that says it knows only ``share`` of any text's word pieces."""

    def __init__(self, share: float) -> None:
        super().__init__()
        self.share = share

    def known_share(self, text: str) -> float:
        return self.share


@pytest.mark.parametrize(
    ("encoder", "first"), [(HashingEncoder(), "alike"), (ReadsLittle(0.2), "words")]
)
def test_a_cosine_counts_as_much_as_the_encoder_reads_of_the_question(
    encoder: HashingEncoder, first: str
) -> None:
    # "alike" shares no word with the question, yet its vector is the question's own (as
    # MiniLM makes two Chinese texts of unknown pieces alike); "words" says what is asked.
    question = "猫粮一般在哪里买"
    index = HotIndex()
    index.apply(make_record("words", "猫粮都是在宠物店买的", encoder=ENCODER))
    index.apply(
        make_record("alike", "周五晚上组里聚餐", vector=ENCODER.encode([question])[0].tolist())
    )
    result = RecallEngine(index, encoder).recall("ns", question, at=AT, truncate=False)
    assert ids(result)[0] == first


def test_temporal_window_brings_last_weeks_memories(engine: RecallEngine) -> None:
    memories, trace = engine.recall_with_trace(
        "ns", "what did the user say last week", at=AT, truncate=False, limit=5
    )
    assert trace.route == "episodic" and trace.window_label == "last week"
    assert memories[0].id == "epi-demo"
    assert "temporal" in memories[0].explanation
    assert "epi-ci" not in ids(memories[:1])
    zh, zh_trace = engine.recall_with_trace("ns", "上周我说了什么", at=AT)
    assert zh_trace.window_label == "上周" and zh[0].id == "zh-trip"


def test_superseded_and_forgotten_are_dropped(engine: RecallEngine) -> None:
    result = engine.recall("ns", "what is the team database", at=AT, truncate=False, limit=10)
    assert "db-new" in ids(result)
    assert not {"db-old", "forgot", "future"} & set(ids(result))


def test_include_history_marks_and_chains(engine: RecallEngine) -> None:
    result = engine.recall(
        "ns", "what is the team database", at=AT, truncate=False, limit=10, include_history=True
    )
    by_id = {m.id: m for m in result}
    assert by_id["db-old"].status == "superseded"
    assert by_id["db-old"].supersede_chain == ["db-new"]
    assert by_id["db-old"].history is not None
    assert "forgot" not in by_id  # forgotten is never recalled, history or not
    assert "future" not in by_id  # not yet created at AT, history or not


def test_as_of_an_earlier_time(engine: RecallEngine) -> None:
    before = SUPERSEDED_AT - timedelta(days=1)
    result = engine.recall("ns", "what is the team database", at=before, truncate=False, limit=10)
    assert "db-old" in ids(result)
    old = next(m for m in result if m.id == "db-old")
    assert old.status == "active"
    assert "db-new" not in ids(result)


def test_fallback_to_other_regions(engine: RecallEngine) -> None:
    memories, trace = engine.recall_with_trace("ns", "how do we roll out to production", at=AT)
    assert trace.route == "procedural" and trace.fallback_used
    assert memories[0].id == "argocd" and memories[0].via_fallback


def test_explicit_regions_filter_every_path(engine: RecallEngine) -> None:
    result = engine.recall(
        "ns",
        "order SF123456 database PostgreSQL",
        at=AT,
        regions=["episodic"],
        truncate=False,
        limit=10,
    )
    assert result and {m.region for m in result} == {"episodic"}


def test_truncation_limit_and_budget(engine: RecallEngine) -> None:
    loose = engine.recall("ns", "database", at=AT, truncate=False, limit=4)
    assert len(loose) == 4
    assert len(engine.recall("ns", "database", at=AT)) <= 5
    assert (
        len(engine.recall("ns", "database", at=AT, truncate=False, limit=4, budget_chars=120)) == 1
    )


def test_encoder_called_once_and_context_block(engine: RecallEngine) -> None:
    encoder = engine.encoder
    assert isinstance(encoder, HashingEncoder)
    before = encoder.calls
    block = engine.format_context("ns", "which database does the user prefer?", at=AT)
    assert encoder.calls == before + 1
    assert block.startswith("- [") and "(mem:pref-db)" in block and len(block) <= 1000


def test_empty_namespace_and_naive_time(engine: RecallEngine) -> None:
    assert engine.recall("nobody", "anything", at=AT) == []
    with pytest.raises(NaiveTime):
        engine.recall("ns", "anything", at=datetime(2024, 5, 15))


def test_erase_removes_from_every_path(engine: RecallEngine) -> None:
    assert engine.index.remove("order")
    result = engine.recall("ns", "order SF123456", at=AT, truncate=False, limit=10)
    assert "order" not in ids(result)


def test_real_encoder_smoke() -> None:
    from pipeline.models.encoders import EncoderUnavailable, load_encoder

    try:
        encoder = load_encoder("minilm")
    except EncoderUnavailable:
        pytest.skip("minilm encoder not installed")
    index = HotIndex()
    at = datetime(2024, 5, 15, tzinfo=UTC)
    texts = {
        "db": "We use PostgreSQL as our primary database",
        "food": "User loves spicy Sichuan food",
        "deploy": "To deploy, run make release and then tag the commit",
    }
    vectors = encoder.encode(list(texts.values()))
    for (memory_id, text), vector in zip(texts.items(), vectors, strict=True):
        index.apply(make_record(memory_id, text, vector=vector.tolist()))
    engine = RecallEngine(index, encoder)
    assert engine.recall("ns", "which database do we use?", at=at)[0].id == "db"
    assert engine.recall("ns", "steps to deploy", at=at)[0].id == "deploy"


def test_chinese_context_lines_get_chinese_tags(engine: RecallEngine) -> None:
    block = engine.format_context("ns", "我们用什么数据库", at=AT)
    first = block.split("\n")[0]
    assert first.startswith("- [") and "[事实]" in first and first.endswith("(mem:zh-db)")
    assert "[fact]" in engine.format_context("ns", "我们用什么数据库", at=AT, language="en")


def comparable_remarks(margin: float) -> RecallEngine:
    """Two calls with grandma 40 days apart; the older is a little closer to the question."""
    index = HotIndex()
    for memory_id, content, age in (
        ("allotment", "Called grandma, she told me about her allotment", 41),
        ("paint", "Called grandma, she told me all about her watercolour class", 1),
    ):
        index.apply(
            make_record(memory_id, content, encoder=ENCODER, created_at=AT - timedelta(days=age))
        )
    tuning = dataclasses.replace(DEFAULT_TUNING, comparable_margin=margin)
    return RecallEngine(index, HashingEncoder(), tuning=tuning)


def test_the_fresher_of_two_comparable_remarks_answers_first() -> None:
    query = "What did grandma tell me about when I called?"
    on = comparable_remarks(0.1)
    assert ids(on.recall("ns", query, at=AT, truncate=False, limit=5)) == ["paint", "allotment"]
    # Off, the closer older remark comes first: the rule is what orders them.
    off = comparable_remarks(0.0).recall("ns", query, at=AT, truncate=False, limit=5)
    assert ids(off) == ["allotment", "paint"]
    # Asked for specifically, the older one is still found first.
    assert on.recall("ns", "What about her allotment?", at=AT, limit=5)[0].id == "allotment"
