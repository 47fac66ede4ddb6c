"""Octet uploads: DSSST1 request chunks with the chunk-group protocol (facts, section 7).

Every chunk goes to the same path; only the final chunk's answer may carry a
``request_id``. On ``chunk_group_restart_required`` the whole group is replayed once from
chunk 0 with the very same chunks (same group id, same bytes); the other chunk-group codes
surface as their typed errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from client.errors import ChunkGroupRestartRequired, ProtocolError
from client.http import Answer, HttpSession
from contract.idempotency import Idempotency
from contract.routes import Route


def split_frame(
    frame: bytes,
    *,
    max_bytes: int,
    operation: str | None,
    force_chunk: bool,
    chunk_group_id: str | None = None,
) -> list[bytes]:
    """Cut a frame into request chunks (a list holding the frame itself when it may go plain)."""
    from contract import wire

    return wire.encode_byte_chunks(
        frame,
        "request",
        operation=operation,
        max_bytes=max_bytes,
        chunk_group_id=chunk_group_id,
        force_chunk=force_chunk,
    )


def upload(
    http: HttpSession,
    route: Route,
    chunks: Sequence[bytes],
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
    chunks: Sequence[bytes],
    path_params: Mapping[str, str],
    deadline: float | None,
    idempotency: Idempotency | None = None,
) -> dict[str, Any]:
    last = len(chunks) - 1
    answer: Answer | None = None
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
