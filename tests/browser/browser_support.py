"""Test-only helpers for the browser tests: where Chromium is, how it starts, what a page saw."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.interfaces.client import Hindsight

CHROMIUM = Path(os.environ.get("HINDSIGHT_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@dataclass
class Served:
    url: str
    client: Hindsight


@dataclass
class Watched:
    """A page and every console error, uncaught exception and failed request it produced."""

    page: Any
    problems: list[str] = field(default_factory=list)
