"""The task-stage model: its corpus and training (training/stages/CORPUS.md)."""
