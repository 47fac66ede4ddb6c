"""Error codes, the error envelope, and finding a code inside a gateway-wrapped body.

The kit's envelope (decided): every JSON error is ``{"code", "message"}`` with a string
code, plus a ``detail`` list of ``{"loc", "msg", "type"}`` for validation failures, so both
shapes the real service uses are present at once. The spec (§3.6) also allows an integer
``code`` or a bare ``detail`` list: :func:`is_error_envelope` accepts every allowed form and
:func:`error_code_of` finds a code in each.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import Any


class ErrorCode(StrEnum):
    """The string codes of the error envelope, grouped by the area of the service that refuses."""

    # Bad input: the body, its JSON or its fields
    INVALID_ARGUMENT = "invalid_argument"
    VALIDATION_FAILED = "validation_failed"
    UNKNOWN_FIELD = "unknown_field"
    MALFORMED_JSON = "malformed_json"
    INVALID_ID = "invalid_id"

    # Addressing and content types
    UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
    NOT_FOUND = "not_found"
    ROUTE_NOT_FOUND = "route_not_found"
    METHOD_NOT_ALLOWED = "method_not_allowed"

    # Auth
    UNAUTHENTICATED = "unauthenticated"
    FORBIDDEN = "forbidden"

    # Jobs: unknown ids, states and create-time rules
    JOB_NOT_FOUND = "job_not_found"
    SUB_JOB_NOT_FOUND = "sub_job_not_found"
    JOB_NOT_RUNNING = "job_not_running"
    JOB_CONFLICT = "job_conflict"
    CONFLICT = "conflict"
    MODEL_NOT_TRAINABLE = "model_not_trainable"
    UNKNOWN_MODEL = "unknown_model"
    WRONG_SUB_JOB_TYPE = "wrong_sub_job_type"

    # Checkpoints: save, load and create-time initialisation
    CHECKPOINT_NOT_FOUND = "checkpoint_not_found"
    DP_SIZE_MISMATCH = "dp_size_mismatch"
    CHECKPOINT_TYPE_MISMATCH = "checkpoint_type_mismatch"

    # Data-plane calls and operations
    SEQUENCE_TOO_LONG = "sequence_too_long"
    PROMPT_TOO_LONG = "prompt_too_long"
    UNKNOWN_OPERATION_TYPE = "unknown_operation_type"
    ROUTING_CONFLICT = "routing_conflict"
    ROUTING_HINT_REQUIRED = "routing_hint_required"
    LORA_NOT_CONFIGURED = "lora_not_configured"
    NOT_IMPLEMENTED = "not_implemented"

    # DSSST1 frames
    MALFORMED_FRAME = "malformed_frame"
    LEGACY_PAYLOAD_REFUSED = "legacy_payload_refused"
    FRAME_LIMIT = "frame_limit"

    # Chunk groups
    CHUNK_GROUP_RESTART_REQUIRED = "chunk_group_restart_required"
    CHUNK_GROUP_CONFLICT = "chunk_group_conflict"
    CHUNK_GROUP_MISSING_CHUNKS = "chunk_group_missing_chunks"
    CHUNK_GROUP_LIMIT = "chunk_group_limit"
    BUFFER_LIMIT = "buffer_limit"

    # Polling and results
    REQUEST_NOT_FOUND = "request_not_found"
    RESULT_EXPIRED = "result_expired"

    # At most once
    IDEMPOTENCY_CONFLICT = "idempotency_conflict"

    # Limits, load and availability: a body too big or too slow, a bound passed, a server busy
    PAYLOAD_TOO_LARGE = "payload_too_large"
    REQUEST_TIMEOUT = "request_timeout"
    LIMIT_EXCEEDED = "limit_exceeded"
    RATE_LIMITED = "rate_limited"
    UNAVAILABLE = "unavailable"

    # The server's own failures
    INTERNAL = "internal"
    #: The fake's execution-log store needs the ``logs`` extra (moto[server], boto3).
    LOGS_EXTRA_MISSING = "logs_extra_missing"


#: The HTTP status each code is answered with (in the enum's order, by area).
STATUS_OF: dict[ErrorCode, int] = {
    # Bad input
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.VALIDATION_FAILED: 400,
    ErrorCode.UNKNOWN_FIELD: 400,
    ErrorCode.MALFORMED_JSON: 400,
    ErrorCode.INVALID_ID: 400,
    # Addressing and content types
    ErrorCode.UNSUPPORTED_MEDIA_TYPE: 415,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.ROUTE_NOT_FOUND: 404,
    ErrorCode.METHOD_NOT_ALLOWED: 405,
    # Auth
    ErrorCode.UNAUTHENTICATED: 401,
    ErrorCode.FORBIDDEN: 403,
    # Jobs
    ErrorCode.JOB_NOT_FOUND: 404,
    ErrorCode.SUB_JOB_NOT_FOUND: 400,
    ErrorCode.JOB_NOT_RUNNING: 409,
    ErrorCode.JOB_CONFLICT: 409,
    ErrorCode.CONFLICT: 409,
    ErrorCode.MODEL_NOT_TRAINABLE: 400,
    ErrorCode.UNKNOWN_MODEL: 400,
    ErrorCode.WRONG_SUB_JOB_TYPE: 400,
    # Checkpoints
    ErrorCode.CHECKPOINT_NOT_FOUND: 404,
    ErrorCode.DP_SIZE_MISMATCH: 400,
    ErrorCode.CHECKPOINT_TYPE_MISMATCH: 400,
    # Data-plane calls and operations
    ErrorCode.SEQUENCE_TOO_LONG: 400,
    ErrorCode.PROMPT_TOO_LONG: 400,
    ErrorCode.UNKNOWN_OPERATION_TYPE: 400,
    ErrorCode.ROUTING_CONFLICT: 400,
    ErrorCode.ROUTING_HINT_REQUIRED: 400,
    ErrorCode.LORA_NOT_CONFIGURED: 400,
    ErrorCode.NOT_IMPLEMENTED: 501,
    # DSSST1 frames
    ErrorCode.MALFORMED_FRAME: 400,
    ErrorCode.LEGACY_PAYLOAD_REFUSED: 400,
    ErrorCode.FRAME_LIMIT: 400,
    # Chunk groups
    ErrorCode.CHUNK_GROUP_RESTART_REQUIRED: 409,
    ErrorCode.CHUNK_GROUP_CONFLICT: 409,
    ErrorCode.CHUNK_GROUP_MISSING_CHUNKS: 409,
    ErrorCode.CHUNK_GROUP_LIMIT: 429,
    ErrorCode.BUFFER_LIMIT: 413,
    # Polling and results
    ErrorCode.REQUEST_NOT_FOUND: 404,
    ErrorCode.RESULT_EXPIRED: 410,
    # At most once
    ErrorCode.IDEMPOTENCY_CONFLICT: 409,
    # Limits, load and availability
    ErrorCode.PAYLOAD_TOO_LARGE: 413,
    ErrorCode.REQUEST_TIMEOUT: 408,
    ErrorCode.LIMIT_EXCEEDED: 400,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.UNAVAILABLE: 503,
    # The server's own failures
    ErrorCode.INTERNAL: 500,
    ErrorCode.LOGS_EXTRA_MISSING: 501,
}


#: The code an answer known only by its status carries (an injected fault that names no
#: code): the general code of that status in :data:`STATUS_OF`.
GENERAL_CODE_OF: dict[int, ErrorCode] = {
    STATUS_OF[code]: code
    for code in (
        ErrorCode.INVALID_ARGUMENT,
        ErrorCode.UNAUTHENTICATED,
        ErrorCode.NOT_FOUND,
        ErrorCode.CONFLICT,
        ErrorCode.PAYLOAD_TOO_LARGE,
        ErrorCode.RATE_LIMITED,
        ErrorCode.INTERNAL,
    )
}


def general_code(status: int) -> ErrorCode:
    """The code to answer ``status`` with when nothing more specific is known; a status
    without a general code (503, and any the kit does not list) is ``unavailable``."""
    return GENERAL_CODE_OF.get(status, ErrorCode.UNAVAILABLE)


#: Chunk-group codes a client must act on rather than retry blindly.
CHUNK_GROUP_CODES = frozenset(
    {
        ErrorCode.CHUNK_GROUP_RESTART_REQUIRED,
        ErrorCode.CHUNK_GROUP_CONFLICT,
        ErrorCode.CHUNK_GROUP_MISSING_CHUNKS,
    }
)

#: Codes that make a transient-looking status (404, 409, ...) final: a retry gets the same
#: answer, so clients stop at once instead of spending their whole retry budget.
NON_RETRYABLE_CODES = CHUNK_GROUP_CODES | frozenset(
    {
        ErrorCode.JOB_NOT_RUNNING,
        ErrorCode.JOB_CONFLICT,
        ErrorCode.CHECKPOINT_NOT_FOUND,
        ErrorCode.ROUTE_NOT_FOUND,
        ErrorCode.IDEMPOTENCY_CONFLICT,
        ErrorCode.RESULT_EXPIRED,
    }
)

REQUEST_ID_HEADER = "x-snowflake-request-id"


def error_body(
    code: ErrorCode | str,
    message: str,
    detail: Iterable[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """Build the kit's error envelope."""
    body: dict[str, Any] = {"code": str(code), "message": message}
    if detail is not None:
        body["detail"] = [dict(d) for d in detail]
    return body


def detail_entry(loc: Iterable[str | int], msg: str, type_: str = "value_error") -> dict[str, Any]:
    """One ``detail`` item naming a bad field by its location."""
    return {"loc": list(loc), "msg": msg, "type": type_}


def find_error_code(body: Any, _depth: int = 0) -> str | None:
    """Find a ``code`` anywhere in an error body, also inside JSON wrapped in strings.

    Gateways sometimes answer ``{"message": "{\\"code\\": \\"chunk_group_conflict\\"}"}``.
    """
    if _depth > 8:
        return None
    if isinstance(body, (bytes, bytearray)):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        text = body.strip()
        if not text or text[0] not in "{[\"":
            return None
        try:
            return find_error_code(json.loads(text), _depth + 1)
        except RecursionError:  # nested past the parser's depth: no code to find
            return None
        except ValueError:
            start = text.find("{")
            if start > 0:
                return find_error_code(text[start:], _depth + 1)
            return None
    if isinstance(body, Mapping):
        code = body.get("code")
        if isinstance(code, str) and code:
            return code
        for value in body.values():
            found = find_error_code(value, _depth + 1)
            if found:
                return found
        return None
    if isinstance(body, list):
        for value in body:
            found = find_error_code(value, _depth + 1)
            if found:
                return found
    return None


#: The one string code the published spec documents (spec §9.3); every other string code
#: is the kit's decision, which a real server may answer with an integer code instead.
SPEC_STRING_CODES = frozenset({ErrorCode.CHUNK_GROUP_RESTART_REQUIRED.value})


def _detail_ok(detail: Any) -> bool:
    return (
        isinstance(detail, list)
        and bool(detail)
        and all(
            isinstance(d, Mapping) and isinstance(d.get("loc"), list) and isinstance(d.get("msg"), str)
            for d in detail
        )
    )


def is_error_envelope(body: Any) -> bool:
    """True when ``body`` takes a form spec §3.6 allows: ``{"message", "code"}`` with a
    non-empty message and a non-empty string or an integer code, and/or a non-empty
    ``detail`` list of ``{"loc": [...], "msg", "type"}`` (the kit's envelope has both)."""
    if not isinstance(body, Mapping):
        return False
    detail = body.get("detail")
    if detail is not None and not _detail_ok(detail):
        return False
    code, message = body.get("code"), body.get("message")
    string_code = isinstance(code, str) and bool(code)
    int_code = isinstance(code, int) and not isinstance(code, bool)
    coded = isinstance(message, str) and bool(message) and (string_code or int_code)
    return coded or detail is not None


def error_code_of(body: Any) -> str | None:
    """The code to report for an error body, in any allowed form: its string code, else its
    integer code, else the ``type`` of its first ``detail`` entry."""
    found = find_error_code(body)
    if found or not isinstance(body, Mapping):
        return found
    code = body.get("code")
    if isinstance(code, int) and not isinstance(code, bool):
        return str(code)
    detail = body.get("detail")
    if isinstance(detail, list) and _detail_ok(detail):
        kind = detail[0].get("type")
        return kind if isinstance(kind, str) and kind else None
    return None
