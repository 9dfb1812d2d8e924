"""docker-compose.yml, Prometheus and the Grafana dashboard agree with the metrics module."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import yaml
from prometheus_client import CollectorRegistry

from pipeline.runtime.metrics import Metrics

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "infra" / "grafana" / "dashboards" / "hindsight.json"
DATASOURCES = ROOT / "infra" / "grafana" / "provisioning" / "datasources" / "prometheus.yml"
PROMETHEUS = ROOT / "infra" / "prometheus" / "prometheus.yml"
COMPOSE = ROOT / "docker-compose.yml"
PANEL_TYPES = {"timeseries", "stat", "gauge", "table", "bargauge"}
METRIC = re.compile(r"\bhindsight_[a-z_]+\b")
SUFFIXES = ("_bucket", "_count", "_sum", "_total", "_created")


class _View:
    def __len__(self) -> int:
        return 0

    def namespace_sizes(self) -> dict[str, int]:
        return {}


def defined_metrics() -> set[str]:
    """Every family name the metrics module registers (the view gauges included)."""
    registry = CollectorRegistry()
    view = _View()  # bound weakly: it must outlive the collection
    Metrics(registry).bind_view(view, lambda: True)
    return {family.name for family in registry.collect()}


def family(name: str) -> str:
    for suffix in SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def _dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def test_dashboard_has_the_fields_grafana_needs() -> None:
    dashboard = _dashboard()
    for key in ("uid", "title", "schemaVersion", "panels", "time"):
        assert key in dashboard, key
    assert isinstance(dashboard["schemaVersion"], int) and dashboard["panels"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in dashboard["panels"]:
        assert panel["type"] in PANEL_TYPES, panel["title"]
        assert panel["title"].strip()
        grid = panel["gridPos"]
        assert {"h", "w", "x", "y"} <= grid.keys() and grid["x"] + grid["w"] <= 24, panel["title"]
        assert panel["targets"], f"{panel['title']}: no queries"


def test_every_panel_queries_the_provisioned_datasource_and_defined_metrics() -> None:
    provisioned = {d["uid"] for d in yaml.safe_load(DATASOURCES.read_text())["datasources"]}
    defined = defined_metrics()
    used: set[str] = set()
    for panel in _dashboard()["panels"]:
        assert panel["datasource"]["uid"] in provisioned, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] in provisioned, panel["title"]
            assert target["refId"] and target["expr"].strip(), panel["title"]
            names = {family(name) for name in METRIC.findall(target["expr"])}
            assert names, f"{panel['title']}: {target['expr']} reads no Hindsight metric"
            unknown = names - defined
            assert not unknown, f"{panel['title']}: {sorted(unknown)} not in the metrics module"
            used |= names
    # The dashboard shows every metric the module defines.
    assert defined - used == set(), sorted(defined - used)


def test_prometheus_scrapes_services_that_compose_defines() -> None:
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    jobs = {
        job["job_name"]: job for job in yaml.safe_load(PROMETHEUS.read_text())["scrape_configs"]
    }
    [api] = [t for static in jobs["hindsight-api"]["static_configs"] for t in static["targets"]]
    assert api == "api:8765" and "8765" in " ".join(services["api"]["command"])
    # The API's /metrics wants an admin key: read from the mounted config directory.
    credentials = jobs["hindsight-api"]["authorization"]["credentials_file"]
    assert credentials.startswith("/etc/prometheus/")
    assert "infra/prometheus/api-key" in (ROOT / ".gitignore").read_text()
    [stages] = jobs["hindsight-stages"]["dns_sd_configs"]
    assert set(stages["names"]) == {"prepare", "consolidate", "sink"} <= services.keys()
    shared = yaml.safe_load(COMPOSE.read_text())["x-hindsight"]["environment"]
    assert int(shared["HINDSIGHT_METRICS_PORT"]) == stages["port"]
    assert shared["HINDSIGHT_METRICS_HOST"] == "0.0.0.0"
    for name in ("prometheus", "grafana"):
        assert name in services


def test_docker_compose_config_is_valid(docker_compose: str) -> None:
    # Compose refuses to render without the Kafka passwords (no defaults): give dummies.
    passwords = {
        f"KAFKA_{user}_PASSWORD": "pw"
        for user in ("ADMIN", "SERVICE", "CLIENT", "BROKER", "CONTROLLER")
    }
    result = subprocess.run(
        [docker_compose, "compose", "-f", str(COMPOSE), "config", "--quiet"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, **passwords},
        timeout=60,
    )
    assert result.returncode == 0, result.stderr or result.stdout
