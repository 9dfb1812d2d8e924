"""Follow Hindsight's change feed: one line per ``MemoryChanged`` (see docs/MEMORY_UPDATES.md).

    python examples/memory_updates_consumer.py --bootstrap 127.0.0.1:9092 \
        --namespace alice --from-beginning --max 10

Prints each change as a JSON line (``--format text`` for people), or POSTs it to ``--forward URL``.
With ``--namespace`` it reads only that namespace's partition: the feed is keyed and partitioned
by namespace, so one partition holds every change of a namespace, in order. Delivery is
at-least-once, so changes are de-duplicated on (memory_id, change, cause_event_id).

Entries are sealed with their memory's data key (docs/ERASURE.md): the consumer follows the
data-key topic and needs the stack's master key (``HINDSIGHT_MASTER_KEY`` or
``<data-dir>/master.key``). Entries of erased memories no longer open and are skipped; the
``erased`` entry itself is plain.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections import OrderedDict
from pathlib import Path

import httpx
import orjson
from aiokafka import AIOKafkaConsumer, TopicPartition
from pydantic import ValidationError

from pipeline.crypto.envelope import unseal
from pipeline.crypto.keystore import open_key_store
from pipeline.runtime.kafka import client_kwargs, stop_consumer
from pipeline.runtime.settings import Settings
from pipeline.views.state_topic import partition_for, partition_ids
from schemas.errors import DataKeyDestroyed, InvalidEvent, UnknownDataKey
from schemas.memory import MemoryChanged
from topics.catalogue import topic_names


class Seen:
    """Bounded memory of delivered changes: redeliveries (at-least-once) are skipped."""

    def __init__(self, size: int = 100_000) -> None:
        self._keys: OrderedDict[tuple[str, str, str], None] = OrderedDict()
        self._size = size

    def first_time(self, change: MemoryChanged) -> bool:
        key = (change.memory_id, change.change, change.cause_event_id)
        if key in self._keys:
            return False
        self._keys[key] = None
        if len(self._keys) > self._size:
            self._keys.popitem(last=False)
        return True


def as_text(change: MemoryChanged) -> str:
    related = ",".join(r[:8] for r in change.related_ids)
    related = f" related={related}" if related else ""
    content = change.content.replace("\n", " ")[:80]
    return (
        f"{change.event_time:%Y-%m-%dT%H:%M:%SZ} {change.namespace} {change.change:<11} "
        f"mem:{change.memory_id[:8]} [{change.region}/{change.kind}] {change.status}"
        f"{related} {content!r}"
    )


def stack_defaults(data_dir: str | None) -> dict[str, str]:
    """What `hindsight up` wrote to <data_dir>/stack.json, if anything."""
    path = Path(data_dir or ".hindsight") / "stack.json"
    return orjson.loads(path.read_bytes()) if path.exists() else {}


async def follow(args: argparse.Namespace) -> int:
    stack = stack_defaults(args.data_dir)
    bootstrap = args.bootstrap or stack.get("bootstrap")
    if not bootstrap:
        print("error: --bootstrap HOST:PORT (or run `hindsight up` first)", file=sys.stderr)
        return 2
    prefix = args.topic_prefix if args.topic_prefix is not None else stack.get("topic_prefix", "")
    topic = topic_names(prefix)["memory_updates"]
    # HINDSIGHT_KAFKA_* give the credentials on a secured cluster (docs/SECURITY.md).
    settings = Settings.from_env().with_overrides(
        bootstrap=bootstrap,
        topic_prefix=prefix,
        data_dir=Path(args.data_dir) if args.data_dir else None,
    )
    security = settings.kafka
    keys = await open_key_store(settings)
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=args.group,
        enable_auto_commit=False,
        auto_offset_reset="earliest" if args.from_beginning else "latest",
        isolation_level="read_committed",  # the feed is written in transactions
        **client_kwargs(security),
    )
    await consumer.start()
    forward = httpx.AsyncClient(timeout=10) if args.forward else None
    seen = Seen()
    delivered = 0
    try:
        partitions = await partition_ids(bootstrap, topic, security)
        if not partitions:
            print(f"error: topic {topic} does not exist", file=sys.stderr)
            return 2
        if args.group:
            consumer.subscribe([topic])  # offsets are committed: a restart resumes
        else:
            wanted = partitions
            if args.namespace:
                # Same partitioner as the producers: the namespace's whole feed is here.
                wanted = [partition_for(args.namespace, len(partitions))]
            assigned = [TopicPartition(topic, p) for p in wanted]
            consumer.assign(assigned)
            if args.from_beginning:
                await consumer.seek_to_beginning(*assigned)
            else:
                await consumer.seek_to_end(*assigned)
        async for message in consumer:
            try:
                if keys is not None:
                    await keys.wait_for_values([message.value], settings.key_wait_s)
                ring = None if keys is None else keys.ring
                content = unseal(message.value, ring, "memory_updates").content
                change = MemoryChanged.model_validate(orjson.loads(content or b""))
            except DataKeyDestroyed:
                continue  # its memory was erased since: nothing of it is readable any more
            except (ValidationError, orjson.JSONDecodeError, InvalidEvent, UnknownDataKey) as error:
                print(f"skipping offset {message.offset}: {error}", file=sys.stderr)
                continue
            if args.namespace and change.namespace != args.namespace:
                continue
            if seen.first_time(change):
                if forward is not None:
                    response = await forward.post(
                        args.forward, content=change.model_dump_json(), headers=JSON_HEADERS
                    )
                    response.raise_for_status()
                elif args.format == "text":
                    print(as_text(change), flush=True)
                else:
                    print(change.model_dump_json(), flush=True)
                delivered += 1
            if args.group:
                # Commit after delivery: a crash redelivers (at-least-once), never skips.
                await consumer.commit()
            if args.max and delivered >= args.max:
                break
    finally:
        if forward is not None:
            await forward.aclose()
        await stop_consumer(consumer)
        if keys is not None:
            await keys.stop()
    return 0


JSON_HEADERS = {"content-type": "application/json"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", help="Kafka HOST:PORT (default: from stack.json)")
    parser.add_argument("--topic-prefix", help="topic prefix (default: from stack.json, or '')")
    parser.add_argument(
        "--data-dir", help="where `hindsight up` wrote stack.json and master.key (.hindsight)"
    )
    parser.add_argument("--namespace", help="only this namespace (reads only its partition)")
    parser.add_argument("--from-beginning", action="store_true", help="replay retained history")
    parser.add_argument("--max", type=int, default=0, help="exit after N changes (0: never)")
    parser.add_argument("--format", choices=["json", "text"], default="json")
    parser.add_argument("--forward", metavar="URL", help="POST each change as JSON to URL")
    parser.add_argument("--group", help="consumer group: commit offsets and resume after restart")
    args = parser.parse_args(argv)
    try:
        return asyncio.run(follow(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
