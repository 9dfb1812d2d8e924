"""Authentication at the interfaces: the FastAPI dependency, the MCP token verifier, exposure.

HTTP: every memory route depends on ``Authenticated`` (401 without a valid key, with
``WWW-Authenticate: Bearer``) and checks its action with ``Principal.require`` (403 outside the
key's scopes; the error names the key and the action, never the namespace). OpenAPI declares the
bearer scheme because ``HTTPBearer`` is part of the dependency.

MCP over streamable HTTP uses the SDK's own bearer hook (``token_verifier``); tools then ask the
same key ring for the caller's scopes. stdio MCP presents the key it was started with.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Awaitable, Callable
from typing import Annotated, Protocol

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken

from pipeline.security.keys import UNAUTHENTICATED, AuthenticationFailed, Principal
from pipeline.security.ring import KeyRing
from schemas.errors import HindsightError

log = logging.getLogger("hindsight.auth")

NO_AUTH_WARNING = (
    "WARNING: authentication is OFF. Anyone who can reach {where} can read, change and erase "
    "every namespace. This is allowed on loopback only; never expose it."
)


class Authenticator(Protocol):
    async def authenticate(self, token: str | None) -> Principal: ...


class NoAuth:
    """Auth turned off (loopback only): every caller is the all-powerful ``UNAUTHENTICATED``."""

    async def authenticate(self, token: str | None) -> Principal:
        return UNAUTHENTICATED


class RingAuth:
    """Keys checked against a followed ``KeyRing``."""

    def __init__(self, ring: KeyRing) -> None:
        self.ring = ring

    async def authenticate(self, token: str | None) -> Principal:
        try:
            return await self.ring.authenticate(token)
        except AuthenticationFailed as error:
            log.info("authentication refused: %s", error.detail)
            raise


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, auth: bool, what: str = "api_host") -> None:
    """Refuse to serve a non-loopback address without authentication."""
    if not auth and not is_loopback(host):
        raise HindsightError(
            f"{what}: refusing to listen on {host} with authentication off; --no-auth is only "
            "allowed on loopback (127.0.0.1, ::1, localhost)"
        )


# -- HTTP ------------------------------------------------------------------------------------
bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ApiKey",
    bearerFormat="hs_<key_id>_<secret>",
    description="An API key from `hindsight keys create`, sent as `Authorization: Bearer hs_...`.",
)
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]


async def authenticated(request: Request, credentials: Credentials) -> Principal:
    authenticator: Authenticator = request.app.state.auth
    return await authenticator.authenticate(credentials.credentials if credentials else None)


async def optional_principal(request: Request, credentials: Credentials) -> Principal | None:
    """For open routes (health): the caller when a valid key came with the request, else None."""
    if credentials is None:
        return None
    authenticator: Authenticator = request.app.state.auth
    try:
        return await authenticator.authenticate(credentials.credentials)
    except HindsightError:
        return None


Authenticated = Depends(authenticated)
Caller = Annotated[Principal, Depends(authenticated)]
MaybeCaller = Annotated[Principal | None, Depends(optional_principal)]


# -- MCP -------------------------------------------------------------------------------------
CallerSource = Callable[[], Awaitable[Principal]]


class RingTokenVerifier:
    """The MCP SDK's ``TokenVerifier`` over our key ring (no OAuth server: keys are ours)."""

    def __init__(self, auth: Authenticator) -> None:
        self._auth = auth

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            principal = await self._auth.authenticate(token)
        except HindsightError:
            return None  # the SDK answers 401 with WWW-Authenticate: Bearer
        return AccessToken(
            token=token, client_id=principal.key_id, scopes=[str(s) for s in principal.scopes]
        )


def mcp_http_caller(auth: Authenticator) -> CallerSource:
    """Tools on streamable HTTP: the key of the request being served (checked again, so a key
    revoked mid-session stops working at once)."""

    async def caller() -> Principal:
        token = get_access_token()
        if token is None:
            raise AuthenticationFailed("no bearer token in the MCP request context")
        return await auth.authenticate(token.token)

    return caller


def fixed_caller(auth: Authenticator, api_key: str | None) -> CallerSource:
    """stdio MCP: the key the server was started with (``--api-key`` / ``HINDSIGHT_API_KEY``)."""

    async def caller() -> Principal:
        return await auth.authenticate(api_key)

    return caller
