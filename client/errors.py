"""Typed client failures.

Every failure renders the route, HTTP status, error code and ``x-snowflake-request-id``
it knows of in its message, because that quadruple is what a Cortex operator asks for
first when a run breaks.
"""

from __future__ import annotations

from typing import Any, ClassVar


class CortexError(Exception):
    """Base of every error this client raises.

    A subclass names the extra keyword arguments it keeps in ``extra_fields`` (and
    annotates them): one constructor stores them, so no subclass repeats an ``__init__``.
    Those listed in ``required_fields`` must be given.
    """

    extra_fields: ClassVar[tuple[str, ...]] = ()
    required_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(
        self,
        message: str,
        *,
        route: str | None = None,
        method: str | None = None,
        url: str | None = None,
        status: int | None = None,
        code: str | None = None,
        snowflake_request_id: str | None = None,
        request_id: str | None = None,
        job_id: str | None = None,
        **extra: Any,
    ) -> None:
        self._keep_extra(extra)
        self.message = message
        self.route = route
        self.method = method
        self.url = url
        self.status = status
        self.code = code
        self.snowflake_request_id = snowflake_request_id
        self.request_id = request_id
        self.job_id = job_id
        super().__init__(self._render())

    def _keep_extra(self, extra: dict[str, Any]) -> None:
        """Store the subclass's own fields (None when not given); refuse any other name."""
        name = type(self).__name__
        unknown = sorted(set(extra) - set(self.extra_fields))
        if unknown:
            raise TypeError(f"{name} got unexpected keyword arguments {unknown}")
        missing = [field for field in self.required_fields if field not in extra]
        if missing:
            raise TypeError(f"{name} needs the keyword arguments {missing}")
        for field in self.extra_fields:
            setattr(self, field, extra.get(field))

    def _render(self) -> str:
        parts = [
            f"route={self.route or '-'}",
            f"status={self.status if self.status is not None else '-'}",
            f"code={self.code or '-'}",
            f"x-snowflake-request-id={self.snowflake_request_id or '-'}",
        ]
        if self.request_id:
            parts.append(f"request_id={self.request_id}")
        if self.job_id:
            parts.append(f"job_id={self.job_id}")
        where = f" [{self.method} {self.url}]" if self.method and self.url else ""
        return f"{self.message} ({', '.join(parts)}){where}"


class ConfigError(CortexError, ValueError):
    """The configuration cannot drive a Cortex job (e.g. no target, non-Cortex backend)."""


class CortexHTTPError(CortexError):
    """A non-2xx answer that was not (or no longer) retried; ``body`` is its parsed body."""

    extra_fields = ("body",)
    body: Any


class CortexConnectionError(CortexError):
    """The server could not be reached (after retries, or once for create-job)."""


class ChunkGroupError(CortexHTTPError):
    """Base of the chunk-group answers a client must act on rather than retry blindly."""


class ChunkGroupRestartRequired(ChunkGroupError):
    """The server does not know the group: it must be replayed from chunk 0."""


class ChunkGroupConflict(ChunkGroupError):
    """The group id was reused with another frame, chunk count or chunk payload."""


class ChunkGroupMissingChunks(ChunkGroupError):
    """The final chunk arrived while earlier chunks of the group are missing."""


class ProtocolError(CortexError):
    """The server answered something the contract rules out."""


class AnswerTooLarge(ProtocolError):
    """An answer declared or sent more bytes than ``max_answer_bytes``; refused unread."""


class UnsafeLogKey(ProtocolError):
    """An execution-log key (spec §12.2) would name a file outside its download directory
    (``..``, an absolute path, a backslash, a control character) or a download would
    follow a symlink planted there; nothing of it was written."""

    extra_fields = ("key",)
    key: str | None


class ResultTooLarge(ProtocolError):
    """A request's result pages (or a stream's event pages) went past the poll policy's
    budget: ``max_result_bytes`` of result chunks or ``max_result_pages`` pages."""


class AmbiguousOutcome(CortexError):
    """A call that changes state failed after it may have reached the server.

    A read time-out, a connection cut after the request was sent, or a 500/502/503/504
    answer does not say whether the server ran the call; resending could run it twice (a
    second optimizer step). The client therefore did not resend, or ran out of resends
    with the same idempotency key; ``how_to_check`` says what to look at before calling
    again, ``attempt`` counts the tries made (1 = the first), ``idempotency_key`` is the
    key the tries carried (repeat the call with it on a server that honours keys).
    """

    extra_fields = ("attempt", "how_to_check", "idempotency_key")
    required_fields = ("attempt", "how_to_check")
    attempt: int
    how_to_check: str
    idempotency_key: str | None

    def _render(self) -> str:
        key = f", idempotency-key={self.idempotency_key}" if self.idempotency_key else ""
        return (f"{super()._render()} [attempt {self.attempt}{key}; "
                f"check before calling again: {self.how_to_check}]")


class RequestFailed(CortexError):
    """An asynchronous request ended ``failed``; ``error`` holds the server's error."""

    extra_fields = ("error",)
    error: Any


class RequestCancelled(RequestFailed):
    """An asynchronous request ended ``cancelled``."""


class DeadlineExceeded(CortexError):
    """A per-call deadline passed before the call succeeded."""


class PollTimeout(DeadlineExceeded):
    """A request (or job start-up) was not terminal within the poll timeout."""


class JobFailed(CortexError):
    """The job ended (failed, cancelled, terminated) instead of reaching ``running``."""

    extra_fields = ("state", "reason")
    state: str | None
    reason: str | None


class PromptTooLong(CortexError, ValueError):
    """A pre-tokenised prompt is at least the sampling sub-job's ``max_seq_len`` long."""

    extra_fields = required_fields = ("index", "length", "max_seq_len")
    index: int
    length: int
    max_seq_len: int


class PayloadTooLarge(CortexError, ValueError):
    """A body the contract caps (e.g. an ``operation`` forward payload) is too large."""


__all__ = [
    "AmbiguousOutcome",
    "AnswerTooLarge",
    "ChunkGroupConflict",
    "ChunkGroupError",
    "ChunkGroupMissingChunks",
    "ChunkGroupRestartRequired",
    "ConfigError",
    "CortexConnectionError",
    "CortexError",
    "CortexHTTPError",
    "DeadlineExceeded",
    "JobFailed",
    "NestedTensorRefused",
    "PayloadTooLarge",
    "PollTimeout",
    "PromptTooLong",
    "ProtocolError",
    "RequestCancelled",
    "RequestFailed",
    "UnsafeLogKey",
    "ResultTooLarge",
]


class InvalidArgument(CortexError, ValueError):
    """An argument the client cannot send at all (an id that is not valid UTF-8): raised
    before any request, instead of a bare UnicodeEncodeError from the URL encoder."""


class NestedTensorRefused(InvalidArgument):
    """A nested (jagged) tensor of a batch whose dense layout the client cannot know,
    refused before any byte is sent (``client.transports.jagged``); ``field`` names it."""

    extra_fields = required_fields = ("field",)
    field: str
