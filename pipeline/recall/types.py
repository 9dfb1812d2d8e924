"""What recall returns: one memory with its scores and the evidence behind them."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from schemas.memory import HistoryEntry, Kind, Region, SourceTurn, Status


class PathEvidence(BaseModel):
    model_config = ConfigDict(frozen=True)

    rank: int  # 1-based rank on that path
    score: float  # the path's own score (cosine, BM25, entity evidence, activation)


class RecalledMemory(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    namespace: str
    content: str
    region: Region
    kind: Kind
    importance: float
    # Status as of the query time (may differ from the record's current status).
    status: Status
    created_at: datetime
    valid_from: datetime
    valid_to: datetime | None = None
    score: float
    relevance: float
    freshness: float
    # The paths' weighted reciprocal-rank fusion (what ranked the candidates before scoring).
    fused: float = 0.0
    explanation: dict[str, PathEvidence] = Field(default_factory=dict)
    provenance: list[SourceTurn] = Field(default_factory=list)
    superseded_by: str | None = None
    # Filled only with include_history=True: successors (oldest first) and the audit trail.
    supersede_chain: list[str] = Field(default_factory=list)
    history: list[HistoryEntry] | None = None
    # True when found only by the fallback pass over the regions the query was not routed to.
    via_fallback: bool = False

    @property
    def citation(self) -> str:
        return f"mem:{self.id[:8]}"


class RecallTrace(BaseModel):
    """How a recall was decided (for debugging, benchmarks and the HTTP ``explain`` option)."""

    model_config = ConfigDict(frozen=True)

    route: Region
    route_confidence: float
    route_reason: str
    regions: list[Region]
    fallback_used: bool
    window_start: datetime | None = None
    window_end: datetime | None = None
    window_label: str = ""
    candidates: int = 0
