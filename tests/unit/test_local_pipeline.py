"""``LocalPipeline``: restart = restore from the committed state, and it must decide exactly as an
uninterrupted run (records, counters, segments, the light consolidation schedule); re-prepared
inputs are skipped; a replay of the prepared log rebuilds the same records (I2, I4)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from ingest_support import DAY, T0, BagOfWordsEncoder, ExactEncoder, at_cosine

from pipeline.ingest.local import LocalPipeline
from pipeline.runtime.settings import MemoryPolicy
from schemas.events import CommandIssued, CommandName, MemoriesRecalled, RecallHit, TurnRecorded
from schemas.memory import MemoryRecord

MYSQL = "We use MySQL for the billing database"
POSTGRES = "we moved from MySQL to PostgreSQL"
OFFICE = "The office is in the city center"
PREFERENCE = "I prefer dark mode"
ADDRESS = "My home address is 12 Elm Street"


class Script:
    """Input events for one namespace with stable event ids (the same in every run)."""

    def __init__(self, namespace: str = "acme") -> None:
        self.namespace = namespace
        self.count = 0

    def _id(self, prefix: str) -> str:
        self.count += 1
        return f"{self.namespace}-{prefix}-{self.count}"

    def turn(self, text: str, at: Any = T0, *, session_id: str = "s1", **kw: Any) -> TurnRecorded:
        return TurnRecorded(
            event_id=kw.pop("event_id", None) or self._id("turn"),
            namespace=self.namespace,
            event_time=at,
            session_id=session_id,
            speaker=kw.pop("speaker", "alice"),
            text=text,
        )

    def command(self, command: CommandName, at: Any = T0, **fields: Any) -> CommandIssued:
        return CommandIssued(
            event_id=self._id("cmd"),
            namespace=self.namespace,
            event_time=at,
            command=command,
            **fields,
        )

    def recalled(self, memory_ids: list[str], at: Any = T0) -> MemoriesRecalled:
        return MemoriesRecalled(
            event_id=self._id("recall"),
            namespace=self.namespace,
            event_time=at,
            hits=[RecallHit(memory_id=m, rank=r, score=0.9) for r, m in enumerate(memory_ids)],
        )


def conversation(script: Script) -> list[Any]:
    minute = timedelta(minutes=1)
    return [
        script.turn("hi", T0),
        script.turn(MYSQL, T0 + minute),
        script.turn(OFFICE, T0 + 2 * minute),
        script.turn(PREFERENCE, T0 + 3 * minute),
        script.turn(OFFICE + "!", T0 + 4 * minute),
        script.turn(ADDRESS, T0 + 5 * minute),
        script.command("forget", T0 + 6 * minute, query="forget my home address"),
        script.turn(POSTGRES, T0 + timedelta(hours=1)),
        script.turn("以后所有代码都用 TypeScript", T0 + timedelta(hours=2), speaker="bob"),
        script.turn("the fix was to restart the worker", T0 + timedelta(hours=3)),
        script.command("tick", T0 + 200 * DAY),
        script.turn("ok thanks", T0 + 200 * DAY),
        script.command("erase", T0 + 201 * DAY, query="the fix for the worker"),
        script.command("tick", T0 + 400 * DAY),
    ]


def dump(records: dict[str, MemoryRecord]) -> list[dict[str, Any]]:
    return [records[i].model_dump(mode="json") for i in sorted(records)]


def counters(pipeline: LocalPipeline) -> dict[str, Any]:
    return {
        namespace: bank.counters()
        for tables in pipeline.tables.values()
        for namespace, bank in sorted(tables.banks.items())
    }


def run(events: list[Any], *, cuts: tuple[int, ...] = (), **options: Any) -> LocalPipeline:
    """Publish and run ``events``; restart the pipeline after each index in ``cuts``."""
    pipeline = LocalPipeline(options.pop("encoder", None) or BagOfWordsEncoder(), **options)
    for index, event in enumerate(events):
        pipeline.publish(event.namespace, event)
        if index + 1 in cuts:
            pipeline.run()
            pipeline.restart()
    pipeline.run()
    return pipeline


def assert_same(resumed: LocalPipeline, reference: LocalPipeline) -> None:
    assert dump(resumed.records()) == dump(reference.records())
    assert counters(resumed) == counters(reference)
    assert resumed.watermarks() == reference.watermarks()


@pytest.mark.parametrize("cut", range(1, 14))
def test_a_restart_anywhere_equals_an_uninterrupted_run(cut: int) -> None:
    reference = run(conversation(Script()))

    resumed = run(conversation(Script()), cuts=(cut,))

    assert_same(resumed, reference)
    assert reference.records()  # the log left memories to compare


def test_restarts_after_every_event_equal_an_uninterrupted_run_on_several_partitions() -> None:
    def events() -> list[Any]:
        acme, globex, initech = Script("acme"), Script("globex"), Script("initech")
        mixed = zip(conversation(acme), conversation(globex), conversation(initech), strict=True)
        return [event for triple in mixed for event in triple]

    reference = run(events(), partitions=3)
    every = tuple(range(1, len(events())))

    resumed = run(events(), partitions=3, cuts=every)

    assert_same(resumed, reference)
    assert len({r.namespace for r in reference.records().values()}) == 3


def test_a_restart_keeps_the_sessions_segment() -> None:
    billing, billing2, billing3 = "billing runs nightly", "billing export is slow", "billing is ok"
    cats = "cats are nice"
    vectors = {
        billing: [1.0],
        billing2: at_cosine(0.6),
        billing3: at_cosine(0.7, 2),
        cats: at_cosine(0.0, 3),
    }

    def events() -> list[Any]:
        script = Script()
        return [script.turn(text) for text in (billing, billing2, billing3, cats)]

    reference = run(events(), encoder=ExactEncoder(vectors))
    resumed = run(events(), encoder=ExactEncoder(vectors), cuts=(2,))

    by_text = {r.content: r for r in resumed.records().values()}
    assert by_text[billing3].segment_id == by_text[billing].segment_id
    assert by_text[cats].segment_id != by_text[billing].segment_id
    assert_same(resumed, reference)


def test_a_restart_keeps_the_light_consolidation_schedule() -> None:
    policy = MemoryPolicy(light_consolidation_every=3)
    later = T0 + 200 * DAY

    def events() -> list[Any]:
        script = Script()
        return [
            script.turn(OFFICE, T0),
            script.turn("hi", later),
            script.turn("ok", later, event_id="third-turn"),
        ]

    for cut in (1, 2):
        resumed = run(events(), policy=policy, cuts=(cut,))

        [office] = resumed.records().values()
        assert office.status == "cold"
        assert office.history[-1].cause_event_id == "third-turn"
        assert_same(resumed, run(events(), policy=policy))


def test_a_restart_keeps_idle_detection() -> None:
    def events() -> list[Any]:
        script = Script()
        return [
            script.turn(OFFICE, T0),
            script.turn("hi", T0 + 200 * DAY),  # a recent turn: not idle yet
            script.command("tick", T0 + 200 * DAY + timedelta(seconds=299)),
            script.command("tick", T0 + 200 * DAY + timedelta(seconds=300)),
        ]

    reference = run(events())
    resumed = run(events(), cuts=(2,))

    assert [r.status for r in resumed.records().values()] == ["cold"]
    assert_same(resumed, reference)


def test_work_applied_but_not_committed_is_redone_after_a_restart() -> None:
    events = conversation(Script())
    reference = run(events)
    pipeline = LocalPipeline(BagOfWordsEncoder())
    for event in events[:5]:
        pipeline.publish(event.namespace, event)
    pipeline.run()
    for event in events[5:]:
        pipeline.publish(event.namespace, event)
    pipeline.prepare()
    # The worker applies the rest in memory and dies before its transaction commits.
    pipeline.tables[0].apply_all(pipeline.prepared_log(0)[5:])

    pipeline.restart()
    pipeline.consolidate()

    assert_same(pipeline, reference)


def test_re_prepared_inputs_after_a_restart_are_skipped() -> None:
    events = conversation(Script())
    reference = run(events)
    pipeline = LocalPipeline(BagOfWordsEncoder())
    for event in events[:6]:
        pipeline.publish(event.namespace, event)
    pipeline.run()
    pipeline.restart()
    for event in events[6:]:
        pipeline.publish(event.namespace, event)

    pipeline.prepare(resend_last=4)  # prepare crashed before its commit: 4 inputs again
    pipeline.consolidate()

    assert sum(out.counts["skipped_duplicates"] for out in pipeline.outputs) == 4
    assert len(pipeline.prepared_log(0)) == len(events) + 4
    assert_same(pipeline, reference)


def test_a_replay_of_the_prepared_log_rebuilds_the_live_records() -> None:
    events = conversation(Script())
    pipeline = LocalPipeline(BagOfWordsEncoder())
    for index, event in enumerate(events):
        pipeline.publish(event.namespace, event)
        if index % 4 == 3:
            pipeline.prepare(resend_last=2)
            pipeline.consolidate(batch_size=3)
            pipeline.restart()
    pipeline.run()

    assert dump(pipeline.replayed(batch_size=5)) == dump(pipeline.records())


def test_a_retried_turn_after_its_memory_was_erased_does_the_same_after_a_restart() -> None:
    def events() -> list[Any]:
        script = Script()
        office = script.turn(OFFICE, event_id="office-turn")
        return [
            office,
            script.command("erase", T0 + DAY, whole_namespace=True),
            office.model_copy(update={"event_time": T0 + 2 * DAY}),  # a client's late retry
        ]

    reference = run(events())
    resumed = run(events(), cuts=(2,))

    # After a hard erase the bank keeps nothing of the turn, not even that it was seen: the
    # retry is a new statement, live, restored and replayed alike.
    assert [r.content for r in reference.records().values()] == [OFFICE]
    assert_same(resumed, reference)
    assert dump(reference.replayed()) == dump(reference.records())


def test_a_rejected_input_moves_the_watermark_of_its_partition() -> None:
    pipeline = LocalPipeline(BagOfWordsEncoder())
    pipeline.publish("acme", Script().turn(OFFICE))
    pipeline.publish("acme", b"not json")
    pipeline.run()

    assert pipeline.watermarks()[0].offset == 1
    pipeline.restart()
    assert pipeline.tables[0].applied_offset == 1
