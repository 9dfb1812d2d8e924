"""``hindsight bench scale-out``: stages scaled out on a three-broker cluster, with kill -9.

Starts a local three-broker KRaft cluster (replication factor 3), two ``prepare`` processes,
two ``consolidate`` processes and one ``sink``; publishes the LoCoMo dev slice (one namespace per
conversation); kills one ``prepare`` and one ``consolidate`` process with SIGKILL mid-ingest and
starts replacements; waits until consolidation has applied the whole log; then compares the live
state with a replay of the prepared log. Prints one JSON line:

``turns``, ``workers``, ``kills``, ``lost`` (input events never prepared, plus turns a replay
remembers that the live state lacks), ``duplicates`` (memories created twice from one turn),
``matches_replay``, ``rebalances`` (consolidate group rebalances seen by its members),
``takeover_s`` (longest time from a kill until the partitions that had work pending made
progress again), ``seconds``, plus per-kill details and the sink's row count.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from tqdm import tqdm

from bench.fleet import (
    Fleet,
    applied_offsets,
    differences,
    dumps,
    duplicate_sources,
    input_ends,
    live_records,
    replayed_records,
    topic_ends,
    wait_consolidated,
)
from bench.ingest import load_turns
from pipeline.ingest.replay import prepared_source
from pipeline.interfaces.client import Hindsight
from pipeline.runtime.kafka import stop_consumer
from pipeline.runtime.settings import Settings
from pipeline.runtime.stage_stats import read_stats
from pipeline.views.state_topic import partition_ids
from topics.admin import ensure_topics
from topics.catalogue import topic_names

POLL_S = 0.25
DEFAULT_DATA = Path("/work/shared/data/locomo_dev.json")


async def prepared_progress(settings: Settings) -> dict[int, int]:
    """End offsets of the prepared topic per partition (``prepare``'s progress)."""
    return await topic_ends(settings, "prepared")


async def takeover(
    progress: Callable[[], Awaitable[dict[int, int]]],
    before: dict[int, int],
    pending: set[int],
    killed_at: float,
    timeout_s: float = 300.0,
) -> float | None:
    """Seconds from ``killed_at`` until every partition in ``pending`` moved past ``before``."""
    waiting = set(pending)
    deadline = time.monotonic() + timeout_s
    while waiting and time.monotonic() < deadline:
        now = await progress()
        waiting = {p for p in waiting if now.get(p, -1) <= before.get(p, -1)}
        if waiting:
            await asyncio.sleep(POLL_S)  # polling offsets, bounded by the deadline
    return None if waiting else round(time.monotonic() - killed_at, 2)


async def missing_prepared(settings: Settings) -> int:
    """Input offsets that never reached the prepared topic (any copy of them counts)."""
    names = topic_names(settings.topic_prefix)
    ends = await input_ends(settings)
    seen: dict[int, set[int]] = {p: set() for p in ends}
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.bootstrap, group_id=None)
    await consumer.start()
    try:
        topic = names["prepared"]
        for partition in await partition_ids(settings.bootstrap or "", topic):
            tp = TopicPartition(topic, partition)
            end = (await consumer.end_offsets([tp]))[tp]
            consumer.assign([tp])
            await consumer.seek_to_beginning(tp)
            while await consumer.position(tp) < end:
                for message in (await consumer.getmany(tp, timeout_ms=500)).get(tp, []):
                    # The input position is plain on a sealed prepared event.
                    source = prepared_source(message.value)
                    if source is None:
                        continue
                    seen.setdefault(source.partition, set()).add(source.offset)
    finally:
        await stop_consumer(consumer)
    return sum(len(set(range(end)) - seen.get(p, set())) for p, end in ends.items())


async def run(data: Path, partitions: int, keep: bool, progress: bool) -> dict[str, Any]:
    from infra.broker import LocalKafkaCluster

    turns = load_turns(data)
    work = Path(tempfile.mkdtemp(prefix="hindsight-scale-out-"))
    loop = asyncio.get_running_loop()
    cluster = LocalKafkaCluster(work / "kafka", brokers=3)
    await loop.run_in_executor(None, cluster.start)
    started = time.perf_counter()
    settings = Settings(
        data_dir=work,
        bootstrap=cluster.bootstrap,
        topic_prefix="scale.",
        app_id="hindsight-scale",
        partitions=partitions,
        replication_factor=3,
    )
    fleet = Fleet(settings)
    kills: list[dict[str, Any]] = []
    bar = tqdm(total=4, desc="scale-out", unit="step", disable=not progress, file=sys.stderr)
    try:
        await ensure_topics(settings.bootstrap or "", settings.topic_prefix, partitions, 3)
        for name, stages in (
            ("prepare-1", ("prepare",)),
            ("prepare-2", ("prepare",)),
            ("consolidate-1", ("consolidate",)),
            ("consolidate-2", ("consolidate",)),
            ("sink-1", ("sink",)),
        ):
            fleet.start(name, stages)
        workers = len(fleet.processes)
        async with Hindsight.connect(settings) as client:
            await client.retain_many(turns)
        ends = await input_ends(settings)
        bar.update(1)

        # Kill a prepare process once about a third of the log is prepared.
        target = {p: end // 3 for p, end in ends.items()}
        await _wait_until(prepared_progress, settings, target, fleet)
        before = await prepared_progress(settings)
        pending = {p for p, end in ends.items() if before.get(p, 0) < end}
        killed_at = time.monotonic()
        fleet.kill("prepare-1")
        fleet.start("prepare-3", ("prepare",))
        kills.append(
            {
                "stage": "prepare",
                "takeover_s": await takeover(
                    lambda: prepared_progress(settings), before, pending, killed_at
                ),
            }
        )
        bar.update(1)

        # Kill a consolidate process once about half the log is consolidated.
        target = {p: end // 2 for p, end in ends.items()}
        await _wait_until(applied_offsets, settings, target, fleet, offset_is_count=False)
        before = await applied_offsets(settings)
        pending = {p for p, end in ends.items() if before.get(p, -1) < end - 1}
        killed_at = time.monotonic()
        fleet.kill("consolidate-1")
        fleet.start("consolidate-3", ("consolidate",))
        kills.append(
            {
                "stage": "consolidate",
                "takeover_s": await takeover(
                    lambda: applied_offsets(settings), before, pending, killed_at
                ),
            }
        )
        bar.update(1)

        await wait_consolidated(settings, fleet, timeout_s=1800)
        live = await live_records(settings)
        rebalances = sum(
            entry["counts"].get("rebalances", 0)
            for entry in read_stats(work)
            if entry["stage"] == "consolidate"
        )
        fleet.stop_all()
        rebuilt, _ = await replayed_records(settings, work / "replay")
        bar.update(1)
        live_dump, rebuilt_dump = dumps(live), dumps(rebuilt)
        problems = differences(live_dump, rebuilt_dump)
        live_sources = {s.event_id for r in live.values() for s in r.provenance}
        replay_sources = {s.event_id for r in rebuilt.values() for s in r.provenance}
        lost = await missing_prepared(settings) + len(replay_sources - live_sources)
        takeovers = [k["takeover_s"] for k in kills]
        return {
            "turns": len(turns),
            "workers": workers,
            "kills": fleet.kills,
            "lost": lost,
            "duplicates": duplicate_sources(live),
            "matches_replay": not problems,
            "rebalances": rebalances,
            "takeover_s": None if None in takeovers else max(takeovers),  # type: ignore[type-var]
            "seconds": round(time.perf_counter() - started, 1),
            "kill_details": kills,
            "memories": len(live),
            "differences": problems[:10],
            "partitions": partitions,
            "brokers": 3,
        }
    finally:
        bar.close()
        fleet.stop_all()
        await loop.run_in_executor(None, cluster.stop)
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


async def _wait_until(
    progress: Callable[[Settings], Awaitable[dict[int, int]]],
    settings: Settings,
    target: dict[int, int],
    fleet: Fleet,
    *,
    offset_is_count: bool = True,
    timeout_s: float = 900.0,
) -> None:
    """Until every partition's progress reached ``target`` (a count, or a last offset)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        now = await progress(settings)
        reached = all(
            (now.get(p, 0) if offset_is_count else now.get(p, -1) + 1) >= want
            for p, want in target.items()
        )
        if reached:
            return
        if fleet.failed():
            name = fleet.failed()[0]
            raise RuntimeError(f"{name} died:\n{fleet.log_tail(name)}")
        await asyncio.sleep(POLL_S)  # polling offsets, bounded by the deadline
    raise TimeoutError(f"progress did not reach {target} within {timeout_s:.0f}s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hindsight bench scale-out", description=__doc__)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON or JSONL")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data directory")
    args = parser.parse_args(argv)
    if not args.data.exists():
        parser.error(f"--data: {args.data} does not exist")
    result = asyncio.run(run(args.data, args.partitions, args.keep, progress=not args.json))
    if args.json:
        sys.stdout.write(orjson.dumps(result).decode() + "\n")
    else:
        for key, value in result.items():
            print(f"{key:>16}: {value}")
    return 0 if result["matches_replay"] and result["lost"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
