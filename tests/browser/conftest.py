"""Browser fixtures: the API (with the dashboard) served on a free port, headless Chromium.

Chromium is Debian's (``tests/browser/ensure.sh`` installs it), driven by Playwright from PyPI;
Playwright never downloads a browser here. Without Chromium the tests skip, except in CI
(``CI`` set), where a missing browser is a failure.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
from browser_support import CHROMIUM, CHROMIUM_FLAGS, Served, Watched

from pipeline.interfaces.http import create_api
from pipeline.interfaces.serving import serving
from pipeline.runtime.settings import Settings


@pytest.fixture(scope="module")
async def dashboard(stack_settings: Settings) -> AsyncIterator[Served]:
    app = create_api(stack_settings)
    async with serving(app, "127.0.0.1", 0) as served:
        yield Served(served.url, app.state.hindsight)


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Any]:
    from playwright.async_api import expect

    expect.set_options(timeout=30_000)  # a busy CI machine: live updates get 30 s, not 5
    if not CHROMIUM.exists():
        message = f"no Chromium at {CHROMIUM}: run tests/browser/ensure.sh"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True
        )
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def watched(browser: Any, dashboard: Served, admin_key: str) -> AsyncIterator[Watched]:
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.set_default_timeout(30_000)
    # Auth is on: log in once through the form; the key then travels as the /ui cookie.
    await page.goto(f"{dashboard.url}/ui/login")
    await page.fill("input[name=key]", admin_key)
    await page.click("button[type=submit]")
    await page.wait_for_url(f"{dashboard.url}/ui")
    seen = Watched(page)

    def on_console(message: Any) -> None:
        if message.type == "error":
            seen.problems.append(f"console: {message.text}")

    def on_response(response: Any) -> None:
        if response.status >= 400:
            seen.problems.append(f"HTTP {response.status} {response.url}")

    def on_failed(request: Any) -> None:
        # Leaving a page aborts its open event stream: that is the browser closing it, not a fault.
        if request.url.endswith("/live") or "/live?" in request.url:
            return
        seen.problems.append(f"failed: {request.url} {request.failure}")

    page.on("console", on_console)
    page.on("pageerror", lambda error: seen.problems.append(f"page error: {error}"))
    page.on("requestfailed", on_failed)
    page.on("response", on_response)
    try:
        yield seen
    finally:
        await context.close()
