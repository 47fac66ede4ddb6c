"""Chunk groups (spec §9.3): request chunks kept per job until a frame is whole.

The chunk group id is the idempotency key, bound to one frame by ``frame_sha256``. A
group's chunks land in one :class:`~fake_gs.chunking.buffer.GroupBuffer` at their offsets
(chunk ``i`` spans ``i * R`` where ``R`` is chunk 0's payload size, as every conforming
splitter cuts equal ranges), written as their bytes arrive: memory follows the bytes
received (a chunk 0 declaring a 1 GiB frame costs its own bytes only), the frame is never
joined, and it is decoded in place. Chunks are hashed in frame order on worker threads as
their bytes arrive (:class:`~fake_gs.chunking.frame_hash.FrameHash`). The caps count each open group's
declared frame size, so what a group can ever hold is refused up front. A finished group keeps only its
metadata and request id, so a replayed final chunk resolves to the original execution.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fake_gs.answers.refusals import ApiError
from fake_gs.chunking.buffer import GroupBuffer
from fake_gs.chunking.machine import DONE, FAILED, FINALIZING, OPEN, GroupState

__all__ = ["DONE", "FAILED", "FINALIZING", "OPEN", "ChunkGroup", "new_group"]


@dataclass(kw_only=True)
class ChunkGroup(GroupState):
    """A group's state (the machine's view) with its frame buffer and bookkeeping."""

    group_id: str
    job_id: str
    #: The frame's bytes as they arrive (None once released).
    buffer: GroupBuffer | None
    created_at: float
    touched_at: float
    request_id: str | None = None
    #: Times the group's frame was executed (at-most-once proof; see the admin state dump).
    executions: int = 0
    replays: int = 0
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    failure: ApiError | None = None
    #: Chunk indices whose bytes are being written into the buffer right now, each with
    #: the event set once that write ends (another copy of the chunk waits for it).
    arriving: dict[int, asyncio.Event] = field(default_factory=dict)
    #: Kept only when the chunk rules say a replay runs the frame again (``Execute.keep_decoded``).
    decoded: Any = None
    #: Who owns the group's job (the bearer token), for the per-account caps.
    owner: str = ""

    @property
    def buffered_bytes(self) -> int:
        """Bytes received into the buffer (each kept chunk once)."""
        return self.buffer.written if self.buffer is not None else 0

    @property
    def reserved_bytes(self) -> int:
        """What the group counts against the caps: its whole frame until it is released."""
        return self.frame_size if self.buffer is not None else 0

    def release(self) -> None:
        """Forget the buffer: its memory goes once nothing decoded from it is left."""
        self.buffer = None

    def describe(self) -> dict[str, Any]:
        return {
            "chunk_group_id": self.group_id,
            "job_id": self.job_id,
            "route": self.route,
            "status": self.status,
            "total_chunks": self.total,
            "received_chunks": len(self.received),
            "frame_size_bytes": self.frame_size,
            "buffered_bytes": self.buffered_bytes,
            "reserved_bytes": self.reserved_bytes,
            "executions": self.executions,
            "replays": self.replays,
            "request_id": self.request_id,
        }


def new_group(job_id: str, route: str, desc: Mapping[str, Any], range_size: int, now: float,
              owner: str = "", buffer: GroupBuffer | None = None) -> ChunkGroup:
    """A group opened by its first chunk; ``buffer`` is the one that chunk was written into
    as it arrived (a new one otherwise)."""
    return ChunkGroup(
        group_id=desc["chunk_group_id"],
        job_id=job_id,
        route=route,
        total=desc["total_chunks"],
        frame_sha256=desc["frame_sha256"],
        frame_size=desc["frame_size_bytes"],
        operation=desc.get("operation"),
        range_size=range_size,
        buffer=GroupBuffer(desc["frame_size_bytes"]) if buffer is None else buffer,
        created_at=now,
        touched_at=now,
        owner=owner,
    )
