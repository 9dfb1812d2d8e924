"""The memory model: a namespace's bank, the decisions that change it, and the pure rules.

Nothing here does I/O or reads the wall clock; every time comes from the event being applied.
"""
