"""Stored key hashes (Argon2id) and the per-process cache that keeps requests cheap.

Why Argon2id from ``cryptography`` (not argon2-cffi, not scrypt): it is the KDF RFC 9106 and OWASP
recommend, ``cryptography`` ships it (>= 44) with PHC-string encode/verify, and the same library
already gives us AES-GCM for crypto-shredding, so one well-kept dependency covers both. The
parameters are OWASP's minimum for Argon2id (19 MiB, 2 passes, 1 lane): ~40 ms per hash on this
2-core machine, so a stolen keys topic costs an attacker that much per guess (and the secrets are
256-bit random, so guessing is hopeless anyway; the KDF is defence in depth).

Why a cache: 40 ms of CPU per request would cap a 2-core API at ~50 requests/s. So each process
verifies a key with Argon2id once and then remembers an HMAC-SHA256 of the secret under a random
per-process key. Later requests compare digests in constant time (~1 µs). The cache lives only in
memory, its HMAC key is never written anywhere, and revoking a key drops its entry. Wrong secrets
for a known key id are remembered too (bounded), so a flood of bad guesses against one id costs
one Argon2id run per distinct guess, and Argon2id runs are limited to a few at a time.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import threading
from collections import OrderedDict

from cryptography.exceptions import InvalidKey
from cryptography.hazmat.primitives.kdf.argon2 import Argon2id

SALT_BYTES = 16
HASH_BYTES = 32
ITERATIONS = 2
LANES = 1
MEMORY_KIB = 19 * 1024
MAX_FAILED_PER_KEY = 64


def hash_secret(secret: str) -> str:
    """The PHC string (``$argon2id$v=19$m=...,t=...,p=...$salt$hash``) stored in ``KeyCreated``."""
    kdf = Argon2id(
        salt=os.urandom(SALT_BYTES),
        length=HASH_BYTES,
        iterations=ITERATIONS,
        lanes=LANES,
        memory_cost=MEMORY_KIB,
    )
    return kdf.derive_phc_encoded(secret.encode())


def verify_secret(secret: str, encoded: str) -> bool:
    """Slow path: Argon2id with the parameters recorded in ``encoded``."""
    try:
        Argon2id.verify_phc_encoded(secret.encode(), encoded)
    except (InvalidKey, ValueError):
        return False
    return True


class VerifiedCache:
    """key id -> keyed digest of the secret that verified; plus recent wrong digests per key."""

    def __init__(self) -> None:
        self._pepper = os.urandom(32)  # per process, never stored: the cache is useless offline
        self._verified: dict[str, bytes] = {}
        self._failed: dict[str, OrderedDict[bytes, None]] = {}
        self._lock = threading.Lock()

    def digest(self, key_id: str, secret: str) -> bytes:
        return hmac.new(self._pepper, f"{key_id}\0{secret}".encode(), hashlib.sha256).digest()

    def lookup(self, key_id: str, digest: bytes) -> bool | None:
        """True: verified before; False: known wrong; None: not seen, verify with Argon2id."""
        with self._lock:
            known = self._verified.get(key_id)
            if known is not None and hmac.compare_digest(known, digest):
                return True
            failed = self._failed.get(key_id)
            if failed is not None and digest in failed:
                return False
        return None

    def remember(self, key_id: str, digest: bytes, valid: bool) -> None:
        with self._lock:
            if valid:
                self._verified[key_id] = digest
                return
            failed = self._failed.setdefault(key_id, OrderedDict())
            failed[digest] = None
            while len(failed) > MAX_FAILED_PER_KEY:
                failed.popitem(last=False)

    def forget(self, key_id: str) -> None:
        with self._lock:
            self._verified.pop(key_id, None)
            self._failed.pop(key_id, None)
