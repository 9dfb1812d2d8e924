"""``hindsight bench chaos --kills 20``: kill -9 random stage processes during an ingest.

Runs ``prepare``, ``consolidate`` and ``sink`` as separate processes (on the embedded broker, or
``--bootstrap``), publishes the LoCoMo dev slice, and while it is being ingested kills a random
stage process with SIGKILL at random moments, restarting it each time, ``--kills`` times. When
the log is consolidated it compares the live state with a replay of the prepared log. Prints one
JSON line with ``kills``, ``lost``, ``duplicates``, ``matches_replay`` (and ``turns``,
``seconds``, ``killed`` per stage, ``restores``, ``memories``).

Every loop is bounded: the kills are spread over a window derived from the data size, and every
wait has a deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
from tqdm import tqdm

from bench.fleet import (
    Fleet,
    differences,
    dumps,
    duplicate_sources,
    live_records,
    replayed_records,
    wait_consolidated,
)
from bench.ingest import load_turns
from bench.scale_out import DEFAULT_DATA, missing_prepared
from pipeline.interfaces.client import Hindsight
from pipeline.runtime.settings import Settings
from pipeline.runtime.stage_stats import read_stats
from topics.admin import ensure_topics

STAGES = ("prepare", "consolidate", "sink")


async def run(
    data: Path, kills: int, seed: int, bootstrap: str | None, keep: bool, progress: bool
) -> dict[str, Any]:
    from infra.broker import LocalKafka

    rng = random.Random(seed)
    turns = load_turns(data)
    work = Path(tempfile.mkdtemp(prefix="hindsight-chaos-"))
    loop = asyncio.get_running_loop()
    broker: LocalKafka | None = None
    if bootstrap is None:
        broker = LocalKafka(work / "kafka")
        await loop.run_in_executor(None, broker.start)
        bootstrap = broker.bootstrap
    settings = Settings(
        data_dir=work,
        bootstrap=bootstrap,
        topic_prefix=f"chaos{int(time.time())}.",
        app_id=f"hindsight-chaos-{int(time.time())}",
        partitions=4,
    )
    fleet = Fleet(settings)
    started = time.perf_counter()
    killed: Counter[str] = Counter()
    generation: Counter[str] = Counter()
    try:
        await ensure_topics(bootstrap, settings.topic_prefix, settings.partitions, 1)
        for stage in STAGES:
            fleet.start(f"{stage}-0", (stage,))
        async with Hindsight.connect(settings) as client:
            await client.retain_many(turns)
        # Spread the kills over roughly the time the ingest takes at a modest rate.
        window_s = max(30.0, len(turns) / 25.0)
        moments = sorted(rng.uniform(2.0, window_s) for _ in range(kills))
        begun = time.monotonic()
        with tqdm(
            total=kills, desc="chaos", unit="kill", disable=not progress, file=sys.stderr
        ) as bar:
            for moment in moments:
                delay = begun + moment - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)  # the kill schedule, not a wait for a result
                stage = rng.choice(STAGES)
                name = next(n for n in fleet.processes if n.startswith(f"{stage}-"))
                fleet.kill(name)
                killed[stage] += 1
                generation[stage] += 1
                fleet.start(f"{stage}-{generation[stage]}", (stage,))
                bar.update(1)
        await wait_consolidated(settings, fleet, timeout_s=1800)
        live = await live_records(settings)
        restores = sum(
            e["counts"].get("restores", 0) for e in read_stats(work) if e["stage"] == "consolidate"
        )
        fleet.stop_all()
        rebuilt, _ = await replayed_records(settings, work / "replay")
        problems = differences(dumps(live), dumps(rebuilt))
        live_sources = {s.event_id for r in live.values() for s in r.provenance}
        replay_sources = {s.event_id for r in rebuilt.values() for s in r.provenance}
        return {
            "turns": len(turns),
            "kills": fleet.kills,
            "lost": await missing_prepared(settings) + len(replay_sources - live_sources),
            "duplicates": duplicate_sources(live),
            "matches_replay": not problems,
            "killed": dict(killed),
            "restores": restores,
            "memories": len(live),
            "seconds": round(time.perf_counter() - started, 1),
            "seed": seed,
            "differences": problems[:10],
        }
    finally:
        fleet.stop_all()
        if broker is not None:
            await loop.run_in_executor(None, broker.stop)
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hindsight bench chaos", description=__doc__)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="LoCoMo JSON or JSONL")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--bootstrap", help="a running Kafka instead of the embedded broker")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    if not args.data.exists():
        parser.error(f"--data: {args.data} does not exist")
    if args.kills < 1 or args.kills > 1000:
        parser.error("--kills: between 1 and 1000")
    result = asyncio.run(
        run(args.data, args.kills, args.seed, args.bootstrap, args.keep, progress=not args.json)
    )
    if args.json:
        sys.stdout.write(orjson.dumps(result).decode() + "\n")
    else:
        for key, value in result.items():
            print(f"{key:>16}: {value}")
    return 0 if result["matches_replay"] and result["lost"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
