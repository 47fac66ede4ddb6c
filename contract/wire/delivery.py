"""Envelopes around frames in JSON answers: result-chunk poll events and inline results.

A result too big for one answer travels as ``result_chunk`` poll events (base64 chunk plus
its sha256); a small one may come inline as base64 (spec §9.4: the inline form). Requests say which
they accept in the ``op`` metadata of the frame they send.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence
from typing import Any

from contract.wire.basics import WireError, byte_view
from contract.wire.chunks import RESULT_CHUNK_KEY, decode_byte_chunks, encode_byte_chunks
from contract.wire.frame import WIRE_VERSION

OCTET_STREAM = "application/octet-stream"

_INLINE_FIELDS = (
    ("content_type", OCTET_STREAM),
    ("encoding", "base64"),
    ("wire_format", WIRE_VERSION),
)


def standard_request_metadata() -> dict[str, Any]:
    """The ``op`` metadata tensor-op requests carry (a fresh dict each call)."""
    return {"response_options": {"format": "dssst1", "delivery": "chunked"}}


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise WireError(f"{what}: payload_b64 is not valid base64: {exc}") from None


def result_chunk_events(frame: bytes, max_bytes: int) -> list[dict[str, Any]]:
    """Cut a result frame into ``result_chunk`` poll events (always the chunk envelope)."""
    chunks = encode_byte_chunks(frame, "result", max_bytes=max_bytes, force_chunk=True)
    return [
        {
            "type": RESULT_CHUNK_KEY,
            "payload_b64": base64.b64encode(chunk).decode("ascii"),
            "payload_sha256": hashlib.sha256(chunk).hexdigest(),
        }
        for chunk in chunks
    ]


def _event_chunk(i: int, event: Any) -> bytes:
    """The chunk bytes event ``i`` carries, once its type and sha256 check out."""
    if not isinstance(event, dict) or event.get("type") != RESULT_CHUNK_KEY:
        raise WireError(f"event {i} is not a result_chunk event")
    b64, sha = event.get("payload_b64"), event.get("payload_sha256")
    if not isinstance(b64, str) or not isinstance(sha, str):
        raise WireError(f"event {i} lacks payload_b64/payload_sha256 strings")
    chunk = _b64decode(b64, f"event {i}")
    if hashlib.sha256(chunk).hexdigest() != sha.lower():
        raise WireError(f"event {i}: payload_sha256 mismatch")
    return chunk


def decode_result_chunk_events(events: Sequence[dict[str, Any]]) -> bytes:
    """Check each event's sha256, then reassemble the result frame."""
    if not isinstance(events, Sequence) or isinstance(events, (str, bytes)):
        raise WireError("events must be a sequence of result_chunk events")
    chunks = [_event_chunk(i, event) for i, event in enumerate(events)]
    return decode_byte_chunks(chunks, "result")


def inline_frame(frame: bytes) -> dict[str, Any]:
    """Wrap a small frame as an inline base64 result (spec §9.4: the inline form)."""
    return {
        "content_type": OCTET_STREAM,
        "encoding": "base64",
        "wire_format": WIRE_VERSION,
        "payload_b64": base64.b64encode(byte_view(frame)).decode("ascii"),
    }


def is_inline_frame(obj: Any) -> bool:
    """True if ``obj`` is an inline DSSST1 result (extra keys are tolerated)."""
    return (
        isinstance(obj, dict)
        and all(obj.get(k) == v for k, v in _INLINE_FIELDS)
        and isinstance(obj.get("payload_b64"), str)
    )


def decode_inline(result: dict[str, Any]) -> bytes:
    """The frame bytes of an inline result; WireError names the wrong key."""
    if not isinstance(result, dict):
        raise WireError(f"inline result must be a dict, not {type(result).__name__}")
    for k, v in _INLINE_FIELDS:
        if result.get(k) != v:
            raise WireError(f"inline result: {k} must be {v!r}, got {result.get(k)!r}")
    b64 = result.get("payload_b64")
    if not isinstance(b64, str):
        raise WireError("inline result: payload_b64 must be a string")
    return _b64decode(b64, "inline result")
