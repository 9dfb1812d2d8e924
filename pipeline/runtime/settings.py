"""One frozen, typed settings object; environment variables are read here and nowhere else."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, get_args

from pipeline.models.encoders import ENCODER_NAMES
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


CLASSIFIERS = ("gated", "learned", "rules")


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
    # Append the dates a turn's relative time phrases resolve to ("yesterday" -> "7 May 2023")
    # to its search text (``memory.rules.extraction.time_note``), at prepare time.
    time_notes: bool = True
    # Updates by slot (docs/UPDATES.md): statements this close are one slot; or this close at
    # least and their frames sharing this share of the shorter frame's content words.
    slot_cosine: float = 0.80
    slot_cosine_floor: float = 0.50
    slot_term_overlap: float = 0.50
    # Languages whose frames the encoder reads well enough for the cosine alone to decide (the
    # default all-MiniLM-L6-v2 is English-only; elsewhere shared words must back it up).
    slot_cosine_languages: tuple[str, ...] = ("en",)
    # A task told again at a later state (planned → in progress → done) is worded anew: the two
    # statements, as wholes, need only be this close (and share what the task is).
    state_cosine_floor: float = 0.40
    # ... told briefly: a longer statement (a chat line that mentions many things) shares one
    # word with many others, which says little about which task it is.
    state_max_terms: int = 10
    # A new amount within this factor of the old one may replace it in any words, when the two
    # share common ground and the newer is the nearest current memory (``slots.amount_nearby``).
    amount_nearby_ratio: float = 2.0
    # Two statements this close as wholes, with no span value changed, say the same thing in other
    # words ("I drink my coffee black" / "Black coffee, no sugar, always"): no value in plain words
    # replaced another (``slots.value_in_words``; English frames only, as ``slot_cosine``).
    restatement_cosine: float = 0.75
    # The attribute model's guess (``Slot.attribute``) that two statements give values of one
    # single-valued attribute counts when both are at least this sure (``slots.same_attribute``;
    # chosen on leave-one-writer-out pairs: training/attributes/RESULTS.md).
    attribute_probability: float = 0.6
    # Where both slots record the model's distribution (``Slot.attribute_shares``), the chance
    # that both give one single-valued attribute (``attribute_chance.same_attribute_chance``)
    # must reach this instead; the argmax bound above decides only records of older builds.
    attribute_chance: float = 0.33
    # How sure the stage model must be of a statement's task stage for the update rule to read
    # it where no state pattern spoke (``slots.state_progress``; chosen with the model:
    # training/stages/RESULTS.md).
    stage_probability: float = 0.8


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


SecurityProtocol = Literal["PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SSL"]
SaslMechanism = Literal["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]
SECURITY_PROTOCOLS: tuple[str, ...] = get_args(SecurityProtocol)
SASL_MECHANISMS: tuple[str, ...] = get_args(SaslMechanism)


@dataclass(frozen=True)
class KafkaSecurity:
    """How every Kafka client authenticates (``pipeline.runtime.kafka`` turns it into kwargs).

    ``PLAINTEXT`` (the default) is the embedded loopback broker without SASL. ``SASL_*`` needs a
    mechanism, a user name and a password; ``*SSL`` may name a CA file to trust (PEM).
    """

    protocol: SecurityProtocol = "PLAINTEXT"
    sasl_mechanism: SaslMechanism | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None

    def __post_init__(self) -> None:
        if self.protocol not in SECURITY_PROTOCOLS:
            raise SettingsError(
                f"HINDSIGHT_KAFKA_SECURITY_PROTOCOL: expected one of "
                f"{', '.join(SECURITY_PROTOCOLS)}, got {self.protocol!r}"
            )
        if self.sasl_mechanism is not None and self.sasl_mechanism not in SASL_MECHANISMS:
            raise SettingsError(
                f"HINDSIGHT_KAFKA_SASL_MECHANISM: expected one of {', '.join(SASL_MECHANISMS)}, "
                f"got {self.sasl_mechanism!r}"
            )
        if self.uses_sasl:
            for name, value in (
                ("HINDSIGHT_KAFKA_SASL_MECHANISM", self.sasl_mechanism),
                ("HINDSIGHT_KAFKA_SASL_USERNAME", self.sasl_username),
                ("HINDSIGHT_KAFKA_SASL_PASSWORD", self.sasl_password),
            ):
                if not value:
                    raise SettingsError(f"{name}: required with {self.protocol}")
        elif self.sasl_mechanism or self.sasl_username or self.sasl_password:
            raise SettingsError(
                f"HINDSIGHT_KAFKA_SECURITY_PROTOCOL: {self.protocol} does not use SASL; set "
                "SASL_PLAINTEXT or SASL_SSL, or drop the HINDSIGHT_KAFKA_SASL_* settings"
            )
        if self.ssl_cafile and not self.uses_tls:
            raise SettingsError(
                f"HINDSIGHT_KAFKA_SSL_CAFILE: {self.protocol} does not use TLS; set SSL or SASL_SSL"
            )

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.protocol.endswith("SSL")

    def env(self) -> dict[str, str]:
        """The variables that give a child process the same settings (``from_env`` reads them)."""
        values = {
            "HINDSIGHT_KAFKA_SECURITY_PROTOCOL": self.protocol,
            "HINDSIGHT_KAFKA_SASL_MECHANISM": self.sasl_mechanism,
            "HINDSIGHT_KAFKA_SASL_USERNAME": self.sasl_username,
            "HINDSIGHT_KAFKA_SASL_PASSWORD": self.sasl_password,
            "HINDSIGHT_KAFKA_SSL_CAFILE": self.ssl_cafile,
        }
        return {key: value for key, value in values.items() if value}

    @classmethod
    def from_env(cls, source: Mapping[str, str]) -> KafkaSecurity:
        def get(name: str) -> str | None:
            return source.get(name) or None

        return cls(
            protocol=(get("HINDSIGHT_KAFKA_SECURITY_PROTOCOL") or "PLAINTEXT").upper(),  # type: ignore[arg-type]
            sasl_mechanism=get("HINDSIGHT_KAFKA_SASL_MECHANISM"),  # type: ignore[arg-type]
            sasl_username=get("HINDSIGHT_KAFKA_SASL_USERNAME"),
            sasl_password=get("HINDSIGHT_KAFKA_SASL_PASSWORD"),
            ssl_cafile=get("HINDSIGHT_KAFKA_SSL_CAFILE"),
        )


@dataclass(frozen=True)
class Settings:
    data_dir: Path = Path(".hindsight")
    bootstrap: str | None = None  # None: start the embedded broker under data_dir
    milvus_uri: str | None = None  # None: a Milvus Lite file under data_dir
    topic_prefix: str = ""
    partitions: int = 4
    replication_factor: int = 1
    app_id: str = "hindsight-worker"
    encoder: str = "minilm"  # one of ENCODER_NAMES; `minilm` is the benchmark's winner
    encoder_threads: int | None = None  # intra-op threads (ONNX Runtime, numpy); None: measured
    # Who decides remember-or-not and the kind in ``prepare``: ``gated``, the rules with the
    # learned model shipped for the encoder filtering short small talk they would keep
    # (``prepare.gated_classification``); ``learned``, the model deciding (LoCoMo 0.684 -> 0.642
    # with it: it filters informative chatty turns; training/turn_classifier/RESULTS.md); or
    # ``rules`` alone. Without a model for the encoder the rules decide alone.
    classifier: str = "gated"
    # The slot-attribute model (pipeline/models/attributes.py) tells which attribute each
    # statement gives a value of, for updates told in words no rule knows. Off: the rules alone.
    slot_attributes: bool = True
    batch_size: int = 64
    batch_window_s: float = 0.05
    # Group membership: a killed worker's partitions move after the session timeout (takeover).
    session_timeout_s: float = 6.0
    heartbeat_interval_s: float = 2.0
    consolidate_max_batch: int = 500  # prepared events per transaction and partition
    api_host: str = "127.0.0.1"
    api_port: int = 8765
    # Worker processes serve /metrics here (0: off); the API serves it on its own port.
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 0
    # /readyz fails when the recall view is more than this many messages behind an input
    # partition's end.
    ready_max_lag: int = 1_000
    llm_base_url: str | None = None
    llm_model: str | None = None
    llm_api_key: str | None = None
    kafka: KafkaSecurity = field(default_factory=KafkaSecurity)
    # Serving: API keys are required unless auth is off (allowed on loopback only, see up.py).
    auth: bool = True
    # Client side: the key this process presents (MCP stdio, the CLI's HTTP calls).
    api_key: str | None = field(default=None, repr=False)
    # Crypto-shredding (docs/ERASURE.md): seal content with data keys before it reaches a topic.
    # Off only for the offline harness and unit tests; plain input is accepted either way.
    encryption: bool = True
    master_key_b64: str | None = field(default=None, repr=False)  # else the master key file
    master_key_file: Path | None = None  # default <data_dir>/master.key; created 0600 if missing
    key_wait_s: float = 15.0  # how long a stage waits for a data key it has not seen yet
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
        if source.get("HINDSIGHT_MASTER_KEY_FILE"):
            changes["master_key_file"] = Path(source["HINDSIGHT_MASTER_KEY_FILE"])
        for key, attr in (
            ("HINDSIGHT_BOOTSTRAP", "bootstrap"),
            ("KAFKA_BOOTSTRAP", "bootstrap"),
            ("HINDSIGHT_MILVUS_URI", "milvus_uri"),
            ("HINDSIGHT_TOPIC_PREFIX", "topic_prefix"),
            ("HINDSIGHT_APP_ID", "app_id"),
            ("HINDSIGHT_ENCODER", "encoder"),
            ("HINDSIGHT_CLASSIFIER", "classifier"),
            ("HINDSIGHT_API_HOST", "api_host"),
            ("HINDSIGHT_METRICS_HOST", "metrics_host"),
            ("HINDSIGHT_LLM_BASE_URL", "llm_base_url"),
            ("HINDSIGHT_LLM_MODEL", "llm_model"),
            ("HINDSIGHT_LLM_API_KEY", "llm_api_key"),
            ("HINDSIGHT_API_KEY", "api_key"),
            ("HINDSIGHT_MASTER_KEY", "master_key_b64"),
        ):
            if source.get(key):
                changes.setdefault(attr, source[key])
        for key, attr in (
            ("HINDSIGHT_PARTITIONS", "partitions"),
            ("HINDSIGHT_REPLICATION_FACTOR", "replication_factor"),
            ("HINDSIGHT_BATCH_SIZE", "batch_size"),
            ("HINDSIGHT_API_PORT", "api_port"),
            ("HINDSIGHT_METRICS_PORT", "metrics_port"),
            ("HINDSIGHT_READY_MAX_LAG", "ready_max_lag"),
        ):
            if key in source:
                changes[attr] = _parse_int(key, source[key])
        if "HINDSIGHT_BATCH_WINDOW_S" in source:
            changes["batch_window_s"] = _parse_float(
                "HINDSIGHT_BATCH_WINDOW_S", source["HINDSIGHT_BATCH_WINDOW_S"]
            )
        if "HINDSIGHT_SLOT_ATTRIBUTES" in source:
            changes["slot_attributes"] = _parse_bool(
                "HINDSIGHT_SLOT_ATTRIBUTES", source["HINDSIGHT_SLOT_ATTRIBUTES"]
            )
        if "HINDSIGHT_AUTH" in source:
            changes["auth"] = _parse_bool("HINDSIGHT_AUTH", source["HINDSIGHT_AUTH"])
        changes["kafka"] = KafkaSecurity.from_env(source)
        if "HINDSIGHT_ENCODER_THREADS" in source:
            threads = _parse_int("HINDSIGHT_ENCODER_THREADS", source["HINDSIGHT_ENCODER_THREADS"])
            if threads < 1:
                raise SettingsError(f"HINDSIGHT_ENCODER_THREADS: expected >= 1, got {threads}")
            changes["encoder_threads"] = threads
        if "HINDSIGHT_ENCRYPTION" in source:
            changes["encryption"] = _parse_bool(
                "HINDSIGHT_ENCRYPTION", source["HINDSIGHT_ENCRYPTION"]
            )
        if "HINDSIGHT_KEY_WAIT_S" in source:
            changes["key_wait_s"] = _parse_float(
                "HINDSIGHT_KEY_WAIT_S", source["HINDSIGHT_KEY_WAIT_S"]
            )
        settings = replace(base, **changes)  # type: ignore[arg-type]
        if settings.encoder not in ENCODER_NAMES:
            raise SettingsError(
                f"HINDSIGHT_ENCODER: expected one of {', '.join(ENCODER_NAMES)}, "
                f"got {settings.encoder!r}"
            )
        if settings.classifier not in CLASSIFIERS:
            raise SettingsError(
                "HINDSIGHT_CLASSIFIER: expected gated, learned or rules, "
                f"got {settings.classifier!r}"
            )
        return settings


def parse_bool_env(name: str, env: Mapping[str, str] | None = None, default: bool = False) -> bool:
    source = os.environ if env is None else env
    return _parse_bool(name, source[name]) if name in source else default
