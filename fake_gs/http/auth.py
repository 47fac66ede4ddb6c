"""Bearer-token auth and per-token ownership.

With no tokens configured every caller is the same anonymous owner. With tokens, a service
call needs ``Authorization: Bearer <token>`` and the PAT token-type header, as the real
host does. The token is the owner key. The admin API takes only the admin token (the
bearer alone, no PAT type header); service tokens get 403 there.
"""

from __future__ import annotations

import secrets
from collections.abc import Container

from starlette.requests import Request

from contract.auth import AUTHORIZATION_HEADER, TOKEN_TYPE_HEADER, auth_header_problem, bearer_token
from contract.errors import ErrorCode
from fake_gs.answers.refusals import ApiError
from fake_gs.settings import FakeSettings
from fake_gs.state.rules import Rules

ANONYMOUS = ""


def bearer(request: Request) -> str | None:
    return bearer_token(request.headers.get(AUTHORIZATION_HEADER))


def _same(token: str, expected: str) -> bool:
    """Constant-time equality for any header text: ``compare_digest`` refuses non-ASCII
    str (a TypeError, once a 500), so both sides are compared as UTF-8 bytes."""
    return secrets.compare_digest(token.encode("utf-8", "surrogateescape"), expected.encode("utf-8"))


def authenticate_admin(settings: FakeSettings, rules: Rules, request: Request, admin_token: str | None,
                       minted: Container[str] = ()) -> None:
    """The admin API: with tokens set, only ``admin_token`` opens it; a service
    token, configured or minted at run time, is 403 ``forbidden`` (one account must not
    read, fault or reset another's jobs)."""
    if not settings.tokens:
        return
    token = bearer(request)
    if token is not None and admin_token is not None and _same(token, admin_token):
        return
    if token is not None and (token in settings.tokens or token in minted):
        if rules.service_token_opens_admin:
            return
        raise ApiError(ErrorCode.FORBIDDEN, "a service token cannot use the admin API; use the --admin-token")
    raise ApiError(ErrorCode.UNAUTHENTICATED, "missing or invalid admin bearer token")


def authenticate(settings: FakeSettings, rules: Rules, request: Request, *, minted: Container[str] = ()) -> str:
    """The caller's owner key, or 401 ``unauthenticated``. ``minted``: service tokens
    minted at run time (``POST /_fake/tokens``); they never open the admin API."""
    if not settings.tokens:
        return ANONYMOUS
    token = bearer(request)
    known = token is not None and (token in settings.tokens or token in minted)
    if not rules.tokens_checked:
        return token if known and token is not None else ANONYMOUS
    if token is None or not known:
        raise ApiError(ErrorCode.UNAUTHENTICATED, "missing or invalid bearer token")
    problem = auth_header_problem(request.headers.get(AUTHORIZATION_HEADER), request.headers.get(TOKEN_TYPE_HEADER))
    if problem is not None:
        raise ApiError(ErrorCode.UNAUTHENTICATED, problem)
    return token
