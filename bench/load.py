"""``hindsight bench load --seconds 60 --agents 50``: bounded HTTP load on loopback.

Starts ``hindsight up`` (embedded broker unless ``--bootstrap``), then runs ``--agents``
concurrent agents against its HTTP API for ``--seconds``: each retains distinct facts in its own
namespace and every few turns recalls one it retained, waiting for its offset (read-your-writes).
Afterwards it waits until consolidation has applied the log and checks that every retained turn
formed or confirmed a memory. Prints one JSON line with ``requests``, ``errors``,
``retain_p99_ms``, ``recall_p99_ms``, ``lost`` (plus p50s, throughput, error kinds).

Only loopback targets; the run is bounded by ``--seconds`` plus a drain deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.fleet import live_records, wait_consolidated
from pipeline.runtime.settings import Settings

CLI = [sys.executable, "-m", "pipeline.interfaces.cli"]


def percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, math.ceil(share * len(ordered)) - 1)], 1)


class Agent:
    def __init__(self, number: int, client: httpx.AsyncClient, run: str) -> None:
        self.namespace = f"load-{run}-{number}"
        self.client = client
        self.number = number
        self.retained: list[str] = []  # event ids of accepted turns
        self.retain_ms: list[float] = []
        self.recall_ms: list[float] = []
        self.errors: Counter[str] = Counter()
        self.missed_reads = 0

    async def run(self, until: float) -> None:
        count = 0
        while time.monotonic() < until:
            count += 1
            marker = f"{self.number}x{count}"
            text = f"Parcel {marker} is stored in locker {count % 97} on floor {count % 9}."
            started = time.perf_counter()
            try:
                response = await self.client.post(
                    f"/v1/namespaces/{self.namespace}/turns",
                    json={
                        "text": text,
                        "speaker": "agent",
                        "session_id": f"s{count // 20}",
                        "event_id": f"{self.namespace}-{count}",
                    },
                )
            except httpx.HTTPError as error:
                self.errors[type(error).__name__] += 1
                continue
            self.retain_ms.append((time.perf_counter() - started) * 1000)
            if not response.is_success:
                self.errors[f"retain {response.status_code}"] += 1
                continue
            receipt = response.json()
            self.retained.append(receipt["event_id"])
            if count % 4 == 0:
                await self._recall(marker, receipt["event_id"], receipt["offset"])

    async def _recall(self, marker: str, event_id: str, offset: int) -> None:
        started = time.perf_counter()
        try:
            response = await self.client.post(
                f"/v1/namespaces/{self.namespace}/recall",
                json={
                    "query": f"Where is parcel {marker} stored?",
                    "wait_for_offset": offset,
                    "wait_timeout": 60,
                    "reinforce": False,
                    "limit": 5,
                },
            )
        except httpx.HTTPError as error:
            self.errors[type(error).__name__] += 1
            return
        self.recall_ms.append((time.perf_counter() - started) * 1000)
        if not response.is_success:
            self.errors[f"recall {response.status_code}"] += 1
        elif not any(
            source["event_id"] == event_id
            for memory in response.json()["memories"]
            for source in memory.get("provenance", [])
        ):
            # The turn just retained (or the memory it confirmed) was not among the results.
            self.missed_reads += 1


async def run(seconds: float, agents: int, bootstrap: str | None, keep: bool) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="hindsight-load-"))
    command = [*CLI, "up", "--data-dir", str(work), "--topic-prefix", "load."]
    if bootstrap:
        command += ["--bootstrap", bootstrap]
    env = {**os.environ, "HINDSIGHT_API_PORT": "0", "HF_HUB_OFFLINE": "1"}
    with (work / "up.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    stack_file = work / "stack.json"
    try:
        deadline = time.monotonic() + 300
        while not stack_file.exists():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"hindsight up did not start:\n{(work / 'up.log').read_text()}")
            await asyncio.sleep(0.2)  # waiting for the stack file, bounded by the deadline
        stack = orjson.loads(stack_file.read_bytes())
        headers = {"authorization": f"Bearer {stack['api_key']}"} if stack.get("api_key") else {}
        limits = httpx.Limits(max_connections=agents, max_keepalive_connections=agents)
        run_id = f"{int(time.time())}"
        async with httpx.AsyncClient(
            base_url=stack["api"], headers=headers, timeout=120, limits=limits
        ) as client:
            crew = [Agent(n, client, run_id) for n in range(agents)]
            started = time.monotonic()
            await asyncio.gather(*(agent.run(started + seconds) for agent in crew))
            elapsed = time.monotonic() - started
        settings = Settings(
            data_dir=work, bootstrap=stack["bootstrap"], topic_prefix=stack["topic_prefix"]
        )
        await wait_consolidated(settings, timeout_s=900)
        formed = {
            source.event_id
            for record in (await live_records(settings)).values()
            for source in record.provenance
        }
        retained = [event_id for agent in crew for event_id in agent.retained]
        errors: Counter[str] = Counter()
        for agent in crew:
            errors.update(agent.errors)
        retain_ms = [v for a in crew for v in a.retain_ms]
        recall_ms = [v for a in crew for v in a.recall_ms]
        requests = len(retain_ms) + len(recall_ms) + sum(errors.values())
        return {
            "requests": requests,
            "errors": sum(errors.values()),
            "retain_p99_ms": percentile(retain_ms, 0.99),
            "recall_p99_ms": percentile(recall_ms, 0.99),
            "lost": sum(1 for event_id in retained if event_id not in formed),
            "retain_p50_ms": percentile(retain_ms, 0.5),
            "recall_p50_ms": percentile(recall_ms, 0.5),
            "requests_per_s": round(requests / elapsed, 1),
            "retained": len(retained),
            "missed_reads": sum(a.missed_reads for a in crew),
            "error_kinds": dict(errors),
            "agents": agents,
            "seconds": round(elapsed, 1),
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
    parser = argparse.ArgumentParser(prog="hindsight bench load", description=__doc__)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--bootstrap", help="a running Kafka instead of the embedded broker")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    if not 0 < args.seconds <= 3600 or not 0 < args.agents <= 1000:
        parser.error("--seconds in (0, 3600] and --agents in (0, 1000]")
    result = asyncio.run(run(args.seconds, args.agents, args.bootstrap, args.keep))
    if args.json:
        sys.stdout.write(orjson.dumps(result).decode() + "\n")
    else:
        for key, value in result.items():
            print(f"{key:>16}: {value}")
    return 0 if result["lost"] == 0 and result["errors"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
