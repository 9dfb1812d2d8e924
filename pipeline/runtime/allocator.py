"""Fewer glibc malloc arenas for long-running stage processes.

glibc gives each thread that allocates its own arena (up to 8 per core) and keeps what is freed
there for reuse, so a worker whose encoder, executor and client threads all allocate grows a
resident set far above what it holds. Capping the arenas at two, measured on the ingest bench
(docs/BENCHMARKS.md, "Ingest"), cut the worker's peak RSS by ~100 MB at no measurable cost.
``MALLOC_ARENA_MAX`` in the environment does the same before start-up and takes precedence.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os

log = logging.getLogger(__name__)

M_ARENA_MAX = -8  # glibc's mallopt parameter number (malloc.h)
DEFAULT_ARENAS = 2


def limit_malloc_arenas(arenas: int = DEFAULT_ARENAS) -> bool:
    """Cap glibc's malloc arenas for threads started from now on; False where not glibc."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False  # the operator's setting, already read by glibc at start-up
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False  # musl, macOS: no mallopt, nothing to cap
    applied = bool(mallopt(M_ARENA_MAX, arenas))
    log.debug("malloc arenas capped at %d: %s", arenas, applied)
    return applied
