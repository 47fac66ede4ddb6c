"""The two auth headers a real host wants (facts, section 2), in one place."""

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
