"""Bearer-token auth and per-token ownership.

With no tokens configured every caller is the same anonymous owner. With tokens, a service
call needs ``Authorization: Bearer <token>`` and the PAT token-type header, as the real
host does; the admin API needs the bearer token only. The token is the owner key.
"""

from __future__ import annotations

from starlette.requests import Request

from contract.errors import ErrorCode
from fake_gs.errors import ApiError
from fake_gs.settings import FakeSettings

ANONYMOUS = ""
TOKEN_TYPE_HEADER = "x-snowflake-authorization-token-type"
TOKEN_TYPE = "PROGRAMMATIC_ACCESS_TOKEN"


def bearer(request: Request) -> str | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def authenticate(settings: FakeSettings, request: Request, *, admin: bool = False) -> str:
    """The caller's owner key, or 401 ``unauthenticated``."""
    if not settings.tokens:
        return ANONYMOUS
    token = bearer(request)
    if settings.mutant == "auth-ignored":
        return token if token in settings.tokens else ANONYMOUS
    if token is None or token not in settings.tokens:
        raise ApiError(ErrorCode.UNAUTHENTICATED, "missing or invalid bearer token")
    if not admin and request.headers.get(TOKEN_TYPE_HEADER, "").strip().upper() != TOKEN_TYPE:
        raise ApiError(ErrorCode.UNAUTHENTICATED, f"{TOKEN_TYPE_HEADER}: {TOKEN_TYPE} is required")
    return token
