"""Hindsight: event-sourced long-term memory for LLM agents."""
