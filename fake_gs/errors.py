"""One exception type for every refusal, turned into the contract's error envelope.

Handlers raise :class:`ApiError`; the dispatcher answers it. Anything else that escapes is
a bug and becomes a 500 ``internal`` envelope (counted, so tests can prove none happen).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from contract.errors import STATUS_OF, ErrorCode, detail_entry, error_body


class ApiError(Exception):
    """A refusal with a contract error code; the status follows ``STATUS_OF``."""

    def __init__(
        self,
        code: ErrorCode,
        message: str,
        detail: Iterable[Mapping[str, Any]] | None = None,
        *,
        status: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.detail = list(detail) if detail is not None else None
        self.status = status if status is not None else STATUS_OF.get(code, 400)
        self.headers = dict(headers or {})
        if self.status in (429, 503):
            self.headers.setdefault("retry-after", "1")

    def body(self) -> dict[str, Any]:
        return error_body(self.code, self.message, self.detail)


def validation_error(exc: ValidationError, prefix: tuple[str | int, ...] = ()) -> ApiError:
    """A pydantic failure -> 400 ``validation_failed`` naming every bad field by loc."""
    details = [
        detail_entry(prefix + tuple(err.get("loc", ())), str(err.get("msg", "invalid")), str(err.get("type", "value_error")))
        for err in exc.errors(include_url=False, include_input=False)
    ]
    names = ", ".join(".".join(str(p) for p in d["loc"]) or "<body>" for d in details)
    return ApiError(ErrorCode.VALIDATION_FAILED, f"invalid request body: {names}", details)


def not_found(code: ErrorCode, what: str, ident: str) -> ApiError:
    return ApiError(code, f"{what} {ident!r} not found")
