"""Benchmarks and dataset runners for Hindsight."""
