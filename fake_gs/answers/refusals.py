"""One exception type for every refusal, turned into the contract's error envelope.

Handlers raise :class:`ApiError`; the dispatcher answers it with :meth:`ApiError.envelope`,
built from the contract's ``ErrorEnvelope`` (``fake_gs.answers.forms.error`` turns it into the
spec's forms). Anything else that escapes is
a bug and becomes a 500 ``internal`` envelope (counted, so tests can prove none happen).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from contract.errors import STATUS_OF, ErrorCode, detail_entry
from contract.models import ErrorEnvelope
from fake_gs.answers.render import render


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

    def envelope(self) -> ErrorEnvelope:
        return envelope(self.code, self.message, self.detail)

    def body(self) -> dict[str, Any]:
        """The envelope as a dict (a failed request keeps it as its poll ``error``)."""
        return render(self.envelope())


def envelope(code: ErrorCode | str, message: str, detail: Iterable[Mapping[str, Any]] | None = None
             ) -> ErrorEnvelope:
    """The kit's error envelope (``contract.errors``), built from the contract's model: a
    string code, the message, and ``detail`` only when given."""
    if detail is None:
        return ErrorEnvelope(code=str(code), message=message)
    return ErrorEnvelope(code=str(code), message=message, detail=[dict(d) for d in detail])


def validation_error(exc: ValidationError, prefix: tuple[str | int, ...] = ()) -> ApiError:
    """A pydantic failure -> 400 ``validation_failed`` naming every bad field by loc."""
    details = [
        detail_entry(prefix + tuple(err.get("loc", ())), str(err.get("msg", "invalid")), str(err.get("type", "value_error")))
        for err in exc.errors(include_url=False, include_input=False)
    ]
    names = ", ".join(".".join(str(p) for p in d["loc"]) or "<body>" for d in details)
    return ApiError(ErrorCode.VALIDATION_FAILED, f"invalid request body: {names}", details)
