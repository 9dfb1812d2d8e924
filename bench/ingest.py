"""``hindsight bench ingest``: end-to-end ingest throughput, replay rate and memory footprint.

One run measures, on the same machine and model:
- ``embedding_only_turns_per_s``: the encoder alone over the same texts (the floor of the cost);
- ``turns_per_s``: produce → applied in Milvus and the state topic, through the worker process;
- ``replay_turns_per_s`` and ``replay_matches_live``: a rebuild from the log into a fresh target;
- ``active_memories`` / ``compression``, ``worker_peak_rss_mb`` (the worker's VmHWM).
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
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from pipeline.ingest.replay import run_replay
from pipeline.interfaces.client import Hindsight
from pipeline.models.encoders import load_encoder
from pipeline.runtime.settings import Settings
from pipeline.runtime.stack import WorkerProcess, wait_worker_ready
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


def _comparable(record: MemoryRecord) -> tuple[str, str, str, float]:
    return (record.id, record.status, record.content, record.importance)


def views_match(
    live: list[MemoryRecord], rebuilt: list[MemoryRecord], tolerance: float = 1e-6
) -> bool:
    """Same memory ids, statuses and contents, importance within float tolerance."""
    left = sorted(map(_comparable, live))
    right = sorted(map(_comparable, rebuilt))
    return len(left) == len(right) and all(
        a[:3] == b[:3] and math.isclose(a[3], b[3], abs_tol=tolerance)
        for a, b in zip(left, right, strict=True)
    )


async def run(data: Path, settings: Settings, keep: bool = False) -> dict[str, Any]:
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

        worker = WorkerProcess(settings)
        worker.start()
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
            namespaces = sorted({t["namespace"] for t in turns})
            live = [r for ns in namespaces for r in client.records(ns)]
        peak = peak_rss_mb(worker.process.pid) if worker.process else None
        worker.stop()
        metrics = orjson.loads((work / "worker-metrics.json").read_bytes())

        replay = await run_replay(settings, work / "replay", encoder=encoder, progress=False)
        rebuilt = [
            MemoryRecord.model_validate({**orjson.loads(line), "vector": []})
            for line in Path(replay["snapshot"]).read_bytes().splitlines()
            if line.strip()
        ]
        active = sum(1 for r in live if r.status == "active")
        return {
            "data": str(data),
            "turns": len(turns),
            "namespaces": len(namespaces),
            "encoder": encoder.name,
            "turns_per_s": round(len(turns) / ingest_seconds, 1),
            "embedding_only_turns_per_s": round(embedding_only, 1),
            # Against the isolated encoder run (before the worker started) ...
            "pipeline_overhead_pct": round(
                (embedding_only / (len(turns) / ingest_seconds) - 1) * 100, 1
            ),
            # ... and against the encoder time inside the worker during this very ingest.
            "ingest_seconds": round(ingest_seconds, 2),
            "worker_encode_seconds": metrics.get("encode_seconds"),
            "worker_batch_seconds": metrics.get("batch_seconds"),
            "overhead_vs_worker_encode_pct": round(
                (ingest_seconds / metrics["encode_seconds"] - 1) * 100, 1
            )
            if metrics.get("encode_seconds")
            else None,
            "replay_turns_per_s": replay["events_per_s"],
            "replay_matches_live": views_match(live, rebuilt),
            "memories": len(live),
            "active_memories": active,
            "compression": round(active / len(turns), 3) if turns else None,
            "worker_peak_rss_mb": peak,
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
    args = parser.parse_args(argv)
    settings = Settings.from_env().with_overrides(
        bootstrap=args.bootstrap, batch_size=args.batch_size, partitions=args.partitions
    )
    result = asyncio.run(run(args.data, settings, keep=args.keep))
    if args.json:
        sys.stdout.write(orjson.dumps(result).decode() + "\n")
    else:
        for key, value in result.items():
            print(f"{key:>28}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
