"""Key-encryption keys: how data keys are wrapped before they are written to the data-key topic.

A ``KeyWrapper`` wraps and unwraps data keys. The embedded default, ``LocalKeyWrapper``, uses AES
key wrap (RFC 3394) with a 256-bit master key from ``HINDSIGHT_MASTER_KEY`` (base64) or
``<data_dir>/master.key`` (created with mode 0600 on first use). A production deployment puts
the key-encryption key in a KMS instead: an adapter implements this same protocol with the KMS's
encrypt/decrypt calls (docs/ERASURE.md, "A real KMS"), and nothing else changes — the wrapped
keys still live in the compacted topic, so destroying one is still a tombstone.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import logging
import os
import secrets
import stat
from pathlib import Path
from typing import Protocol

from cryptography.hazmat.primitives.keywrap import InvalidUnwrap, aes_key_unwrap, aes_key_wrap

from pipeline.runtime.settings import Settings, SettingsError
from schemas.errors import HindsightError

log = logging.getLogger("hindsight.crypto")

MASTER_KEY_FILE = "master.key"
MASTER_KEY_BYTES = 32


class KeyWrapper(Protocol):
    """Wraps data keys under a key-encryption key it never hands out."""

    @property
    def wrapper_id(self) -> str:
        """Names the key-encryption key (a fingerprint or a KMS key ARN), never the key itself."""
        ...

    def wrap(self, secret: bytes, *, key_id: str, namespace: str) -> bytes: ...

    def unwrap(self, wrapped: bytes, *, key_id: str, namespace: str) -> bytes: ...


class UnwrapFailed(HindsightError):
    """A wrapped data key did not unwrap: another master key, or a damaged record."""


class LocalKeyWrapper:
    """AES key wrap (RFC 3394) under a local 256-bit master key."""

    def __init__(self, master_key: bytes) -> None:
        if len(master_key) != MASTER_KEY_BYTES:
            raise SettingsError(f"master key: expected {MASTER_KEY_BYTES} bytes")
        self._kek = master_key
        fingerprint = hashlib.sha256(b"hindsight-kek-fingerprint\x00" + master_key).hexdigest()
        self._id = f"local:{fingerprint[:16]}"

    @property
    def wrapper_id(self) -> str:
        return self._id

    def wrap(self, secret: bytes, *, key_id: str, namespace: str) -> bytes:
        return aes_key_wrap(self._kek, secret)

    def unwrap(self, wrapped: bytes, *, key_id: str, namespace: str) -> bytes:
        try:
            return aes_key_unwrap(self._kek, wrapped)
        except InvalidUnwrap as error:
            raise UnwrapFailed(
                f"key_id: data key {key_id!r} of namespace {namespace!r} does not unwrap with "
                f"master key {self._id}"
            ) from error


def _decode_master_key(text: str, where: str) -> bytes:
    try:
        key = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError) as error:
        raise SettingsError(f"{where}: expected base64 of {MASTER_KEY_BYTES} bytes") from error
    if len(key) != MASTER_KEY_BYTES:
        raise SettingsError(f"{where}: expected {MASTER_KEY_BYTES} bytes, got {len(key)}")
    return key


def _read_master_key(path: Path) -> bytes:
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise SettingsError(
            f"{path}: mode {stat.filemode(mode)}; the master key must be readable by its owner "
            f"only (chmod 600 {path})"
        )
    return _decode_master_key(path.read_text(), str(path))


def load_master_key(settings: Settings) -> bytes:
    """``HINDSIGHT_MASTER_KEY``, else the key file (``HINDSIGHT_MASTER_KEY_FILE``, by default
    ``<data_dir>/master.key``) — created (0600) if missing.

    Created atomically (written to a private temporary file, then hard-linked into place), so
    processes starting together agree on one key.
    """
    if settings.master_key_b64:
        return _decode_master_key(settings.master_key_b64, "HINDSIGHT_MASTER_KEY")
    path = settings.master_key_file or Path(settings.data_dir) / MASTER_KEY_FILE
    if path.exists():
        return _read_master_key(path)
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    temporary = directory / f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}"
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(descriptor, "w") as handle:
            handle.write(base64.b64encode(os.urandom(MASTER_KEY_BYTES)).decode() + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, path)
            log.warning(
                "created a new master key at %s: back it up; without it no data key unwraps", path
            )
        except FileExistsError:
            pass  # another process created it first: use theirs
    finally:
        temporary.unlink(missing_ok=True)
    return _read_master_key(path)


def wrapper_from_settings(settings: Settings) -> KeyWrapper:
    """The key-encryption key of this deployment (the local master key; a KMS adapter later)."""
    return LocalKeyWrapper(load_master_key(settings))
