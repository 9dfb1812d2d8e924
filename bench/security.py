"""Costs of the security features, printed as JSON (preliminary on a shared machine).

``python -m bench.security [--broker] [--requests N]``:
- ``argon2id_ms``: one Argon2id verification (what the first request with a key costs);
- ``cached_auth_us``: one ``KeyRing.authenticate`` on the cached path (every later request);
- with ``--broker``: embedded broker start-up without and with SASL/SCRAM, and the ACL set-up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pipeline.security import hashing
from pipeline.security.ring import KeyRing
from pipeline.security.scopes import parse_scope
from pipeline.security.tokens import format_key, new_key_id, new_secret
from schemas.keys import KeyCreated


def auth_costs(requests: int) -> dict[str, Any]:
    key_id, secret = new_key_id(), new_secret()
    encoded = hashing.hash_secret(secret)
    slow = []
    for _ in range(5):
        start = time.perf_counter()
        hashing.verify_secret(secret, encoded)
        slow.append((time.perf_counter() - start) * 1000)
    ring = KeyRing()
    ring.apply(
        KeyCreated(
            event_id="bench",
            key_id=key_id,
            scopes=[parse_scope("*:recall").grant()],
            secret_hash=encoded,
            created_at=datetime.now(UTC),
        )
    )
    ring.ready = True
    token = format_key(key_id, secret)

    async def run() -> list[float]:
        await ring.authenticate(token)  # the one Argon2id run
        timings = []
        for _ in range(requests):
            start = time.perf_counter()
            await ring.authenticate(token)
            timings.append((time.perf_counter() - start) * 1e6)
        return timings

    fast = asyncio.run(run())
    return {
        "argon2id_ms": round(statistics.median(slow), 1),
        "cached_auth_us": round(statistics.median(fast), 1),
        "cached_auth_p99_us": round(sorted(fast)[int(len(fast) * 0.99) - 1], 1),
        "requests": requests,
    }


def broker_startup() -> dict[str, Any]:
    from infra.broker import LocalKafka
    from topics.acls import acl_rules

    result: dict[str, Any] = {}
    for mode in ("none", "scram"):
        with tempfile.TemporaryDirectory(prefix=f"bench-{mode}-") as tmp:
            kafka = LocalKafka(Path(tmp), security=mode)  # type: ignore[arg-type]
            start = time.monotonic()
            kafka.start()
            result[f"start_{mode}_s"] = round(time.monotonic() - start, 1)
            try:
                if mode == "scram":
                    start = time.monotonic()
                    kafka.apply_acls(acl_rules())
                    result["acls_s"] = round(time.monotonic() - start, 1)
            finally:
                kafka.stop()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--broker", action="store_true", help="also time broker start-up")
    args = parser.parse_args()
    report = auth_costs(args.requests)
    if args.broker:
        report.update(broker_startup())
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
