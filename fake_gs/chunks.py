"""Chunk groups (facts, section 7): request chunks kept per job until a frame is whole.

The chunk group id is the idempotency key, bound to one frame by ``frame_sha256``. A
group holds each chunk's payload as a view of the request body it came in (no copy, and
nothing allocated for chunks not yet received: a chunk 0 declaring a 1 GiB frame costs its
own bytes only), hashes them in order in a worker thread while the next chunk is still on
the wire, and joins them into the frame in a worker thread once the last one is in (chunk
``i`` spans ``i * R`` where ``R`` is chunk 0's payload size, as every conforming splitter
cuts equal ranges). The caps count each open group's declared frame size, so what a group
can ever hold is refused up front. A finished group keeps only its metadata and request
id, so a replayed final chunk resolves to the original execution.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool

from contract.errors import ErrorCode
from fake_gs.chunk_machine import DONE, FAILED, FINALIZING, OPEN, GroupState
from fake_gs.errors import ApiError

__all__ = ["DONE", "FAILED", "FINALIZING", "OPEN", "ChunkGroup", "malformed", "new_group"]



@dataclass(kw_only=True)
class ChunkGroup(GroupState):
    """A group's state (the machine's view) with its chunks' bytes and bookkeeping."""

    group_id: str
    job_id: str
    #: Payload views of the chunks received, by index (None once released).
    parts: dict[int, memoryview] | None
    created_at: float
    touched_at: float
    request_id: str | None = None
    #: Times the group's frame was executed (at-most-once proof; see the admin state dump).
    executions: int = 0
    replays: int = 0
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    failure: ApiError | None = None
    #: In-order hashing while chunks arrive: the next index to hash and the running digest.
    hashed_next: int = 0
    hasher: Any = field(default_factory=hashlib.sha256)
    hash_task: asyncio.Task[None] | None = None
    #: Kept only for the ``replay-double-exec`` mutant, which must run the frame again.
    decoded: Any = None

    #: Bytes of the payloads in ``parts``.
    held: int = 0
    #: Who owns the group's job (the bearer token), for the per-account caps.
    owner: str = ""

    @property
    def buffered_bytes(self) -> int:
        return self.held if self.parts is not None else 0

    @property
    def reserved_bytes(self) -> int:
        """What the group counts against the caps: its whole frame until it is released."""
        return self.frame_size if self.parts is not None else 0

    def keep(self, idx: int, payload: memoryview) -> None:
        assert self.parts is not None
        self.parts[idx] = payload
        self.held += len(payload)
        self.received.add(idx)

    async def frame(self) -> bytes:
        """The whole frame, joined in a worker thread (one copy, off the event loop)."""
        parts = self.parts
        if parts is None:
            raise ApiError(ErrorCode.CHUNK_GROUP_RESTART_REQUIRED, f"chunk group {self.group_id} was released")
        views = [parts[i] for i in range(self.total)]
        return await run_in_threadpool(b"".join, views)

    def release(self) -> None:
        self.parts = None
        self.held = 0
        self.hasher = None

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

    # --- hashing in arrival order ------------------------------------------------------

    def advance_hash(self) -> None:
        """Hash newly contiguous chunks in a worker thread, off the event loop."""
        idle = self.hash_task is None or self.hash_task.done()
        if idle and self.hashed_next in self.received and self.parts is not None:
            self.hash_task = asyncio.get_running_loop().create_task(self._hash_loop())

    async def _hash_loop(self) -> None:
        while self.hashed_next in self.received and self.parts is not None and self.hasher is not None:
            await run_in_threadpool(self.hasher.update, self.parts[self.hashed_next])
            self.hashed_next += 1

    async def digest(self) -> str:
        """The full frame's sha256 once every chunk is in."""
        if self.hash_task is not None:
            await self.hash_task
        await self._hash_loop()
        if self.hashed_next != self.total or self.hasher is None:
            raise ApiError(ErrorCode.CHUNK_GROUP_MISSING_CHUNKS, f"chunk group {self.group_id} is incomplete")
        return str(self.hasher.hexdigest())


def malformed(message: str) -> ApiError:
    return ApiError(ErrorCode.MALFORMED_FRAME, message)


def new_group(job_id: str, route: str, desc: Mapping[str, Any], range_size: int, now: float,
              owner: str = "") -> ChunkGroup:
    return ChunkGroup(
        group_id=desc["chunk_group_id"],
        job_id=job_id,
        route=route,
        total=desc["total_chunks"],
        frame_sha256=desc["frame_sha256"],
        frame_size=desc["frame_size_bytes"],
        operation=desc.get("operation"),
        range_size=range_size,
        parts={},
        created_at=now,
        touched_at=now,
        owner=owner,
    )
