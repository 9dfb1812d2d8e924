"""Running scenarios: the backend seam, one scenario's run, a suite's run, the real stack.

The runner talks to a ``MemoryBackend``: ``HindsightBackend`` adapts the public client
(``pipeline.interfaces.client.Hindsight``) for real runs; unit tests pass an in-memory fake. Each
scenario runs in fresh namespaces of its own, waits for its writes before every recall
(read-your-writes), and stops at its first failing step.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from bench.scenarios.checks import Hit, check_recall, contains_text
from bench.scenarios.format import LoadedScenario
from bench.scenarios.steps import DEFAULT_NAMESPACE_ALIAS, ForgetStep, RecallStep, RetainStep
from bench.scenarios.timeline import TimedStep, timeline

# --------------------------------------------------------------------------------------------
# Backend seam: the runner's view of the public client
# --------------------------------------------------------------------------------------------


class MemoryBackend(Protocol):
    """The operations a scenario needs; ``HindsightBackend`` adapts the public client."""

    async def retain(
        self,
        namespace: str,
        text: str,
        *,
        speaker: str,
        role: str,
        session_id: str,
        event_time: datetime,
    ) -> object: ...

    async def recall(
        self,
        namespace: str,
        query: str,
        *,
        at: datetime,
        limit: int,
        include_history: bool,
        regions: list[str] | None,
        wait_for: object | None,
        reinforce: bool = True,
    ) -> list[Hit]: ...

    async def forget(
        self,
        namespace: str,
        *,
        at: datetime,
        memory_ids: list[str] | None = None,
        query: str | None = None,
        whole_namespace: bool = False,
    ) -> object: ...

    async def advance(self, namespace: str, *, to: datetime) -> object: ...

    async def wait_applied(self, receipt: object) -> None: ...


def _hit_from(memory: Any) -> Hit:
    return Hit(
        id=str(memory.id),
        content=str(memory.content),
        kind=str(memory.kind),
        region=str(memory.region),
        status=str(getattr(memory, "status", "active")),
        score=float(getattr(memory, "score", 0.0) or 0.0),
    )


class HindsightBackend:
    """``MemoryBackend`` over ``pipeline.interfaces.client.Hindsight``."""

    def __init__(self, client: Any) -> None:
        self._client = client

    async def retain(
        self,
        namespace: str,
        text: str,
        *,
        speaker: str,
        role: str,
        session_id: str,
        event_time: datetime,
    ) -> object:
        return await self._client.retain(
            namespace,
            text,
            speaker=speaker,
            session_id=session_id,
            event_time=event_time,
            role=role,
        )

    async def recall(
        self,
        namespace: str,
        query: str,
        *,
        at: datetime,
        limit: int,
        include_history: bool,
        regions: list[str] | None,
        wait_for: object | None,
        reinforce: bool = True,
    ) -> list[Hit]:
        result = await self._client.recall(
            namespace,
            query,
            at=at,
            limit=limit,
            wait_for=wait_for,
            include_history=include_history,
            regions=regions,
            reinforce=reinforce,
        )
        return [_hit_from(memory) for memory in result.memories]

    async def forget(
        self,
        namespace: str,
        *,
        at: datetime,
        memory_ids: list[str] | None = None,
        query: str | None = None,
        whole_namespace: bool = False,
    ) -> object:
        if memory_ids:
            return await self._client.forget(namespace, memory_ids=memory_ids, at=at)
        if whole_namespace:
            return await self._client.forget(namespace, whole_namespace=True, at=at)
        return await self._client.forget(namespace, query=query, at=at)

    async def advance(self, namespace: str, *, to: datetime) -> object:
        return await self._client.advance(namespace, to=to)

    async def wait_applied(self, receipt: object) -> None:
        await self._client.wait_applied(receipt)


# --------------------------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------------------------


@dataclass
class ScenarioResult:
    name: str
    category: str
    language: str
    suite: str  # team | tune | test, from the scenario file's place
    path: str
    passed: bool
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0
    namespaces: dict[str, str] = field(default_factory=dict)


def _slug(name: str, limit: int = 40) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:limit].strip("-") or "scenario"


def namespace_for(name: str, alias: str, run_id: str) -> str:
    """``scn-<slug>-<run id>`` for the main namespace, ``scn-<slug>-<alias>-<run id>`` otherwise."""
    middle = _slug(name) if alias == DEFAULT_NAMESPACE_ALIAS else f"{_slug(name)}-{alias}"
    return f"scn-{middle}-{run_id}"


def _clip(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _recall_label(step: RecallStep) -> str:
    where = "" if step.namespace == DEFAULT_NAMESPACE_ALIAS else f" [{step.namespace}]"
    return f"recall{where} {_clip(step.query, 60)!r}"


class _ScenarioRun:
    """State of one scenario run: namespaces, last receipts, receipts not yet known applied."""

    def __init__(self, backend: MemoryBackend, loaded: LoadedScenario, run_id: str) -> None:
        self.backend = backend
        self.loaded = loaded
        self.run_id = run_id
        self.namespaces: dict[str, str] = {}
        self.last_receipt: dict[str, object] = {}
        self.pending: list[object] = []

    def namespace(self, alias: str) -> str:
        if alias not in self.namespaces:
            self.namespaces[alias] = namespace_for(self.loaded.name, alias, self.run_id)
        return self.namespaces[alias]

    def wrote(self, alias: str, receipt: object) -> None:
        self.last_receipt[alias] = receipt
        self.pending.append(receipt)

    async def settle(self) -> None:
        """Read-your-writes across every namespace of the scenario (isolation needs all of them)."""
        while self.pending:
            await self.backend.wait_applied(self.pending.pop(0))

    async def recall(
        self, step: RecallStep, at: datetime, limit: int, *, reinforce: bool = True
    ) -> list[Hit]:
        await self.settle()
        return await self.backend.recall(
            self.namespace(step.namespace),
            step.query,
            at=at,
            limit=limit,
            include_history=step.include_history,
            regions=list(step.regions) if step.regions else None,
            wait_for=self.last_receipt.get(step.namespace),
            reinforce=reinforce,
        )

    async def execute(self, timed: TimedStep) -> list[str]:
        step = timed.step
        if isinstance(step, RetainStep):
            namespace = self.namespace(step.namespace)
            for item in timed.turns:
                receipt = await self.backend.retain(
                    namespace,
                    item.turn.text,
                    speaker=item.turn.speaker,
                    role=item.turn.effective_role,
                    session_id=item.session,
                    event_time=item.at,
                )
                self.wrote(step.namespace, receipt)
            return []
        if isinstance(step, RecallStep):
            # History recalls ask for a few extra results: superseded memories take slots too.
            limit = step.top_k + (5 if step.include_history else 0)
            hits = await self.recall(step, timed.at, limit)
            failures = check_recall(step, hits)
            if failures:
                shown = hits[: max(limit, step.top_k)]
                listing = [
                    f"{number}. {_clip(hit.show())}" for number, hit in enumerate(shown, start=1)
                ]
                return [
                    f"step {timed.index} {_recall_label(step)}: " + "; ".join(failures),
                    *(
                        ["    results: (none)"]
                        if not listing
                        else [f"    {line}" for line in listing]
                    ),
                ]
            return []
        # Commands travel on their own topic: a command published before the turns it concerns
        # are applied may overtake them, so the runner settles first (as for a recall).
        await self.settle()
        if isinstance(step, ForgetStep):
            namespace = self.namespace(step.namespace)
            if step.whole_namespace:
                receipt = await self.backend.forget(namespace, at=timed.at, whole_namespace=True)
            elif step.matching is not None:
                # Probe with the query and with the text itself (recall may cut its results
                # short); probes do not reinforce: looking something up to forget it is no use.
                ids: list[str] = []
                for probe_query in dict.fromkeys(filter(None, (step.query, step.matching))):
                    probe = RecallStep(namespace=step.namespace, query=probe_query, empty=True)
                    hits = await self.recall(probe, timed.at, 20, reinforce=False)
                    ids += [
                        hit.id
                        for hit in hits
                        if contains_text(hit, step.matching) and hit.id not in ids
                    ]
                if not ids:
                    return [
                        f"step {timed.index} forget: no memory recalled for "
                        f"{step.query or step.matching!r} contains {step.matching!r}, "
                        "nothing to forget"
                    ]
                receipt = await self.backend.forget(namespace, at=timed.at, memory_ids=ids)
            else:
                receipt = await self.backend.forget(namespace, at=timed.at, query=step.query)
            self.wrote(step.namespace, receipt)
            return []
        for alias in timed.tick_aliases:
            namespace = self.namespace(alias)
            for moment in timed.tick_times:
                self.wrote(alias, await self.backend.advance(namespace, to=moment))
        return []


async def run_scenario(
    backend: MemoryBackend,
    loaded: LoadedScenario,
    *,
    run_id: str | None = None,
    timeout: float = 180.0,
) -> ScenarioResult:
    """Run one scenario in fresh namespaces; stops at the first failing step."""
    run = _ScenarioRun(backend, loaded, run_id or uuid.uuid4().hex[:8])
    started = time.monotonic()
    failures: list[str] = []
    current = 0
    try:
        async with asyncio.timeout(timeout):
            for timed in timeline(loaded.scenario):
                current = timed.index
                failures = await run.execute(timed)
                if failures:
                    break
    except TimeoutError:
        failures = [f"step {current}: timed out after {timeout:.0f}s"]
    except Exception as error:  # a crash is a failed scenario, reported with its step
        failures = [f"step {current} ({type(error).__name__}): {error}"]
    return ScenarioResult(
        name=loaded.name,
        category=loaded.category,
        language=loaded.language,
        suite=loaded.suite,
        path=str(loaded.path),
        passed=not failures,
        failures=failures,
        seconds=time.monotonic() - started,
        namespaces=dict(run.namespaces),
    )


def format_result(result: ScenarioResult) -> str:
    status = "PASS" if result.passed else "FAIL"
    head = f"{status}  {result.category}/{result.name} [{result.language}] ({result.seconds:.1f}s)"
    return "\n".join([head, *(f"      {line}" for line in result.failures)])


async def run_suite(
    backend: MemoryBackend,
    scenarios: Sequence[LoadedScenario],
    *,
    concurrency: int = 1,
    timeout: float = 180.0,
    echo: bool = True,
) -> list[ScenarioResult]:
    """Run scenarios (each in its own namespaces, ``concurrency`` at a time), in input order."""
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(loaded: LoadedScenario) -> ScenarioResult:
        async with gate:
            result = await run_scenario(backend, loaded, timeout=timeout)
        if echo:
            print(format_result(result), flush=True)
        return result

    return list(await asyncio.gather(*(one(loaded) for loaded in scenarios)))


@contextlib.asynccontextmanager
async def hindsight_backend(settings: Any) -> AsyncIterator[HindsightBackend]:
    """The real stack: embedded broker + worker when ``settings.bootstrap`` is None."""
    from pipeline.interfaces.client import Hindsight
    from pipeline.runtime.stack import running_stack

    async with running_stack(settings) as live, Hindsight.connect(live) as client:
        yield HindsightBackend(client)


async def run_against_stack(
    scenarios: Sequence[LoadedScenario],
    settings: Any,
    *,
    concurrency: int = 1,
    timeout: float = 180.0,
    echo: bool = True,
) -> list[ScenarioResult]:
    async with hindsight_backend(settings) as backend:
        return await run_suite(
            backend, scenarios, concurrency=concurrency, timeout=timeout, echo=echo
        )
