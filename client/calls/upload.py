"""Octet uploads: DSSST1 request chunks with the chunk-group protocol (spec §9.3).

Every chunk goes to the same path; only the final chunk's answer may carry a
``request_id``. On ``chunk_group_restart_required`` the whole group is replayed once from
chunk 0 with the very same chunks (same group id, same bytes); the other chunk-group codes
surface as their typed errors.

One copy of the frame: a chunk is sent as its header followed by views of the frame's own
bytes (:class:`ChunkBody`), so no chunk is ever joined into a new ``bytes``; a batch given
as tensors is not even joined into a frame (its parts are the tensors' own memory). The
frame is hashed once, when its chunk headers are made, before the first byte goes out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from client.calls.session import HttpSession, ReadAnswer
from client.errors import ChunkGroupRestartRequired, ProtocolError
from contract.idempotency import Idempotency
from contract.routes import Route

#: Chunks up to this size go as one ``bytes`` (a small copy costs less than a write per piece).
JOIN_BELOW = 256 * 1024


class ChunkBody:
    """Chunk ``idx`` of a plan as one HTTP body sent in pieces (its header, then views of the
    frame). ``requests`` sends it with a ``Content-Length`` (from ``len``) and hands each
    piece to the socket as it is; it can be iterated again, so a resend sends the same
    bytes. Once its last piece is handed over, the next chunk's header is made, while this
    chunk is still being answered."""

    def __init__(self, plan: Any, idx: int) -> None:
        self.plan, self.idx = plan, idx

    def __len__(self) -> int:
        return int(self.plan.body_size(self.idx))

    def __iter__(self) -> Iterator[Any]:
        yield from self.plan.pieces(self.idx)
        if self.idx + 1 < len(self.plan):
            self.plan.prefix(self.idx + 1)

    def __bytes__(self) -> bytes:
        """The body joined (a copy): for recorders and tests that keep what was sent."""
        return b"".join(self.plan.pieces(self.idx))


def split_frame(
    frame: Any,
    *,
    max_bytes: int,
    operation: str | None,
    force_chunk: bool,
    chunk_group_id: str | None = None,
) -> list[ChunkBody | bytes]:
    """The bodies a frame goes as (one holding the frame itself when it may go plain).

    ``frame`` is bytes-like or the parts of ``contract.wire.dumps_parts``; nothing is copied
    but chunks small enough to join (:data:`JOIN_BELOW`)."""
    from contract import wire

    plan = wire.plan_chunks(
        frame,
        "request",
        operation=operation,
        max_bytes=max_bytes,
        chunk_group_id=chunk_group_id,
        force_chunk=force_chunk,
    )
    if min(plan.range_size, plan.size) + wire.CHUNK_HEADER_ALLOWANCE <= JOIN_BELOW:
        return [plan.chunk(idx) for idx in range(len(plan))]
    return [ChunkBody(plan, idx) for idx in range(len(plan))]


def upload(
    http: HttpSession,
    route: Route,
    chunks: Sequence[ChunkBody | bytes],
    *,
    path_params: Mapping[str, str],
    deadline: float | None = None,
    idempotency: Idempotency | None = None,
) -> dict[str, Any]:
    """POST each chunk in order and return the final answer ``{"request_id", "job_id"}``."""
    if not chunks:
        raise ValueError("nothing to upload")
    try:
        return _send_group(http, route, chunks, path_params, deadline, idempotency)
    except ChunkGroupRestartRequired:
        # The server lost (or never saw the start of) the group: replay it once, whole.
        return _send_group(http, route, chunks, path_params, deadline, idempotency)


def _send_group(
    http: HttpSession,
    route: Route,
    chunks: Sequence[ChunkBody | bytes],
    path_params: Mapping[str, str],
    deadline: float | None,
    idempotency: Idempotency | None = None,
) -> dict[str, Any]:
    last = len(chunks) - 1
    answer: ReadAnswer | None = None
    for index, chunk in enumerate(chunks):
        answer = http.call(route, path_params=path_params, data=chunk, deadline=deadline,
                           idempotency=idempotency)
        body = answer.body if isinstance(answer.body, Mapping) else {}
        if index < last and body.get("request_id"):
            raise ProtocolError(
                f"non-final chunk {index}/{len(chunks)} was answered with a request_id",
                route=route.name, method=route.method, status=answer.status,
                snowflake_request_id=answer.snowflake_request_id,
                request_id=str(body.get("request_id")),
            )
    assert answer is not None
    body = answer.body if isinstance(answer.body, Mapping) else {}
    if not body.get("request_id"):
        raise ProtocolError(
            f"final chunk of {len(chunks)} was answered without a request_id: {answer.body!r}"[:500],
            route=route.name, method=route.method, status=answer.status,
            snowflake_request_id=answer.snowflake_request_id,
        )
    return dict(body)
