"""The ingest stages: prepare → consolidate → sink, their commit path, the worker and replay."""
