"""Event and record types, codecs and upcasters (invariant I6)."""
