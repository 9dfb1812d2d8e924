"""Recall: the hot in-memory view of the memory-state topic and the engine that queries it."""

from pipeline.recall.engine import RecallEngine
from pipeline.recall.hot_index import HotIndex
from pipeline.recall.types import RecalledMemory

__all__ = ["HotIndex", "RecallEngine", "RecalledMemory"]
