"""Recall: the hot in-memory view of the memory-state topic and the engine that queries it.

Layout: pure functions (``routing``, ``temporal``, ``lexical`` tokenisation, ``entities``
extraction, ``fusion``, ``scoring``, ``context``) with no I/O; ``hot_index`` holds the per-namespace
structures the caller feeds from the state topic; ``engine`` runs one recall:

    route → candidates per path (dense over the routed region, BM25, entity, time window,
    activation, the reply after a keyword hit, one hop across sessions from the best answers)
    → reciprocal rank fusion → seed score (0.6·relevance + 0.25·importance + 0.15·freshness)
    → fallback to every region when the best relevance < 0.6 → as-of status filter → newest
    first for current-value questions → gap truncation → ``RecalledMemory`` with per-path ranks
    and provenance.

A time window matches memories created inside it and memories whose own words name a time
inside it (``temporal.time_references``); a question naming one speaker prefers what that
speaker said. Every such rule is a ``RecallTuning`` knob, chosen leave-one-conversation-out
(``python -m bench.locomo.offline --loo``, docs/BENCHMARKS.md).

Lexical and entity paths are never routed (an exact match is evidence in any region); only the
dense and activation paths start in the routed region.
"""

from pipeline.recall.engine import RecallEngine
from pipeline.recall.hot_index import HotIndex
from pipeline.recall.types import RecalledMemory

__all__ = ["HotIndex", "RecallEngine", "RecalledMemory"]
