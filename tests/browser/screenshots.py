"""Take the dashboard screenshots in docs/ from a running scratch stack.

    .venv/bin/hindsight up --data-dir /tmp/shots-stack          # in another terminal
    .venv/bin/python tests/browser/screenshots.py --data-dir /tmp/shots-stack --out docs

Publishes the demo conversation into ``demo-alice`` (unless it already has memories) and one
malformed turn (so the operations page shows a dead letter), then saves a PNG per page with
headless Chromium (tests/browser/ensure.sh installs it). Use a scratch stack: it writes to it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from urllib.parse import quote

import orjson

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT), str(Path(__file__).parent)]

from browser_support import CHROMIUM, CHROMIUM_FLAGS  # noqa: E402

from pipeline.interfaces.client import Hindsight  # noqa: E402
from pipeline.runtime.demo import DEMO_NAMESPACE, load_sample  # noqa: E402
from pipeline.runtime.settings import Settings  # noqa: E402
from topics.catalogue import topic_names  # noqa: E402

MALFORMED = {
    "event_type": "TurnRecorded",
    "schema_version": 2,
    "event_id": "demo-broken-turn",
    "namespace": DEMO_NAMESPACE,
    "session_id": "s3",
    "speaker": "alice",
    "text": "   ",
    "event_time": "2024-03-10T10:06:00+00:00",
}


async def seed(settings: Settings) -> None:
    async with Hindsight.connect(settings) as client:
        if client.records(DEMO_NAMESPACE):
            return
        receipts = await client.retain_many(load_sample())
        for receipt in receipts:
            await client.wait_applied(receipt, timeout=120)
        producer = client._producer  # the client's own producer: one bad event, as any app could
        await producer.send_and_wait(
            topic_names(settings.topic_prefix)["events"],
            key=DEMO_NAMESPACE.encode(),
            value=orjson.dumps(MALFORMED),
        )


async def shoot(api: str, settings: Settings, out: Path) -> None:
    from playwright.async_api import async_playwright

    async with Hindsight.connect(settings) as client:
        records = client.records(DEMO_NAMESPACE)
    superseded = next((r for r in records if r.status == "superseded"), records[0])
    last = max(r.created_at for r in records).strftime("%Y-%m-%dT%H:%M:%S")
    ns = quote(DEMO_NAMESPACE)
    pages = {
        "dashboard": f"/ui/ns/{ns}",
        "dashboard-memory": f"/ui/ns/{ns}/memories/{superseded.id}",
        "dashboard-recall": f"/ui/ns/{ns}/recall?q=What+database+do+we+use%3F&at={last}",
        "dashboard-timeline": f"/ui/ns/{ns}/timeline",
        "dashboard-operations": "/ui/ops",
    }
    out.mkdir(parents=True, exist_ok=True)
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True
        )
        page = await browser.new_page(viewport={"width": 1280, "height": 800})
        for name, path in pages.items():
            await page.goto(api + path)
            await page.wait_for_load_state("networkidle")
            await page.screenshot(path=str(out / f"{name}.png"), full_page=name != "dashboard")
            print(out / f"{name}.png")
        await browser.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True, help="the data dir of a running `up`")
    parser.add_argument("--out", default=str(ROOT / "docs"))
    args = parser.parse_args()
    stack = orjson.loads((Path(args.data_dir) / "stack.json").read_bytes())
    settings = Settings(
        data_dir=Path(args.data_dir),
        bootstrap=stack["bootstrap"],
        topic_prefix=stack["topic_prefix"],
        partitions=stack["partitions"],
    )
    asyncio.run(seed(settings))
    asyncio.run(shoot(stack["api"], settings, Path(args.out)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
