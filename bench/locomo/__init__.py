"""LoCoMo retrieval evaluation: Hindsight against BM25 and dense baselines over the same turns.

Entry point: ``hindsight bench locomo --data FILE [--out DIR]`` (``bench.locomo.runner.main``).
"""

from bench.locomo.dataset import Conversation, LocomoTurn, Question, load_locomo
from bench.locomo.metrics import METRIC_NAMES, RankedResult, flatten_provenance

__all__ = [
    "METRIC_NAMES",
    "Conversation",
    "LocomoTurn",
    "Question",
    "RankedResult",
    "flatten_provenance",
    "load_locomo",
]
