"""Who may use the dashboard: the API's keys, with an admin scope (it shows every namespace).

A browser cannot send ``Authorization: Bearer`` when it follows a link, so the dashboard also
takes the key from a cookie that ``/ui/login`` sets after checking the key against the same key
ring: HttpOnly (scripts cannot read it), SameSite=Strict (another site's form cannot use it, so the
re-publish form needs no separate CSRF token), Secure when served over HTTPS, scoped to ``/ui``.
With auth off (loopback only) every caller is the all-powerful local principal, as on the API.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from fastapi import Depends, HTTPException, Request

from pipeline.interfaces.auth import Authenticator, Credentials
from pipeline.security.keys import AuthenticationFailed, Forbidden, Principal

COOKIE = "hindsight_key"
UI = "/ui"


def require_operator(principal: Principal) -> Principal:
    """The dashboard and the metrics name every namespace: an admin key only (403 otherwise)."""
    if not principal.is_admin:
        raise Forbidden(principal.key_id, "admin")
    return principal


def _token(request: Request, credentials: Credentials) -> str | None:
    if credentials is not None:
        return credentials.credentials
    return request.cookies.get(COOKIE)


async def dashboard_operator(request: Request, credentials: Credentials) -> Principal:
    """The caller of a dashboard route; an unauthenticated page view goes to the login form."""
    authenticator: Authenticator = request.app.state.auth
    try:
        principal = await authenticator.authenticate(_token(request, credentials))
    except AuthenticationFailed:
        if request.method == "GET" and not request.url.path.endswith("/live"):
            target = quote(
                request.url.path + (f"?{request.url.query}" if request.url.query else "")
            )
            raise HTTPException(303, headers={"Location": f"{UI}/login?next={target}"}) from None
        raise
    return require_operator(principal)


async def check_key(request: Request, key: str) -> Principal:
    """Validate a key typed into the login form (same ring, same admin rule)."""
    authenticator: Authenticator = request.app.state.auth
    return require_operator(await authenticator.authenticate(key.strip() or None))


Operator = Annotated[Principal, Depends(dashboard_operator)]
