"""Seal and open content: the one copy of the envelope rule, used by every producer and consumer.

``seal`` encrypts an event's or record's JSON bytes with AES-256-GCM under a data key and wraps
them in a ``schemas.sealed.Sealed`` envelope; ``unseal`` opens an envelope (or passes a plain
value through). The associated data binds the namespace, the key id, the topic role and, for
prepared events, the input position: an envelope copied to another topic, namespace or position
does not open. A destroyed key raises ``DataKeyDestroyed`` (the content was erased: shredded,
never a crash); a key not seen yet raises ``UnknownDataKey`` (wait for it, I8).
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets
from dataclasses import dataclass, field
from typing import Literal, Protocol

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import BaseModel

from schemas.codec import decode_event, encode, validate
from schemas.errors import DataKeyDestroyed, InvalidEvent, UnknownDataKey
from schemas.events import InputEvent
from schemas.prepared import LogPosition
from schemas.sealed import Sealed

KEY_BYTES = 32  # AES-256
NONCE_BYTES = 12  # GCM's 96-bit nonce, random per value
AAD_LABEL = b"hindsight-sealed-v1"
SealedRole = Literal["events", "prepared", "extractions", "memory_state", "memory_updates"]


@dataclass(frozen=True)
class DataKey:
    """A data key in the clear: only ever in process memory, never logged or written."""

    key_id: str
    namespace: str
    secret: bytes = field(repr=False)


class KeyLookup(Protocol):
    """What opening needs: the key's bytes (None once destroyed) and the namespace it belongs to.

    ``key`` raises ``UnknownDataKey`` for a key id it has never seen.
    """

    def key(self, key_id: str) -> bytes | None: ...

    def namespace_of(self, key_id: str) -> str | None: ...


@dataclass(frozen=True)
class Opened:
    """An opened value: the content bytes and the envelope it came in (None when it was plain)."""

    content: bytes | None  # None only for a plain value that had none
    envelope: Sealed | None

    @property
    def key_id(self) -> str | None:
        return None if self.envelope is None else self.envelope.key_id


def new_key_id() -> str:
    return f"dk_{secrets.token_hex(16)}"


def new_secret() -> bytes:
    return AESGCM.generate_key(bit_length=KEY_BYTES * 8)


def associated_data(
    role: str, namespace: str, key_id: str, source: LogPosition | None = None
) -> bytes:
    """What the ciphertext is bound to (none of the parts can contain a NUL byte)."""
    parts = [AAD_LABEL, role.encode(), namespace.encode(), key_id.encode()]
    if source is not None:
        parts.append(
            f"{source.topic}:{source.partition}:{source.offset}:{source.timestamp_ms}".encode()
        )
    return b"\x00".join(parts)


def seal(
    content: BaseModel | bytes,
    namespace: str,
    key: DataKey,
    role: SealedRole,
    *,
    source: LogPosition | None = None,
) -> bytes:
    """The Kafka value for ``content`` sealed under ``key`` for a topic of ``role``."""
    if key.namespace != namespace:
        raise InvalidEvent(
            f"data key {key.key_id!r} belongs to namespace {key.namespace!r}, not {namespace!r}",
            "namespace",
            "seal",
        )
    plaintext = content if isinstance(content, bytes) else encode(content)
    nonce = os.urandom(NONCE_BYTES)
    aad = associated_data(role, namespace, key.key_id, source)
    ciphertext = AESGCM(key.secret).encrypt(nonce, plaintext, aad)
    envelope = Sealed(
        namespace=namespace,
        key_id=key.key_id,
        nonce=base64.b64encode(nonce).decode("ascii"),
        ciphertext=base64.b64encode(ciphertext).decode("ascii"),
        source=source,
    )
    return orjson.dumps(envelope.model_dump(mode="json", exclude_none=True))


def sealed_envelope(raw: bytes | None) -> Sealed | None:
    """The envelope when ``raw`` is a sealed value, else None (plain, or not JSON at all).

    A value that says it is ``Sealed`` but is malformed raises ``InvalidEvent`` naming the field.
    """
    if raw is None or b'"Sealed"' not in raw:
        return None
    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None  # not JSON: the decoder of the plain value reports it
    if not isinstance(payload, dict) or payload.get("event_type") != "Sealed":
        return None
    return validate(Sealed, payload)


def _b64(text: str, name: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise InvalidEvent("not valid base64", name, "unseal") from error


def open_envelope(envelope: Sealed, keys: KeyLookup | None, role: SealedRole) -> bytes:
    """The content of ``envelope``; raises ``DataKeyDestroyed``, ``UnknownDataKey`` or
    ``InvalidEvent`` (wrong key, tampered, or moved), each naming the key id."""
    key_id = envelope.key_id
    if keys is None:
        raise UnknownDataKey(key_id, "this process has no data-key store (encryption is off)")
    secret = keys.key(key_id)
    if secret is None:
        raise DataKeyDestroyed(key_id)
    owner = keys.namespace_of(key_id)
    if owner is not None and owner != envelope.namespace:
        raise InvalidEvent(
            f"data key {key_id!r} belongs to namespace {owner!r}, the envelope claims "
            f"{envelope.namespace!r}",
            "namespace",
            "unseal",
        )
    nonce = _b64(envelope.nonce, "nonce")
    if len(nonce) != NONCE_BYTES:
        raise InvalidEvent(f"must be {NONCE_BYTES} bytes, got {len(nonce)}", "nonce", "unseal")
    ciphertext = _b64(envelope.ciphertext, "ciphertext")
    aad = associated_data(role, envelope.namespace, key_id, envelope.source)
    try:
        return AESGCM(secret).decrypt(nonce, ciphertext, aad)
    except InvalidTag as error:
        raise InvalidEvent(
            f"does not open with data key {key_id!r} (namespace {envelope.namespace!r}, "
            f"topic role {role}): a wrong key, a tampered value, or one moved from another "
            "topic, namespace or position",
            "ciphertext",
            "unseal",
        ) from error


def unseal(raw: bytes | None, keys: KeyLookup | None, role: SealedRole) -> Opened:
    """Open a sealed value, or pass a plain one through (``content`` is then ``raw`` itself)."""
    envelope = sealed_envelope(raw)
    if envelope is None:
        return Opened(raw, None)
    return Opened(open_envelope(envelope, keys, role), envelope)


def open_input_event(raw: bytes | None, keys: KeyLookup | None) -> InputEvent:
    """An input-log value, opened and decoded: raises ``InvalidEvent``, ``UnknownDataKey`` or
    ``DataKeyDestroyed`` (readers outside the stages: the ticker, chat history)."""
    return decode_event(unseal(raw, keys, "events").content)
