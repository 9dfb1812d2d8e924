"""``hindsight worker --stages prepare,consolidate,sink``: run chosen stages in one process.

Each stage is its own consumer group, so each scales on its own: run as many ``prepare``
processes as the encoder needs, ``consolidate`` up to the partition count, and one ``sink`` per
Milvus Lite file (any number against a Milvus server). The default runs all three in one
process — what ``hindsight demo``, ``up`` and CI use.

The Faust app (``prepare``) and the consolidate/sink services are mode services run by one mode
worker: it owns signals and logging, and a stage that fails stops the process with exit code 1,
so a supervisor restarts it instead of a worker lingering half-alive.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import mode

from pipeline.runtime.allocator import limit_malloc_arenas
from pipeline.runtime.settings import Settings, SettingsError

log = logging.getLogger("hindsight.worker")

STAGES: tuple[str, ...] = ("prepare", "consolidate", "sink")


def parse_stages(raw: str | Sequence[str]) -> tuple[str, ...]:
    names = [part.strip() for part in (raw.split(",") if isinstance(raw, str) else raw)]
    names = [name for name in names if name]
    unknown = sorted(set(names) - set(STAGES))
    if unknown or not names:
        raise SettingsError(
            f"--stages: expected a comma-separated subset of {', '.join(STAGES)}, got {raw!r}"
        )
    return tuple(stage for stage in STAGES if stage in names)


def build_services(settings: Settings, stages: Sequence[str]) -> list[mode.ServiceT]:
    """The services for ``stages``, the Faust app (prepare) first when it is among them."""
    services: list[mode.ServiceT] = []
    if "prepare" in stages:
        from pipeline.ingest.prepare import create_prepare_app

        services.append(create_prepare_app(settings))
    if "consolidate" in stages:
        from pipeline.ingest.consolidate import ConsolidateStage

        services.append(ConsolidateStage(settings))
    if "sink" in stages:
        from pipeline.ingest.sink import SinkStage
        from pipeline.models.encoders import encoder_dimension

        services.append(SinkStage(settings, encoder_dimension(settings.encoder)))
    return services


def run_worker(settings: Settings, stages: Sequence[str] = STAGES, loglevel: str = "info") -> None:
    """Run the stages in this process until SIGINT/SIGTERM (exit 1 if a stage fails)."""
    if not settings.bootstrap:
        raise SettingsError("worker: --bootstrap HOST:PORT is required (or HINDSIGHT_BOOTSTRAP)")
    limit_malloc_arenas()  # before the stages start their threads
    services = build_services(settings, stages)
    log.info("starting stages %s", ", ".join(stages))
    if "prepare" in stages:
        import faust

        app, *rest = services
        faust.Worker(app, *rest, loglevel=loglevel, quiet=True).execute_from_commandline()  # type: ignore[arg-type]
    else:
        mode.Worker(*services, loglevel=loglevel, quiet=True).execute_from_commandline()
