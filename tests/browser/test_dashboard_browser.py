"""The dashboard in a real headless Chromium against the real stack (broker, stages, API).

Pages load without console errors; a retained turn shows up in the open memory table without a
reload; the recall playground shows each result's paths; a forgotten memory leaves the table.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from browser_support import Served, Watched
from playwright.async_api import expect

from pipeline.interfaces.client import Receipt

pytestmark = [pytest.mark.integration, pytest.mark.browser]

# Set to a directory to keep a screenshot of every page the first test visits.
SCREENSHOTS = os.environ.get("HINDSIGHT_SCREENSHOTS")


async def _retain(served: Served, namespace: str, text: str) -> Receipt:
    receipt = await served.client.retain(namespace, text, speaker="alice", session_id="s1")
    await served.client.wait_applied(receipt, timeout=60)
    return receipt


async def _open_live(watched: Watched, url: str) -> None:
    page = watched.page
    await page.goto(url)
    # The stream is subscribed once the server said "ready"; changes after that are shown.
    await expect(page.locator("body")).to_have_attribute("data-live", "open")
    await page.evaluate("window.__sameDocument = true")


async def _still_same_document(watched: Watched) -> bool:
    return bool(await watched.page.evaluate("window.__sameDocument === true"))


async def test_every_page_loads_without_console_errors(
    dashboard: Served, watched: Watched, namespace: str
) -> None:
    await _retain(dashboard, namespace, "We deploy with Argo CD from the main branch.")
    [record] = dashboard.client.records(namespace)
    paths = {
        "namespaces": "/ui",
        "memories": f"/ui/ns/{namespace}",
        "memory": f"/ui/ns/{namespace}/memories/{record.id}",
        "timeline": f"/ui/ns/{namespace}/timeline",
        "recall": f"/ui/ns/{namespace}/recall?q=how+do+we+deploy",
        "operations": "/ui/ops",
    }
    for name, path in paths.items():
        response = await watched.page.goto(dashboard.url + path)
        assert response is not None and response.status == 200, path
        await watched.page.wait_for_load_state("networkidle")
        if SCREENSHOTS:
            Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
            await watched.page.screenshot(path=f"{SCREENSHOTS}/{name}.png", full_page=True)
    assert watched.problems == []
    # The memory page showed the turn as it sits in the log.
    await watched.page.goto(dashboard.url + paths["memory"])
    await expect(watched.page.locator("#provenance")).to_contain_text("Argo CD from the main")
    assert watched.problems == []


async def test_a_retained_turn_appears_in_the_table_without_a_reload(
    dashboard: Served, watched: Watched, namespace: str
) -> None:
    await _retain(dashboard, namespace, "My favourite editor is Helix.")
    await _open_live(watched, f"{dashboard.url}/ui/ns/{namespace}")
    rows = watched.page.locator("#rows tr")
    await expect(rows).to_have_count(1)

    await _retain(dashboard, namespace, "Our on-call rotation changes every Monday at 09:00.")
    new_row = watched.page.locator("#rows tr", has_text="on-call rotation")
    await expect(new_row).to_have_count(1)
    await expect(rows).to_have_count(2)
    await expect(rows.first).to_contain_text("on-call rotation")  # newest first
    assert await _still_same_document(watched), "the page reloaded"
    assert watched.problems == []


async def test_the_recall_playground_shows_explanations(
    dashboard: Served, watched: Watched, namespace: str
) -> None:
    await _retain(dashboard, namespace, "The staging database is PostgreSQL 16 on port 5433.")
    page = watched.page
    await page.goto(f"{dashboard.url}/ui/ns/{namespace}/recall")
    await page.fill("input[name=q]", "Which port does the staging database use?")
    await page.click("form.recall-form button[type=submit]")
    result = page.locator("#results li.result").first
    await expect(result).to_contain_text("PostgreSQL 16")
    explanation = result.locator("table.explanation")
    await expect(explanation.locator("thead")).to_contain_text("dense")
    await expect(explanation.locator("thead")).to_contain_text("bm25")
    await expect(explanation.locator("thead")).to_contain_text("fused (RRF)")
    dense_rank = explanation.locator("tbody tr").first.locator("td").first
    await expect(dense_rank).to_have_text("1")
    await expect(page.locator("#trace")).to_contain_text("Route")
    await expect(page.locator("#context")).to_contain_text("PostgreSQL 16")
    assert watched.problems == []


async def test_a_forgotten_memory_disappears_from_the_table(
    dashboard: Served, watched: Watched, namespace: str
) -> None:
    await _retain(dashboard, namespace, "My home address is 12 Elm Street.")
    await _retain(dashboard, namespace, "I take the 8:15 train to work.")
    address = next(r for r in dashboard.client.records(namespace) if "Elm" in r.content)
    await _open_live(watched, f"{dashboard.url}/ui/ns/{namespace}")
    row = watched.page.locator(f'#rows tr[data-id="{address.id}"]')
    await expect(row).to_have_count(1)

    receipt = await dashboard.client.forget(namespace, memory_ids=[address.id])
    await dashboard.client.wait_applied(receipt, timeout=60)
    await expect(row).to_have_count(0)
    await expect(watched.page.locator("#rows tr")).to_have_count(1)
    assert await _still_same_document(watched), "the page reloaded"
    # Still there for audit, under the "forgotten" filter.
    await watched.page.goto(f"{dashboard.url}/ui/ns/{namespace}?status=forgotten")
    await expect(watched.page.locator(f'#rows tr[data-id="{address.id}"]')).to_have_count(1)
    assert watched.problems == []
