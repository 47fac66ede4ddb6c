"""The two auth headers a real host wants (spec §2), in one place."""

from __future__ import annotations

AUTHORIZATION_HEADER = "Authorization"
TOKEN_TYPE_HEADER = "X-Snowflake-Authorization-Token-Type"
TOKEN_TYPE = "PROGRAMMATIC_ACCESS_TOKEN"
#: The environment variable a PAT is read from unless configured otherwise.
DEFAULT_PAT_ENV_VAR = "CORTEX_PAT"


def auth_headers(token: str) -> dict[str, str]:
    """Headers that authenticate a call with a programmatic access token."""
    return {AUTHORIZATION_HEADER: f"Bearer {token}", TOKEN_TYPE_HEADER: TOKEN_TYPE}


def bearer_token(header_value: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value, or None."""
    if not header_value:
        return None
    scheme, _, token = header_value.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def auth_header_problem(authorization: str | None, token_type: str | None) -> str | None:
    """Why a service call's auth headers are not the two spec §2.2 names (None when they
    are): the fake's gate refuses such a call and the passive judge books it on the client."""
    if bearer_token(authorization) is None:
        return f"no {AUTHORIZATION_HEADER}: Bearer <token>"
    if (token_type or "").strip().upper() != TOKEN_TYPE:
        return f"{TOKEN_TYPE_HEADER}: {TOKEN_TYPE} is required"
    return None


def unrelated_token(real: str, *, overlap: int = 4) -> str:
    """A random bearer token that shares no run of ``overlap`` characters with ``real``:
    a wrong-token probe that carries no part of the real credential (a server that logs or
    echoes what it refuses learns nothing from it)."""
    import secrets

    candidate = ""
    for _ in range(100):  # a real token holding most 4-grams of hex could exhaust it
        candidate = secrets.token_hex(16)
        if not any(candidate[i:i + overlap] in real for i in range(len(candidate) - overlap + 1)):
            break
    return candidate
