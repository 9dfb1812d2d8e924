"""Which Milvus a URI names, without importing the client (the stack decides before it runs)."""

from __future__ import annotations

from urllib.parse import urlparse

_REMOTE_SCHEMES = ("http", "https", "tcp", "unix")


def is_lite_uri(uri: str) -> bool:
    """A path (a Milvus Lite data directory) rather than a server address."""
    return urlparse(uri).scheme.lower() not in _REMOTE_SCHEMES
