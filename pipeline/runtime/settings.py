"""One frozen, typed settings object; environment variables are read here and nowhere else."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from schemas.errors import HindsightError


class SettingsError(HindsightError):
    pass


def _parse_bool(name: str, raw: str) -> bool:
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off", ""}:
        return False
    raise SettingsError(f"{name}: expected true/false, got {raw!r}")


def _parse_float(name: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError as error:
        raise SettingsError(f"{name}: expected a number, got {raw!r}") from error


def _parse_int(name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError as error:
        raise SettingsError(f"{name}: expected an integer, got {raw!r}") from error


CLASSIFIERS = ("learned", "rules")


@dataclass(frozen=True)
class MemoryPolicy:
    """Decision thresholds; defaults are the seeds' numbers until a benchmark shows better."""

    duplicate_cosine: float = 0.92
    link_cosine: float = 0.85
    segment_boundary_cosine: float = 0.35
    segment_max_turns: int = 12
    working_window_turns: int = 8
    light_consolidation_every: int = 20
    idle_consolidation_seconds: float = 300.0
    cold_activation: float = 0.05
    recall_reinforcement_weight: float = 0.2
    superseded_activation_factor: float = 0.3


@dataclass(frozen=True)
class RecallPolicy:
    weight_similarity: float = 0.6
    weight_importance: float = 0.25
    weight_freshness: float = 0.15
    freshness_lambda_per_day: float = 0.02
    candidates_per_path: int = 30
    fallback_below: float = 0.6
    gap_one: float = 0.15
    gap_two: float = 0.05
    max_results: int = 5
    memory_chars: int = 200
    context_chars: int = 1000


@dataclass(frozen=True)
class Settings:
    data_dir: Path = Path(".hindsight")
    bootstrap: str | None = None  # None: start the embedded broker under data_dir
    milvus_uri: str | None = None  # None: a Milvus Lite file under data_dir
    topic_prefix: str = ""
    partitions: int = 4
    replication_factor: int = 1
    app_id: str = "hindsight-worker"
    encoder: str = "minilm"
    # Who decides remember-or-not and the kind in ``prepare``: the learned model shipped for the
    # encoder (the rules when there is none for it), or the rules.
    classifier: str = "learned"
    batch_size: int = 64
    batch_window_s: float = 0.05
    # Group membership: a killed worker's partitions move after the session timeout (takeover).
    session_timeout_s: float = 6.0
    heartbeat_interval_s: float = 2.0
    consolidate_max_batch: int = 500  # prepared events per transaction and partition
    api_host: str = "127.0.0.1"
    api_port: int = 8765
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = None
    memory: MemoryPolicy = field(default_factory=MemoryPolicy)
    recall: RecallPolicy = field(default_factory=RecallPolicy)

    @property
    def milvus_path(self) -> str:
        return self.milvus_uri or str(self.data_dir / "milvus" / "hindsight.db")

    def with_overrides(self, **changes: object) -> Settings:
        return replace(self, **{k: v for k, v in changes.items() if v is not None})  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Settings:
        """Parse ``HINDSIGHT_*`` variables strictly; unknown values fail loudly."""
        source = os.environ if env is None else env
        base = cls()
        changes: dict[str, object] = {}
        if "HINDSIGHT_DATA_DIR" in source:
            changes["data_dir"] = Path(source["HINDSIGHT_DATA_DIR"])
        for key, attr in (
            ("HINDSIGHT_BOOTSTRAP", "bootstrap"),
            ("KAFKA_BOOTSTRAP", "bootstrap"),
            ("HINDSIGHT_MILVUS_URI", "milvus_uri"),
            ("HINDSIGHT_TOPIC_PREFIX", "topic_prefix"),
            ("HINDSIGHT_APP_ID", "app_id"),
            ("HINDSIGHT_ENCODER", "encoder"),
            ("HINDSIGHT_CLASSIFIER", "classifier"),
            ("HINDSIGHT_API_HOST", "api_host"),
            ("HINDSIGHT_LLM_BASE_URL", "llm_base_url"),
            ("HINDSIGHT_LLM_MODEL", "llm_model"),
            ("HINDSIGHT_LLM_API_KEY", "llm_api_key"),
        ):
            if source.get(key):
                changes.setdefault(attr, source[key])
        for key, attr in (
            ("HINDSIGHT_PARTITIONS", "partitions"),
            ("HINDSIGHT_REPLICATION_FACTOR", "replication_factor"),
            ("HINDSIGHT_BATCH_SIZE", "batch_size"),
            ("HINDSIGHT_API_PORT", "api_port"),
        ):
            if key in source:
                changes[attr] = _parse_int(key, source[key])
        if "HINDSIGHT_BATCH_WINDOW_S" in source:
            changes["batch_window_s"] = _parse_float(
                "HINDSIGHT_BATCH_WINDOW_S", source["HINDSIGHT_BATCH_WINDOW_S"]
            )
        settings = replace(base, **changes)  # type: ignore[arg-type]
        if settings.encoder not in {"minilm", "use"}:
            raise SettingsError(
                f"HINDSIGHT_ENCODER: expected minilm or use, got {settings.encoder!r}"
            )
        if settings.classifier not in CLASSIFIERS:
            raise SettingsError(
                f"HINDSIGHT_CLASSIFIER: expected learned or rules, got {settings.classifier!r}"
            )
        return settings


def parse_bool_env(name: str, env: Mapping[str, str] | None = None, default: bool = False) -> bool:
    source = os.environ if env is None else env
    return _parse_bool(name, source[name]) if name in source else default
