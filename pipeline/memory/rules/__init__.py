"""Pure decision logic: no I/O, no wall clock; time comes from events."""
