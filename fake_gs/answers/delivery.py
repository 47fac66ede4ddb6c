"""How a finished request's result reaches the client (spec §6.8, §9.4).

Plain JSON for results without tensors; a DSSST1 frame otherwise, inline (base64) when
small or asked for, else cut into ``result_chunk`` events paged by an opaque cursor.
Pages are fixed slices of a list computed once, so re-reading a cursor is retry-safe.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import math
from dataclasses import dataclass
from typing import Any

from contract.errors import ErrorCode
from contract.limits import DEFAULT_MAX_EVENTS, MAX_EVENTS_CAP
from contract.models import ResultChunkEvent
from fake_gs.answers.check import encode
from fake_gs.answers.refusals import ApiError
from fake_gs.answers.render import dumps


def is_tensor(value: Any) -> bool:
    return hasattr(value, "dtype") and hasattr(value, "shape") and hasattr(value, "numel")


def has_tensor(value: Any, _depth: int = 0) -> bool:
    """True if a tensor sits anywhere in ``value`` (dicts, lists, tuples)."""
    if _depth > 64:
        return False
    if is_tensor(value):
        return True
    if isinstance(value, dict):
        return any(has_tensor(v, _depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return any(has_tensor(v, _depth + 1) for v in value)
    return False


def jsonable(value: Any) -> Any:
    """Plain JSON for a result without tensors: scalars unwrapped, non-finite floats -> None."""
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if is_tensor(value):
        return jsonable(value.tolist())
    item = getattr(value, "item", None)
    if callable(item):
        return jsonable(item())
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return jsonable(tolist())
    return str(value)


@dataclass(frozen=True)
class Delivered:
    """A result encoded once, as the JSON bytes polls splice in (never re-serialised).

    ``raw`` is the poll's ``result`` (plain JSON or the inline frame object); ``events`` the
    ``result_chunk`` events, each already JSON. ``nbytes`` is what the request holds."""

    raw: bytes | None = None
    events: list[bytes] | None = None
    form: str = "json"

    @property
    def nbytes(self) -> int:
        return len(self.raw or b"") + sum(len(e) for e in self.events or ())


def chunk_event(chunk: bytes) -> bytes:
    """One ``result_chunk`` event as JSON bytes, built from the contract's model; the base64
    text (which needs no JSON escaping) is spliced in, copied once, here."""
    event = ResultChunkEvent.model_construct(  # payload_b64 is a placeholder: encode() splices it
        type="result_chunk", payload_b64="", payload_sha256=hashlib.sha256(chunk).hexdigest())
    return encode(event, {"payload_b64": (b'"', base64.b64encode(chunk), b'"')})


def prepare(result: Any, *, force_frame: bool, mode: str, chunk_bytes: int) -> Delivered:
    """Encode a result once, in the form ``mode`` (one of contract.forms.DELIVERIES) asks for."""
    if not force_frame and not has_tensor(result):
        return Delivered(raw=dumps(jsonable(result if result is not None else {})))
    from contract import wire

    frame = wire.dumps(result)
    if mode == "inline" or (mode == "auto" and len(frame) <= chunk_bytes):
        return Delivered(raw=dumps(wire.inline_frame(frame)), form="inline")
    chunks = wire.encode_byte_chunks(frame, "result", max_bytes=chunk_bytes, force_chunk=True)
    del frame
    return Delivered(events=[chunk_event(c) for c in chunks], form="chunks")


def parse_max_events(raw: str | None, *, uncapped: bool = False, cap: int = MAX_EVENTS_CAP) -> int:
    """``max_events``: default 16, over ``cap`` (512) clamps to it, anything not a positive
    int is 400."""
    if raw is None or raw == "":
        return DEFAULT_MAX_EVENTS
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(ErrorCode.INVALID_ARGUMENT, f"max_events must be a positive integer, got {raw[:40]!r}",
                       [{"loc": ["query", "max_events"], "msg": "not an integer", "type": "int_parsing"}]) from None
    if value < 1:
        raise ApiError(ErrorCode.INVALID_ARGUMENT, f"max_events must be >= 1, got {value}",
                       [{"loc": ["query", "max_events"], "msg": "must be >= 1", "type": "greater_than_equal"}])
    return value if uncapped else min(value, cap)


def encode_cursor(request_id: str, offset: int) -> str:
    """Opaque, bound to its request: ``base64url("<request_id>/<offset>")``."""
    return base64.urlsafe_b64encode(f"{request_id}/{offset}".encode()).decode("ascii").rstrip("=")


def decode_cursor(request_id: str, cursor: str | None) -> int:
    if cursor is None or cursor == "":
        return 0
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        text = base64.urlsafe_b64decode(padded.encode("ascii")).decode("utf-8")
        rid, _, off = text.rpartition("/")
        offset = int(off)
    except (ValueError, UnicodeError, binascii.Error):
        raise ApiError(ErrorCode.INVALID_ARGUMENT, "cursor is not one this server issued",
                       [{"loc": ["query", "cursor"], "msg": "unknown cursor", "type": "value_error"}]) from None
    if rid != request_id or offset < 0:
        raise ApiError(ErrorCode.INVALID_ARGUMENT, "cursor belongs to another request",
                       [{"loc": ["query", "cursor"], "msg": "unknown cursor", "type": "value_error"}])
    return offset
