"""Property: whatever the interleaving, the batch sizes, the restarts and the re-sent prepared
events, the live state equals a replay of the prepared log and an uninterrupted run — record for
record: ids, statuses, contents, importance, activation, access counts, links, history (I2, I4).

The stages' own pure code runs through ``LocalPipeline`` (no broker; the integration version of
this property runs on a real one, ``tests/integration/test_exactness.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ingest_support import T0, BagOfWordsEncoder

from pipeline.ingest.local import LocalPipeline
from pipeline.memory.rules.extraction import memory_id
from pipeline.runtime.settings import MemoryPolicy
from schemas.events import CommandIssued, MemoriesRecalled, RecallHit, TurnRecorded

NAMESPACES = ("acme", "globex", "initech")
TEXTS = (
    "We use MySQL for the billing database",
    "we moved from MySQL to PostgreSQL",
    "We use MySQL for the billing database",  # a restatement confirms
    "My locker code is 4711",
    "my locker code is 4711 now",
    "I prefer dark mode in every editor",
    "I prefer dark mode",
    "The fix was to restart the gateway and clear the cache",
    "From now on all code in TypeScript",
    "From now on all code in Python",
    "I'm working on the roadmap, the deadline is Friday",
    "thanks!",
    "lol ok",
    "我们用 MySQL 做计费数据库",
    "我的储物柜密码是 8812",
)
QUERIES = ("my locker code", "billing database", "dark mode", "储物柜密码")
# Light consolidation every 3 turns, so cooling sweeps fall inside short programs too; segments
# of up to 3 turns, so which segment is "current" after a restart is tested.
POLICY = MemoryPolicy(
    light_consolidation_every=3,
    cold_activation=0.4,
    segment_boundary_cosine=-1.0,  # every turn joins the current segment: order matters
    segment_max_turns=3,
)


@dataclass(frozen=True)
class Step:
    kind: str  # turn | forget | erase | tick | recall | pin | cut
    namespace: str
    text: str = ""
    days: float = 0.0
    # Where the program processes what was published so far, and how.
    prepare_batch: int = 64
    consolidate_batch: int = 500
    resend: int = 0
    restart: bool = False


steps = st.one_of(
    st.builds(Step, st.just("turn"), st.sampled_from(NAMESPACES), st.sampled_from(TEXTS)),
    st.builds(Step, st.just("forget"), st.sampled_from(NAMESPACES), st.sampled_from(QUERIES)),
    st.builds(Step, st.just("erase"), st.sampled_from(NAMESPACES), st.sampled_from(QUERIES)),
    st.builds(
        Step,
        st.just("tick"),
        st.sampled_from(NAMESPACES),
        days=st.floats(min_value=0.0, max_value=120.0, allow_nan=False),
    ),
    st.builds(Step, st.just("recall"), st.sampled_from(NAMESPACES), st.sampled_from(TEXTS)),
    st.builds(Step, st.just("pin"), st.sampled_from(NAMESPACES), st.sampled_from(TEXTS)),
    st.builds(
        Step,
        st.just("cut"),
        st.sampled_from(NAMESPACES),
        prepare_batch=st.integers(min_value=1, max_value=9),
        consolidate_batch=st.integers(min_value=1, max_value=9),
        resend=st.integers(min_value=0, max_value=4),
        restart=st.booleans(),
    ),
)


class Program:
    """Turns the steps into input events with stable ids (the same for every run)."""

    def __init__(self) -> None:
        self.count = 0
        self.turns: dict[tuple[str, str], str] = {}  # (namespace, text) -> first event id

    def event(self, step: Step, index: int) -> Any:
        self.count += 1
        at = T0 + timedelta(hours=index) + timedelta(days=step.days)
        event_id = f"e{self.count}"
        ns = step.namespace
        if step.kind == "turn":
            self.turns.setdefault((ns, step.text), event_id)
            return TurnRecorded(
                event_id=event_id,
                namespace=ns,
                event_time=at,
                session_id=f"s{index // 12}",
                speaker="alice",
                text=step.text,
            )
        if step.kind in {"forget", "erase"}:
            return CommandIssued(
                event_id=event_id, namespace=ns, event_time=at, command=step.kind, query=step.text
            )
        if step.kind == "tick":
            return CommandIssued(event_id=event_id, namespace=ns, event_time=at, command="tick")
        # recall signals and pins name the memory a turn would have formed (content-addressed).
        source = self.turns.get((ns, step.text))
        target = memory_id(ns, [source], step.text) if source else "m_missing"
        if step.kind == "pin":
            return CommandIssued(
                event_id=event_id, namespace=ns, event_time=at, command="pin", memory_ids=[target]
            )
        return MemoriesRecalled(
            event_id=event_id,
            namespace=ns,
            event_time=at,
            query=step.text,
            hits=[RecallHit(memory_id=target, rank=0, score=0.9)],
        )


def dump(records: dict[str, Any]) -> dict[str, Any]:
    return {memory_id: record.model_dump(mode="json") for memory_id, record in records.items()}


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(st.lists(steps, min_size=1, max_size=60))
def test_live_with_restarts_equals_replay_and_an_uninterrupted_run(program: list[Step]) -> None:
    encoder = BagOfWordsEncoder()
    live = LocalPipeline(encoder, POLICY, partitions=2)
    straight = LocalPipeline(encoder, POLICY, partitions=2)
    live_events, straight_events = Program(), Program()
    for index, step in enumerate(program):
        if step.kind == "cut":
            live.prepare(step.prepare_batch, resend_last=step.resend)
            live.consolidate(step.consolidate_batch)
            if step.restart:
                live.restart()
            continue
        live.publish(step.namespace, live_events.event(step, index))
        straight.publish(step.namespace, straight_events.event(step, index))
    live.prepare(7, resend_last=2)
    live.consolidate(5)
    straight.run()

    assert dump(live.records()) == dump(straight.records()), "restarts and batches change nothing"
    assert dump(live.replayed()) == dump(live.records()), "a replay rebuilds the live state"
    assert live.watermarks() == straight.watermarks()
