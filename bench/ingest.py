"""``hindsight bench ingest``: end-to-end ingest throughput, freshness, replay and footprint.

One run measures, on the same machine and model:
- ``embedding_only_turns_per_s``: the encoder alone over the same texts (the floor of the cost);
- ``turns_per_s``: produce → consolidated into the state topic (read by the client's view),
  through one worker process running the three stages; ``ingest_vs_encoder_pct`` compares it
  with the encoder alone, and ``stage_seconds`` says where each stage's time went;
- ``freshness_p50_ms`` / ``freshness_p99_ms``: turn published → recallable through the client,
  at a steady ``--steady-rate`` turns per second (default 20) once the bulk ingest is done;
- ``replay_events_per_s`` (consolidate from the prepared log, no model) and
  ``replay_matches_live`` (record for record); ``reindex_events_per_s`` (prepare again with the
  encoder into a prepared topic of its own, then consolidate);
- ``active_memories`` / ``compression``, ``worker_peak_rss_mb`` (the worker's VmHWM; with
  ``--split-stages`` each stage runs in a process of its own and ``stage_peak_rss_mb`` has each),
  ``milvus_server_peak_rss_mb`` (the Milvus Lite server process the sink writes to).
"""

from __future__ import annotations

import argparse
import asyncio
import math
import shutil
import sys
import tempfile
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson

from pipeline.ingest.replay import run_replay
from pipeline.ingest.worker import STAGES
from pipeline.interfaces.client import Hindsight
from pipeline.models.encoders import encoder_id, load_encoder
from pipeline.runtime.settings import Settings
from pipeline.runtime.stack import WorkerProcess, wait_worker_ready
from pipeline.runtime.stage_stats import read_stats, seconds_by_stage
from schemas.memory import MemoryRecord
from topics.admin import ensure_topics


def load_turns(path: Path) -> list[dict[str, Any]]:
    """Turns from a JSONL sample (one turn per line) or a LoCoMo-format JSON file."""
    raw = path.read_bytes()
    if path.suffix == ".jsonl":
        turns = []
        for number, line in enumerate(raw.splitlines(), start=1):
            if line.strip():
                row = orjson.loads(line)
                turns.append(
                    {
                        "namespace": row.get("namespace", "bench-sample"),
                        "session_id": row.get("session_id", "s1"),
                        "speaker": row.get("speaker", "user"),
                        "role": row.get("role", "user"),
                        "text": row["text"],
                        "event_time": datetime.fromisoformat(row["event_time"]),
                        "event_id": f"bench-{path.stem}-{number}",
                    }
                )
        return turns
    from bench.locomo.dataset import load_locomo

    turns = []
    for conversation in load_locomo(path):
        for turn in conversation.turns:
            turns.append(
                {
                    "namespace": f"bench-{conversation.sample_id}",
                    "session_id": f"session_{turn.session}",
                    "speaker": turn.speaker,
                    "text": turn.text,
                    "event_time": turn.event_time,
                    "event_id": f"bench-{conversation.sample_id}:{turn.dia_id}",
                    "metadata": {"dia_id": turn.dia_id},
                }
            )
    return turns


def peak_rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def views_match(live: list[MemoryRecord], rebuilt: list[MemoryRecord]) -> bool:
    """Record for record, everything but the vector (the replay snapshot leaves it out)."""

    def table(records: list[MemoryRecord]) -> dict[str, Any]:
        return {r.id: r.model_dump(mode="json", exclude={"vector"}) for r in records}

    return table(live) == table(rebuilt)


def percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)]


async def steady_freshness(client: Hindsight, rate: float, count: int, at: datetime) -> list[float]:
    """Publish ``count`` turns at ``rate`` per second; ms from publish to recallable for each."""
    loop = asyncio.get_running_loop()
    latencies: list[float] = []

    async def one(number: int) -> None:
        text = f"Freshness probe {number}: my parcel locker number is {70000 + number}."
        started = loop.time()
        receipt = await client.retain(
            f"bench-fresh-{number % 4}", text, event_time=at + timedelta(seconds=number)
        )
        await client.wait_applied(receipt, timeout=120)
        latencies.append((loop.time() - started) * 1000)

    tasks = []
    next_at = loop.time()
    for number in range(count):
        delay = next_at - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)  # pacing the load generator, not waiting for a result
        tasks.append(asyncio.create_task(one(number)))
        next_at += 1.0 / rate
    await asyncio.gather(*tasks)
    return latencies


def snapshot_records(path: str) -> list[MemoryRecord]:
    return [
        MemoryRecord.model_validate(orjson.loads(line))
        for line in Path(path).read_bytes().splitlines()
        if line.strip()
    ]


async def run(
    data: Path,
    settings: Settings,
    keep: bool = False,
    steady_rate: float = 20.0,
    steady_turns: int = 200,
    reindex: bool = True,
    split_stages: bool = False,
) -> dict[str, Any]:
    from infra.broker import LocalKafka

    turns = load_turns(data)
    work = Path(tempfile.mkdtemp(prefix="hindsight-bench-"))
    broker: LocalKafka | None = None
    settings = replace(settings, data_dir=work, milvus_uri=None)
    loop = asyncio.get_running_loop()
    try:
        if not settings.bootstrap:
            broker = LocalKafka(work / "kafka")
            await loop.run_in_executor(None, broker.start)
            settings = replace(settings, bootstrap=broker.bootstrap)
        settings = replace(settings, topic_prefix=f"bench{int(time.time())}.")
        await ensure_topics(settings.bootstrap or "", settings.topic_prefix, settings.partitions, 1)

        encoder = await loop.run_in_executor(
            None, load_encoder, settings.encoder, settings.encoder_threads
        )
        texts = [f"{t['speaker']}: {t['text']}" for t in turns]
        encoder.encode(texts[:64])  # warm-up, as the worker is warm when turns arrive
        started = time.perf_counter()
        await loop.run_in_executor(None, encoder.encode, texts)
        embedding_only = len(texts) / (time.perf_counter() - started)

        # One process for the three stages (the default deployment), or one per stage.
        workers = (
            [WorkerProcess(settings, f"worker-{stage}.log", (stage,)) for stage in STAGES]
            if split_stages
            else [WorkerProcess(settings)]
        )
        for worker in workers:
            worker.start()
        for worker in workers:
            await wait_worker_ready(settings, worker)
        async with Hindsight.connect(settings, encoder=encoder) as client:
            started = time.perf_counter()
            receipts = await client.retain_many(turns)
            last: dict[tuple[str, int], Any] = {}
            for receipt in receipts:
                last[(receipt.topic, receipt.partition)] = receipt
            for receipt in last.values():
                await client.wait_applied(receipt, timeout=1800)
            ingest_seconds = time.perf_counter() - started
            stage_seconds = seconds_by_stage(work)
            encoded_texts = sum(
                int(entry.get("counts", {}).get("encoded_texts", 0))
                for entry in read_stats(work)
                if entry.get("stage") == "prepare"
            )
            fresh = await steady_freshness(
                client, steady_rate, steady_turns, datetime(2030, 1, 1, tzinfo=UTC)
            )
            namespaces = sorted({t["namespace"] for t in turns})
            live = [r for ns in namespaces for r in client.records(ns)]
        peaks = {
            ",".join(worker.stages): peak_rss_mb(worker.process.pid) if worker.process else None
            for worker in workers
        }
        # The Milvus Lite server the sink's worker talks to (a store process, like the broker).
        milvus_peak = next(
            (
                peak_rss_mb(worker.milvus_server.process.pid)
                for worker in workers
                if worker.milvus_server is not None and worker.milvus_server.process is not None
            ),
            None,
        )
        for worker in workers:
            worker.stop()

        replay = await run_replay(settings, work / "replay", progress=False)
        rebuilt = [r for r in snapshot_records(replay["snapshot"]) if r.namespace in namespaces]
        reindexed: dict[str, Any] | None = None
        if reindex:
            reindexed = await run_replay(
                settings, work / "reindex", reindex_with=encoder, progress=False
            )
        active = sum(1 for r in live if r.status == "active")
        prepare = stage_seconds.get("prepare", {})
        encode_seconds = prepare.get("encode")
        turns_per_s = len(turns) / ingest_seconds
        reindex_summary = reindexed["reindex"] if reindexed else None
        return {
            "data": str(data),
            "turns": len(turns),
            "namespaces": len(namespaces),
            "encoder": encoder_id(encoder),
            "turns_per_s": round(turns_per_s, 1),
            "embedding_only_turns_per_s": round(embedding_only, 1),
            "ingest_vs_encoder_pct": round(turns_per_s / embedding_only * 100, 1),
            # Against the isolated encoder run (before the worker started) ...
            "pipeline_overhead_pct": round((embedding_only / turns_per_s - 1) * 100, 1),
            # ... and against the encoder time inside the prepare stage during this very ingest.
            "ingest_seconds": round(ingest_seconds, 2),
            "worker_encode_seconds": encode_seconds,
            "worker_batch_seconds": prepare.get("prepare"),
            "overhead_vs_worker_encode_pct": round((ingest_seconds / encode_seconds - 1) * 100, 1)
            if encode_seconds
            else None,
            "stage_seconds": stage_seconds,
            # prepare embeds each remembered turn and each stateful statement's slot frame, so
            # the encoder does more than one text per turn; per text it is this share of alone:
            "encoded_texts": encoded_texts,
            "ingest_vs_encoder_per_text_pct": round(
                encoded_texts / ingest_seconds / embedding_only * 100, 1
            )
            if encoded_texts
            else None,
            "freshness_p50_ms": round(percentile(fresh, 0.5) or 0.0, 1),
            "freshness_p99_ms": round(percentile(fresh, 0.99) or 0.0, 1),
            "freshness_turns": len(fresh),
            "freshness_rate_per_s": steady_rate,
            "replay_events_per_s": replay["events_per_s"],
            "replay_turns_per_s": replay["events_per_s"],  # the old key: every event is a turn
            "replay_seconds": replay["seconds"],
            "replay_sink_seconds": replay["sink_seconds"],
            "replay_matches_live": views_match(live, rebuilt),
            "reindex_events_per_s": reindex_summary["events_per_s"] if reindex_summary else None,
            "reindex_seconds": reindex_summary["seconds"] if reindex_summary else None,
            "memories": len(live),
            "active_memories": active,
            "compression": round(active / len(turns), 3) if turns else None,
            # The largest stage process (the only one unless --split-stages), and each one's.
            "worker_peak_rss_mb": max((p for p in peaks.values() if p is not None), default=None),
            "stage_peak_rss_mb": peaks,
            "milvus_server_peak_rss_mb": milvus_peak,
            "batch_size": settings.batch_size,
            "partitions": settings.partitions,
        }
    finally:
        if broker is not None:
            await loop.run_in_executor(None, broker.stop)
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hindsight bench ingest", description=__doc__)
    parser.add_argument("--data", required=True, type=Path, help="JSONL sample or LoCoMo JSON file")
    parser.add_argument("--bootstrap", help="use this Kafka instead of an embedded broker")
    parser.add_argument("--batch-size", type=int)
    parser.add_argument("--partitions", type=int)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the temporary data directory")
    parser.add_argument("--steady-rate", type=float, default=20.0, help="turns/s for freshness")
    parser.add_argument("--steady-turns", type=int, default=200)
    parser.add_argument("--no-reindex", action="store_true", help="skip the reindex measurement")
    parser.add_argument(
        "--split-stages",
        action="store_true",
        help="run prepare, consolidate and sink as three processes (stage_peak_rss_mb per stage)",
    )
    args = parser.parse_args(argv)
    settings = Settings.from_env().with_overrides(
        bootstrap=args.bootstrap, batch_size=args.batch_size, partitions=args.partitions
    )
    result = asyncio.run(
        run(
            args.data,
            settings,
            keep=args.keep,
            steady_rate=args.steady_rate,
            steady_turns=args.steady_turns,
            reindex=not args.no_reindex,
            split_stages=args.split_stages,
        )
    )
    if args.json:
        sys.stdout.write(orjson.dumps(result).decode() + "\n")
    else:
        for key, value in result.items():
            print(f"{key:>28}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
