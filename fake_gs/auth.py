"""Bearer-token auth and per-token ownership.

With no tokens configured every caller is the same anonymous owner. With tokens, a service
call needs ``Authorization: Bearer <token>`` and the PAT token-type header, as the real
host does; the admin API needs the bearer token only. The token is the owner key.
"""

from __future__ import annotations

from collections.abc import Container

from starlette.requests import Request

from contract.auth import AUTHORIZATION_HEADER, TOKEN_TYPE, TOKEN_TYPE_HEADER, bearer_token
from contract.errors import ErrorCode
from fake_gs.errors import ApiError
from fake_gs.settings import FakeSettings

ANONYMOUS = ""


def bearer(request: Request) -> str | None:
    return bearer_token(request.headers.get(AUTHORIZATION_HEADER))


def authenticate(settings: FakeSettings, request: Request, *, admin: bool = False,
                 minted: Container[str] = ()) -> str:
    """The caller's owner key, or 401 ``unauthenticated``. ``minted``: service tokens
    minted at run time (``POST /_fake/tokens``); they never open the admin API."""
    if not settings.tokens:
        return ANONYMOUS
    token = bearer(request)
    known = token is not None and (token in settings.tokens or (not admin and token in minted))
    if settings.mutant == "auth-ignored":
        return token if known and token is not None else ANONYMOUS
    if token is None or not known:
        raise ApiError(ErrorCode.UNAUTHENTICATED, "missing or invalid bearer token")
    if not admin and request.headers.get(TOKEN_TYPE_HEADER, "").strip().upper() != TOKEN_TYPE:
        raise ApiError(ErrorCode.UNAUTHENTICATED, f"{TOKEN_TYPE_HEADER}: {TOKEN_TYPE} is required")
    return token
