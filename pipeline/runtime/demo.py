"""``hindsight demo``: the whole flow on the embedded stack with a bundled conversation."""

from __future__ import annotations

import sys
import time
from datetime import datetime
from importlib import resources
from typing import Any

import orjson
from tqdm import tqdm

from pipeline.interfaces.client import Hindsight
from pipeline.runtime.settings import Settings
from pipeline.runtime.stack import running_stack
from schemas.memory import MemoryRecord

DEMO_NAMESPACE = "demo-alice"

DEMO_QUERIES = [
    "What database do we use?",
    "Which language should new code be written in?",
    "How did we fix the SF123456 timeout?",
    "部署失败怎么解决？",
]


def load_sample() -> list[dict[str, Any]]:
    text = (
        resources.files("pipeline.samples").joinpath("demo_conversation.jsonl").read_text("utf-8")
    )
    turns = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        row = orjson.loads(line)
        row["event_time"] = datetime.fromisoformat(row["event_time"])
        row["namespace"] = DEMO_NAMESPACE
        row["event_id"] = f"demo-turn-{number:03d}"
        turns.append(row)
    return turns


def _format_record(record: MemoryRecord) -> str:
    sources = ",".join(s.event_id.removeprefix("demo-turn-") for s in record.provenance)
    extra = f" -> superseded by {record.superseded_by}" if record.superseded_by else ""
    triplet = f" {{{record.triplet.attribute}={record.triplet.value}}}" if record.triplet else ""
    return (
        f"{record.region:<10} {record.kind:<10} {record.importance:>4.2f} {record.status:<10} "
        f"turns[{sources}] {record.content[:70]}{triplet}{extra}"
    )


async def run_demo(settings: Settings) -> int:
    turns = load_sample()
    print(f"Hindsight demo — data under {settings.data_dir.resolve()} (delete it to start over)")
    print("starting Kafka, the pipeline stages and the recall view…", flush=True)
    started = time.perf_counter()
    async with running_stack(settings) as live, Hindsight.connect(live) as client:
        elapsed = time.perf_counter() - started
        print(f"stack up in {elapsed:.1f}s: Kafka {live.bootstrap}, Milvus Lite {live.milvus_path}")
        receipts = await client.retain_many(turns)
        print(f"published {len(receipts)} turns to {receipts[-1].topic}; waiting for the views…")
        # The one long step of the demo gets the one progress bar.
        with tqdm(total=len(receipts), unit="turn", desc="applied", file=sys.stdout) as bar:
            for receipt in receipts:
                await client.wait_applied(receipt, timeout=120)
                bar.update()
        records = sorted(client.records(DEMO_NAMESPACE), key=lambda r: (r.created_at, r.id))
        print(f"\n{len(records)} memories from {len(turns)} turns (chit-chat filtered):")
        print(f"{'region':<10} {'kind':<10} {'imp':>4} {'status':<10} provenance / content")
        for record in records:
            print("  " + _format_record(record))
        print("\nrecall (as of the last turn):")
        last = max(t["event_time"] for t in turns)
        for query in DEMO_QUERIES:
            result = await client.recall(DEMO_NAMESPACE, query, at=last, reinforce=False)
            print(f"? {query}")
            for line in (result.context or "(nothing)").splitlines():
                print(f"    {line}")
    print("\nstack stopped cleanly. Next: `hindsight up`, then open the dashboard it prints (/ui).")
    return 0
