"""The API key's wire form: ``hs_<key_id>_<secret>`` (pure).

``key_id`` (12 lowercase hex digits) is public: it names the key in ``keys list``, in logs and in
the keys topic. ``secret`` is 32 random bytes from ``secrets`` (256 bits, URL-safe base64, 43
characters); only its Argon2id hash is ever stored. The ``hs_`` prefix lets secret scanners (and
our own redaction) recognise a leaked key.
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass

from schemas.errors import HindsightError

TOKEN_PREFIX = "hs_"
KEY_ID_HEX = 12
SECRET_BYTES = 32
_TOKEN = re.compile(r"^hs_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")


class MalformedKey(HindsightError):
    """Not something ``hindsight keys create`` printed (the message never repeats the input)."""


@dataclass(frozen=True)
class PresentedKey:
    """A key as a caller presented it, split into its public id and its secret."""

    key_id: str
    secret: str

    def __repr__(self) -> str:  # never print the secret by accident
        return f"PresentedKey(key_id={self.key_id!r}, secret=<hidden>)"


def new_key_id() -> str:
    return secrets.token_hex(KEY_ID_HEX // 2)


def new_secret() -> str:
    return secrets.token_urlsafe(SECRET_BYTES)


def format_key(key_id: str, secret: str) -> str:
    token = f"{TOKEN_PREFIX}{key_id}_{secret}"
    if not _TOKEN.match(token):
        raise MalformedKey("key_id or secret does not have the API key's form")
    return token


def parse_key(token: str) -> PresentedKey:
    match = _TOKEN.match(token.strip())
    if match is None:
        raise MalformedKey("an API key looks like hs_<12 hex digits>_<43 characters>")
    return PresentedKey(match.group(1), match.group(2))
