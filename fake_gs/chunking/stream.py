"""An octet body's head: read until its frame header is in, and what that header alone
rules out, before any more of the body is kept.

The door of the frame intake (:func:`fake_gs.chunking.intake.take`): the body's first
bytes are read until the frame header is in (:func:`read_head`), then judged
(:func:`opening`): the content type, an empty body, a legacy pickle payload, a header over
its length or container caps, a result chunk where a request chunk belongs. What is left
is a plain frame (read whole, :func:`read_rest`) or a request chunk (its payload streamed
by :mod:`fake_gs.chunking.payload`). A refused body is read to its end and dropped
(:func:`discard_rest`).
"""

from __future__ import annotations

import struct
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Literal, NamedTuple, Protocol

from contract import wire
from contract.errors import ErrorCode
from fake_gs.answers.refusals import ApiError
from fake_gs.settings import FakeSettings


class BodyReader(Protocol):
    """A request body as it arrives (``fake_gs.http.body.BodyReader``): its pieces, and
    what to free should the server drop it for another account."""

    on_evict: Callable[[], None] | None

    def chunks(self, limit: int) -> AsyncIterator[bytes | bytearray]: ...


class Head(NamedTuple):
    """What arrived of a body before its frame header could be read, and the rest of it."""

    data: bytearray
    rest: AsyncIterator[bytes | bytearray]


#: What :func:`opening` finds a body to be when the payload rules are waived and it holds
#: a legacy payload: nothing to decode (the route submits its stand-in request).
UNREAD: Literal["unread"] = "unread"


async def read_head(body: BodyReader, limit: int, max_header: int) -> Head:
    """Read until the frame's header is in (or the body ends, or the header length is over
    ``max_header``: the caller refuses that)."""
    rest = body.chunks(limit).__aiter__()
    data = bytearray()
    body.on_evict = data.clear
    need = 8
    try:
        while len(data) < need:
            try:
                data += await anext(rest)
            except StopAsyncIteration:
                break
            size = wire.frame_head_size(data)
            if size is not None:
                need = size if size - 8 <= max_header else 0
    finally:
        body.on_evict = None
    return Head(data, rest)


def opening(data: bytearray, media_refusal: ApiError | None, legacy_refused: bool,
            settings: FakeSettings) -> wire.ChunkHead | None | Literal["unread"]:
    """What the head alone says of a body: refused (ApiError), a request chunk (its head),
    a plain frame (None), or :data:`UNREAD` (a legacy payload the waived rules let in).
    A request chunk's descriptor is judged here too (:func:`descriptor_problem`)."""
    if media_refusal is not None:
        raise media_refusal
    if not data:
        raise ApiError(ErrorCode.MALFORMED_FRAME, "empty body: expected a DSSST1 frame")
    if wire.sniff_refused_payload(data) is not None and not legacy_refused:
        return UNREAD
    refuse_legacy(data)
    check_header(data, settings)
    found = chunk_head(data)
    if found is not None and found.kind != "request":
        raise malformed("expected a request chunk, got a result chunk")
    if found is not None:
        problem = descriptor_problem(found.desc, found.payload_len, settings.max_body_bytes)
        if problem is not None:
            raise malformed(problem)
    return found


def descriptor_problem(desc: Mapping[str, Any], payload_len: int, max_body: int) -> str | None:
    """What is wrong with a request chunk's descriptor that the codec does not check (its
    index in range, sizes that add up), or None."""
    idx, total, size = desc["chunk_idx"], desc["total_chunks"], desc["frame_size_bytes"]
    if idx >= total:
        return f"chunk_idx {idx} out of range for total_chunks {total}"
    if size > total * max_body:
        return f"frame_size_bytes {size} cannot fit in {total} chunks"
    if payload_len > size:
        return f"chunk payload of {payload_len} bytes exceeds frame_size_bytes {size}"
    if total == 1 and payload_len != size:
        return f"single chunk carries {payload_len} bytes, frame_size_bytes is {size}"
    if not str(desc.get("chunk_group_id", "")).strip():
        return "request chunk descriptor has an empty chunk_group_id"
    return None


def malformed(message: str) -> ApiError:
    return ApiError(ErrorCode.MALFORMED_FRAME, message)


def refuse_legacy(data: Any) -> None:
    kind = wire.sniff_refused_payload(data)
    if kind is not None:
        raise ApiError(ErrorCode.LEGACY_PAYLOAD_REFUSED,
                       f"legacy pickle/torch.save payloads are refused ({kind}); send a DSSST1 frame")


def check_header(data: Any, settings: FakeSettings) -> None:
    """Refuse a frame whose header is over the length cap, or holds more JSON arrays and
    objects than allowed, before anything parses it (bounded time and memory)."""
    if len(data) < 8:
        return
    (size,) = struct.unpack_from("<Q", data, 0)
    if size > settings.max_frame_header_bytes:
        raise malformed(f"malformed DSSST1 frame: header length {size} exceeds the "
                        f"{settings.max_frame_header_bytes} byte cap")
    if size > len(data) - 8:
        return  # the codec refuses it with the precise reason
    buf = data if isinstance(data, (bytes, bytearray)) else bytes(memoryview(data)[: 8 + size])
    if json_containers(buf, 8, 8 + size) > settings.max_json_containers:
        raise malformed(f"malformed DSSST1 frame: the header holds more than {settings.max_json_containers} "
                        "JSON arrays/objects")


def json_containers(data: bytes | bytearray, start: int = 0, end: int | None = None) -> int:
    """An upper bound of the arrays and objects a JSON text holds (brackets in strings
    count too), found without parsing it."""
    end = len(data) if end is None else end
    return data.count(b"[", start, end) + data.count(b"{", start, end)


def chunk_head(data: bytearray) -> wire.ChunkHead | None:
    """The request or result chunk ``data`` starts with; None for a plain frame, or for a
    body that ended before its header did (the codec then says what is wrong with it)."""
    size = wire.frame_head_size(data)
    if size is None or len(data) < size:
        return None
    try:
        return wire.read_chunk_head(data)
    except wire.WireError as exc:
        raise malformed(f"malformed DSSST1 frame: {exc}") from None


def request_chunk_head(data: bytearray) -> wire.ChunkHead | None:
    """The request chunk ``data`` starts with, or None (a plain frame, a result chunk, or
    bytes the handler will refuse)."""
    size = wire.frame_head_size(data)
    if size is None or len(data) < size:
        return None
    try:
        found = wire.read_chunk_head(data)
    except wire.WireError:
        return None
    return found if found is not None and found.kind == "request" else None


async def discard_rest(head: Head) -> None:
    """Read the rest of a body that is refused, keeping none of it: an oversized body is
    answered 413 whatever else is wrong with it, as when bodies were read whole first."""
    async for _ in head.rest:
        pass  # nothing kept: a drop for another account frees nothing more


async def read_rest(body: BodyReader, head: Head) -> bytearray:
    """The whole body: the head and everything after it, in one buffer."""
    data = head.data
    body.on_evict = data.clear
    try:
        async for piece in head.rest:
            data += piece
    finally:
        body.on_evict = None
    return data
