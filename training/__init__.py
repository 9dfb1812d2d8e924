"""Training data and scripts for the models Hindsight learns (not part of the runtime package)."""
