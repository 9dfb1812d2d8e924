"""Optional framework integrations; each module needs its own extra (e.g. ``[langchain]``)."""
