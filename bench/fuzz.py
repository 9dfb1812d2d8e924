"""``hindsight bench fuzz``: generated requests and events against a running stack.

Starts ``hindsight up`` (embedded broker unless ``--bootstrap``; auth on), then:

1. **HTTP**: schemathesis draws requests from the API's own OpenAPI schema — every operation,
   valid and invalid bodies, parameters and headers — ``--requests`` in all, half with the admin
   key and half without. Counted: ``http_requests``, ``http_5xx`` and ``http_4xx_unnamed`` (a 4xx
   whose JSON body does not name the ``field``).
2. **Events**: hypothesis draws ``--events`` input events — turns, commands and signals, valid
   and broken in every field, with right and wrong keys — plus random bytes, published to the
   input log. When consolidation has passed all of them, each must be either applied or
   dead-lettered: ``events``, ``dead_lettered``, ``applied``, ``unaccounted`` (should be 0) and
   ``worker_restarts`` (the worker process must still be the one it started with).

Prints one JSON line. Only loopback targets; every loop is bounded by the counts given.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import psutil
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from bench.fleet import input_ends, wait_consolidated
from pipeline.crypto.envelope import sealed_envelope
from pipeline.runtime.kafka import stop_consumer
from pipeline.runtime.settings import Settings
from pipeline.views.state_topic import partition_ids
from schemas.codec import decode_prepared
from schemas.errors import InvalidEvent
from topics.catalogue import topic_names

CLI = [sys.executable, "-m", "pipeline.interfaces.cli"]
EVENTS_PER_EXAMPLE = 100


# -- the stack ---------------------------------------------------------------------------------
def start_up(work: Path, bootstrap: str | None) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    command = [*CLI, "up", "--data-dir", str(work), "--topic-prefix", "fuzz."]
    if bootstrap:
        command += ["--bootstrap", bootstrap]
    env = {**os.environ, "HINDSIGHT_API_PORT": "0", "HF_HUB_OFFLINE": "1"}
    log = (work / "up.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    stack_file = work / "stack.json"
    deadline = time.monotonic() + 300
    while not stack_file.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"hindsight up did not start:\n{(work / 'up.log').read_text()}")
        time.sleep(0.2)  # waiting for the stack file, bounded by the deadline
    return process, orjson.loads(stack_file.read_bytes())


def worker_pids(work: Path) -> set[int]:
    """The stage worker processes of this stack (found by their data dir on the command line)."""
    found = set()
    for process in psutil.process_iter(["pid", "cmdline"]):
        cmdline = process.info.get("cmdline") or []
        if "worker" in cmdline and str(work) in cmdline:
            found.add(process.info["pid"])
    return found


# -- HTTP --------------------------------------------------------------------------------------
def fuzz_http(api: str, key: str | None, requests: int) -> dict[str, Any]:
    import schemathesis

    schema = schemathesis.openapi.from_url(f"{api}/openapi.json")
    strategy = schema.as_strategy()
    statuses: Counter[int] = Counter()
    problems: list[str] = []
    count = 0

    @settings(
        max_examples=requests,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy, authorised=st.booleans())
    def one(case: Any, authorised: bool) -> None:
        nonlocal count
        if count >= requests:
            return
        count += 1
        headers = {"Authorization": f"Bearer {key}"} if authorised and key else {}
        if headers:
            # The admin key replaces any key the schema's bearer scheme made up for this case;
            # the other half keeps what was generated (none, or a made-up key: both must 401).
            case.headers = {**(case.headers or {}), **headers}
        if isinstance(case.body, dict) and isinstance(case.body.get("wait_timeout"), int | float):
            # A valid read-your-writes wait may last minutes for an offset that never comes: the
            # fuzz is about what the API accepts and refuses, so waits are kept short.
            case.body["wait_timeout"] = min(case.body["wait_timeout"], 2.0)
        try:
            response = case.call(base_url=api, headers=headers, timeout=60)
        except Exception as error:  # a transport failure counts; it must not end the run
            statuses[0] += 1
            if len(problems) < 20:
                problems.append(f"{case.method} {case.formatted_path}: {error!r}"[:200])
            return
        statuses[response.status_code] += 1
        if response.status_code >= 500 and len(problems) < 20:
            problems.append(f"{case.method} {case.formatted_path}: {response.status_code}")
        if 400 <= response.status_code < 500:
            try:
                body = response.json()
            except ValueError:
                body = {}
            if not isinstance(body, dict) or not body.get("field"):
                statuses[-response.status_code] += 1  # negative: a 4xx that names no field
                if len(problems) < 20:
                    problems.append(
                        f"{case.method} {case.formatted_path}: {response.status_code} "
                        f"without a field: {response.text[:120]}"
                    )

    one()
    return {
        "http_requests": count,
        "http_5xx": sum(n for code, n in statuses.items() if code >= 500),
        "http_failed": statuses[0],
        "http_4xx": sum(n for code, n in statuses.items() if 400 <= code < 500),
        "http_4xx_unnamed": sum(n for code, n in statuses.items() if code < 0),
        "http_statuses": {str(code): n for code, n in sorted(statuses.items()) if code > 0},
        "http_problems": problems,
    }


# -- events ------------------------------------------------------------------------------------
NAMESPACES = st.sampled_from(["fuzz-a", "fuzz-b", "fuzz.c@d", "bad ns!", "", "x" * 200])
TEXT = st.one_of(st.text(max_size=300), st.just(" "), st.just("a" * 20_000), st.integers())
TIME = st.one_of(
    st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat()),
    st.datetimes().map(lambda d: d.isoformat()),  # no timezone: must be refused
    st.text(max_size=20),
)
VERSION = st.one_of(st.sampled_from([1, 2]), st.integers(-3, 99), st.text(max_size=3))


def _json(value: Any) -> bytes:
    """orjson, or the standard library for what orjson refuses (integers beyond 64 bits)."""
    try:
        return orjson.dumps(value, default=str)
    except TypeError:
        return json.dumps(value, default=str).encode()


def _drop(fields: dict[str, Any], which: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if k != which}


turns = st.fixed_dictionaries(
    {
        "event_type": st.just("TurnRecorded"),
        "schema_version": VERSION,
        "event_id": st.text(min_size=0, max_size=140),
        "namespace": NAMESPACES,
        "session_id": st.text(max_size=140),
        "speaker": st.text(max_size=140),
        "role": st.sampled_from(["user", "assistant", "system", "tool", "robot"]),
        "text": TEXT,
        "event_time": TIME,
        "timestamp": st.one_of(st.floats(allow_nan=True), st.integers()),
        "content": TEXT,
        "metadata": st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    }
)
commands = st.fixed_dictionaries(
    {
        "event_type": st.just("CommandIssued"),
        "schema_version": VERSION,
        "event_id": st.text(max_size=140),
        "namespace": NAMESPACES,
        "event_time": TIME,
        "command": st.sampled_from(["forget", "erase", "pin", "unpin", "tick", "feedback", "nuke"]),
        "memory_ids": st.lists(st.text(max_size=30), max_size=5),
        "whole_namespace": st.booleans(),
        "query": st.one_of(st.none(), st.text(max_size=200)),
        "score": st.one_of(st.none(), st.floats(allow_nan=True)),
    }
)
signals = st.fixed_dictionaries(
    {
        "event_type": st.just("MemoriesRecalled"),
        "schema_version": VERSION,
        "event_id": st.text(max_size=140),
        "namespace": NAMESPACES,
        "event_time": TIME,
        "hits": st.lists(
            st.fixed_dictionaries(
                {
                    "memory_id": st.text(max_size=30),
                    "rank": st.integers(-2, 5),
                    "score": st.floats(),
                }
            ),
            max_size=4,
        ),
    }
)
GOOD_NS = st.sampled_from(["fuzz-a", "fuzz-b", "fuzz.c@d"])
GOOD_TIME = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(UTC)
).map(lambda d: d.isoformat())
GOOD_ID = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=40)
valid_events = st.one_of(
    st.fixed_dictionaries(
        {
            "event_type": st.just("TurnRecorded"),
            "schema_version": st.just(2),
            "event_id": GOOD_ID,
            "namespace": GOOD_NS,
            "session_id": st.sampled_from(["s1", "s2"]),
            "speaker": st.sampled_from(["alice", "bob"]),
            "text": st.text(min_size=1, max_size=200).filter(str.strip),
            "event_time": GOOD_TIME,
        }
    ),
    st.fixed_dictionaries(
        {
            "event_type": st.just("CommandIssued"),
            "schema_version": st.just(1),
            "event_id": GOOD_ID,
            "namespace": GOOD_NS,
            "event_time": GOOD_TIME,
            "command": st.sampled_from(["forget", "tick", "pin"]),
            "query": st.one_of(st.none(), st.text(min_size=1, max_size=50)),
            "memory_ids": st.lists(GOOD_ID, max_size=2),
        }
    ),
    st.fixed_dictionaries(
        {
            "event_type": st.just("MemoriesRecalled"),
            "schema_version": st.just(1),
            "event_id": GOOD_ID,
            "namespace": GOOD_NS,
            "event_time": GOOD_TIME,
            "hits": st.lists(
                st.fixed_dictionaries(
                    {"memory_id": GOOD_ID, "rank": st.integers(0, 5), "score": st.floats(0, 1)}
                ),
                max_size=3,
            ),
        }
    ),
)
broken_events = st.one_of(turns, commands, signals).flatmap(
    lambda event: st.one_of(
        st.just(event), st.sampled_from(sorted(event)).map(lambda k: _drop(event, k))
    )
)
json_events = st.one_of(valid_events, broken_events)


@st.composite
def messages(draw: st.DrawFn) -> tuple[bytes | None, bytes | None]:
    kind = draw(st.sampled_from(["json", "json", "json", "bytes", "other-json"]))
    if kind == "bytes":
        return draw(st.one_of(st.none(), st.binary(max_size=20))), draw(st.binary(max_size=400))
    if kind == "other-json":
        value: Any = draw(st.one_of(st.lists(st.integers()), st.text(), st.none(), st.integers()))
        return b"fuzz-a", _json(value)
    event = draw(json_events)
    namespace = event.get("namespace")
    key_choice = draw(st.sampled_from(["namespace", "namespace", "namespace", "other", "none"]))
    if key_choice == "namespace" and isinstance(namespace, str):
        key: bytes | None = namespace.encode()
    elif key_choice == "other":
        key = b"fuzz-b"
    else:
        key = None
    return key, _json(event)


def draw_messages(count: int) -> list[tuple[bytes | None, bytes | None]]:
    drawn: list[tuple[bytes | None, bytes | None]] = []

    @settings(
        max_examples=max(1, count // EVENTS_PER_EXAMPLE),
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(st.lists(messages(), min_size=EVENTS_PER_EXAMPLE, max_size=EVENTS_PER_EXAMPLE))
    def collect(batch: list[tuple[bytes | None, bytes | None]]) -> None:
        drawn.extend(batch)

    collect()
    return drawn[:count]


async def fuzz_events(live: Settings, count: int) -> dict[str, Any]:
    names = topic_names(live.topic_prefix)
    drawn = await asyncio.get_running_loop().run_in_executor(None, draw_messages, count)
    before = await input_ends(live)
    producer = AIOKafkaProducer(
        bootstrap_servers=live.bootstrap, acks="all", max_request_size=1 << 20
    )
    await producer.start()
    try:
        futures = [
            await producer.send(names["events"], key=key, value=value) for key, value in drawn
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    await wait_consolidated(live, timeout_s=1800)
    after = await input_ends(live)
    ours = {p: range(before.get(p, 0), end) for p, end in after.items()}
    rejected, applied = await _prepared_outcomes(live, ours)
    dead = await _dead_letters(live, ours)
    published = sum(len(r) for r in ours.values())
    return {
        "events": published,
        "dead_lettered": len(dead),
        "applied": len(applied),
        "rejected_markers": len(rejected),
        "unaccounted": published - len(applied | dead),
        "dead_letter_markers_match": dead == rejected,
    }


async def _read_all(live: Settings, topic: str) -> list[Any]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=live.bootstrap, group_id=None, isolation_level="read_committed"
    )
    await consumer.start()
    found: list[Any] = []
    try:
        tps = [TopicPartition(topic, p) for p in await partition_ids(live.bootstrap or "", topic)]
        ends = await consumer.end_offsets(tps)
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        pending = {tp for tp in tps if ends[tp] > 0}
        while pending:
            fetched = await consumer.getmany(*pending, timeout_ms=500, max_records=5000)
            for messages_ in fetched.values():
                found.extend(messages_)
            pending = {tp for tp in pending if await consumer.position(tp) < ends[tp]}
    finally:
        await stop_consumer(consumer)
    return found


async def _prepared_outcomes(
    live: Settings, ours: dict[int, range]
) -> tuple[set[tuple[int, int]], set[tuple[int, int]]]:
    rejected: set[tuple[int, int]] = set()
    applied: set[tuple[int, int]] = set()
    for message in await _read_all(live, topic_names(live.topic_prefix)["prepared"]):
        try:
            envelope = sealed_envelope(message.value)
            # Sealed: an event that carries content (the stack's own ticks, sealed by its
            # client); its input position is readable on the envelope.
            prepared = None if envelope is not None else decode_prepared(message.value)
        except InvalidEvent:
            continue
        source = envelope.source if envelope is not None else prepared.source  # type: ignore[union-attr]
        if source is None or source.offset not in ours.get(source.partition, range(0)):
            continue
        position = (source.partition, source.offset)
        (rejected if prepared is not None and prepared.event is None else applied).add(position)
    return rejected, applied


async def _dead_letters(live: Settings, ours: dict[int, range]) -> set[tuple[int, int]]:
    names = topic_names(live.topic_prefix)
    dead: set[tuple[int, int]] = set()
    for message in await _read_all(live, names["dead_letters"]):
        letter = orjson.loads(message.value)
        if letter.get("source_topic") != names["events"]:
            continue
        position = (letter["source_partition"], letter["source_offset"])
        if letter["source_offset"] in ours.get(letter["source_partition"], range(0)):
            dead.add(position)
    return dead


async def run(requests: int, events: int, bootstrap: str | None, keep: bool) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="hindsight-fuzz-"))
    loop = asyncio.get_running_loop()
    process, stack = await loop.run_in_executor(None, start_up, work, bootstrap)
    started = time.perf_counter()
    try:
        workers_before = worker_pids(work)
        http = await loop.run_in_executor(
            None, fuzz_http, stack["api"], stack.get("api_key"), requests
        )
        live = Settings(
            data_dir=work,
            bootstrap=stack["bootstrap"],
            topic_prefix=stack["topic_prefix"],
            partitions=int(stack.get("partitions", 4)),
        )
        event_figures = await fuzz_events(live, events)
        workers_after = worker_pids(work)
        return {
            **http,
            **event_figures,
            "worker_restarts": len(workers_before - workers_after),
            "worker_alive": bool(workers_after) and workers_before <= workers_after,
            "api_alive": process.poll() is None,
            "seconds": round(time.perf_counter() - started, 1),
            "at": datetime.now(UTC).isoformat(),
        }
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(120)
            except subprocess.TimeoutExpired:
                process.kill()
        if not keep:
            shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hindsight bench fuzz", description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--bootstrap", help="a running Kafka instead of the embedded broker")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    if not 0 < args.requests <= 100_000 or not 0 < args.events <= 1_000_000:
        parser.error("--requests in (0, 100000], --events in (0, 1000000]")
    result = asyncio.run(run(args.requests, args.events, args.bootstrap, args.keep))
    if args.json:
        sys.stdout.write(orjson.dumps(result).decode() + "\n")
    else:
        for key, value in result.items():
            print(f"{key:>26}: {value}")
    ok = result["http_5xx"] == 0 and result["unaccounted"] == 0 and result["worker_restarts"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
