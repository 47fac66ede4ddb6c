"""Bearer-token auth and per-token ownership.

With no tokens configured every caller is the same anonymous owner. With tokens, a service
call needs ``Authorization: Bearer <token>`` and the PAT token-type header, as the real
host does; the admin API needs the bearer token only. The token is the owner key.
"""

from __future__ import annotations

from starlette.requests import Request

from contract.auth import AUTHORIZATION_HEADER, TOKEN_TYPE, TOKEN_TYPE_HEADER, bearer_token
from contract.errors import ErrorCode
from fake_gs.errors import ApiError
from fake_gs.settings import FakeSettings

ANONYMOUS = ""


def bearer(request: Request) -> str | None:
    return bearer_token(request.headers.get(AUTHORIZATION_HEADER))


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
