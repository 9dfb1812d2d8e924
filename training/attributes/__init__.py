"""The slot-attribute model: its corpus, training and evaluation (training/attributes/CORPUS.md)."""
